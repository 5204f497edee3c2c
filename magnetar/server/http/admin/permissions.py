"""Admin routes for permissions (Pulsar's ``Namespaces`` and ``PersistentTopics`` permission resources):

* ``GET /admin/v2/namespaces/{t}/{ns}/permissions`` -> ``{role: [actions]}``
* ``POST|DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{role}`` (POST body: ``["produce", "consume"]``)
* ``GET /admin/v2/namespaces/{t}/{ns}/permissions/subscription`` -> ``{subscription: [roles]}``
* ``POST /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{subscription}`` (body: ``[roles]``)
* ``DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{subscription}/{role}``
* ``GET /admin/v2/persistent/{t}/{ns}/{topic}/permissions`` and ``POST|DELETE .../permissions/{role}``
"""

from __future__ import annotations

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_namespace, parse_topic
from magnetar.broker.admin.permissions import PermissionsAdmin
from magnetar.broker.authorization.policies import AuthAction, parse_actions
from magnetar.broker.errors import InvalidRequest
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.server.http.admin import openapi as s
from magnetar.server.http.routes import Route, json_body, match, no_content, ok

NS = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions"
ACTIONS = {"type": "array", "items": {"type": "string", "enum": [a.value for a in AuthAction]}}
GRANTS = {"type": "object", "additionalProperties": s.STRING_LIST}


def _ns(req: web.Request) -> NamespaceName:
    return parse_namespace(match(req, "tenant"), match(req, "namespace"))


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


async def _actions(req: web.Request) -> frozenset[AuthAction]:
    return parse_actions(await json_body(req, required=True))


def permission_routes(admin: BrokerAdmin) -> list[Route]:
    perms = PermissionsAdmin(admin)

    async def ns_get(req: web.Request) -> web.Response:
        return ok(await perms.namespace_permissions(_ns(req)))

    async def ns_grant(req: web.Request) -> web.Response:
        await perms.grant_namespace(_ns(req), match(req, "role"), await _actions(req))
        return no_content()

    async def ns_revoke(req: web.Request) -> web.Response:
        await perms.revoke_namespace(_ns(req), match(req, "role"))
        return no_content()

    async def sub_get(req: web.Request) -> web.Response:
        return ok(await perms.subscription_permissions(_ns(req)))

    async def sub_grant(req: web.Request) -> web.Response:
        roles = await json_body(req, required=True)
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise InvalidRequest("The body must be a list of roles")
        await perms.grant_subscription(_ns(req), match(req, "subscription"), roles)
        return no_content()

    async def sub_revoke(req: web.Request) -> web.Response:
        await perms.revoke_subscription(_ns(req), match(req, "subscription"), match(req, "role"))
        return no_content()

    async def topic_get(req: web.Request) -> web.Response:
        return ok(await perms.topic_permissions(_topic(req)))

    async def topic_grant(req: web.Request) -> web.Response:
        await perms.grant_topic(_topic(req), match(req, "role"), await _actions(req))
        return no_content()

    async def topic_revoke(req: web.Request) -> web.Response:
        await perms.revoke_topic(_topic(req), match(req, "role"))
        return no_content()

    tag = "permissions"
    return [
        Route("GET", NS, ns_get, "The namespace's permissions by role", tag, result=GRANTS),
        Route("POST", NS + "/{role}", ns_grant, "Grant actions on the namespace to a role", tag, ok=204,
              body=ACTIONS, body_required=True),
        Route("DELETE", NS + "/{role}", ns_revoke, "Revoke a role's namespace permissions", tag, ok=204),
        Route("GET", NS + "/subscription", sub_get, "Roles allowed on each restricted subscription", tag,
              result=GRANTS),
        Route("POST", NS + "/subscription/{subscription}", sub_grant, "Allow roles on a subscription", tag, ok=204,
              body=s.STRING_LIST, body_required=True),
        Route("DELETE", NS + "/{subscription}/{role}", sub_revoke, "Remove a role from a subscription", tag, ok=204),
        Route("GET", TOPIC, topic_get, "The topic's permissions (with the namespace's)", tag, result=GRANTS),
        Route("POST", TOPIC + "/{role}", topic_grant, "Grant actions on the topic to a role", tag, ok=204,
              body=ACTIONS, body_required=True),
        Route("DELETE", TOPIC + "/{role}", topic_revoke, "Revoke a role's topic permissions", tag, ok=204),
    ]
