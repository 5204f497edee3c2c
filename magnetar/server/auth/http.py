"""Authentication and authorization of every HTTP request, as one aiohttp middleware driven by path rules.

The rules look only at the method and the path, so a route added later is covered without being touched:

* ``/status.html`` and ``/admin/v2/openapi.json`` are open; ``/metrics`` needs credentials only with
  ``authenticateMetricsEndpoint``;
* tenant-scoped admin paths (``/admin/v2/namespaces/{tenant}/...``, ``/admin/v2/persistent/{tenant}/...``,
  ``non-persistent``, ``schemas``, and ``GET /admin/v2/tenants/{tenant}``) need a super-user or an admin role
  of that tenant;
* paths are matched raw, as the router matches them (``%2F`` stays inside its segment);
* a topic's lookup (``GET /lookup/v2/topic/...``, and its ``/bundle``), partition count
  (``GET /admin/v2/persistent/.../partitions``, what clients with an ``http://`` service URL ask) and stats
  (``stats``, ``partitioned-stats``, ``internalStats``: Pulsar's GET_STATS) need produce or consume on the
  topic, as the binary LOOKUP;
* a namespace's topic list (``GET /admin/v2/persistent/{tenant}/{ns}``, its ``/partitioned``,
  ``non-persistent``, ``GET /admin/v2/namespaces/{tenant}/{ns}/topics``) needs produce or consume granted on
  the namespace, as Pulsar's GET_TOPICS;
* ``GET /admin/v2/clusters...`` needs any authenticated role;
* every other admin path (tenant writes, brokers, clusters writes, anything new) needs a super-user;
* other paths need an authenticated role.

No credentials, or bad ones: 401 ``Authentication required``; a role that may not: 403. The role is left
in ``request["magnetar.role"]``.
"""

from __future__ import annotations

import enum
import re
import urllib.parse
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from magnetar.broker.errors import AuthenticationError, InvalidTopicName
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.server.auth.context import SecurityContext
from magnetar.server.auth.service import HTTP_FAILURE_MESSAGE
from magnetar.server.auth.tls import peer_certificate

ROLE_KEY = "magnetar.role"
OPEN_PATHS = frozenset({"/status.html", "/admin/v2/openapi.json"})
METRICS_PATHS = frozenset({"/metrics", "/metrics/"})
_TENANT_SCOPED = re.compile(r"^/admin/v[23]/(?:namespaces|persistent|non-persistent|schemas)/([^/]+)(?:/|$)")
_TENANT = re.compile(r"^/admin/v[23]/tenants/([^/]+)/?$")
_CLUSTERS = re.compile(r"^/admin/v[23]/clusters(?:/|$)")
_HTTP_LOOKUP = re.compile(r"^/lookup/v2/topic/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/]+)/?$")
_HTTP_LOOKUP_BUNDLE = re.compile(r"^/lookup/v2/topic/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/]+)/bundle/?$")
_PARTITIONS = re.compile(r"^/admin/v2/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/]+)/partitions/?$")
_STATS = re.compile(r"^/admin/v2/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/]+)"
                    r"/(?:stats|partitioned-stats|internalStats|partitioned-internalStats)/?$")
_TOPIC_LIST = re.compile(r"^/admin/v2/(?:(?:persistent|non-persistent)/([^/]+)/([^/]+)(?:/partitioned)?"
                         r"|namespaces/([^/]+)/([^/]+)/topics)/?$")


class Need(enum.Enum):
    NOTHING = "nothing"
    ROLE = "an authenticated role"
    LOOKUP = "produce or consume on the topic"
    LIST_TOPICS = "produce or consume on the namespace"
    TENANT_ADMIN = "a tenant admin role"
    SUPER_USER = "a super-user role"


@dataclass(frozen=True, slots=True)
class Rule:
    need: Need
    tenant: str | None = None
    topic: str | None = None  # for LOOKUP: the full topic name
    namespace: str | None = None  # for LIST_TOPICS: tenant/namespace


def _unquote(segment: str) -> str:
    return urllib.parse.unquote(segment)


def rule_for(method: str, path: str, *, metrics_authenticated: bool) -> Rule:
    """The rule for a request; ``path`` is the raw path the router matches (``%2F`` still inside a
    segment: the decoded path would split ``a%2Fb`` into two segments and match no topic rule)."""
    if path in OPEN_PATHS:
        return Rule(Need.NOTHING)
    if path in METRICS_PATHS:
        return Rule(Need.ROLE if metrics_authenticated else Need.NOTHING)
    lookup = (_HTTP_LOOKUP.match(path) or _HTTP_LOOKUP_BUNDLE.match(path)
              or ((_PARTITIONS.match(path) or _STATS.match(path)) if method == "GET" else None))
    if lookup is not None:
        domain, tenant, namespace, local = (_unquote(g) for g in lookup.groups())
        return Rule(Need.LOOKUP, tenant, f"{domain}://{tenant}/{namespace}/{local}")
    if not path.startswith("/admin/"):
        return Rule(Need.ROLE)
    if method == "GET" and (listing := _TOPIC_LIST.match(path)) is not None:
        tenant, namespace = (_unquote(g) for g in listing.groups() if g is not None)
        return Rule(Need.LIST_TOPICS, tenant, namespace=f"{tenant}/{namespace}")
    if (m := _TENANT_SCOPED.match(path)) is not None:
        return Rule(Need.TENANT_ADMIN, _unquote(m.group(1)))
    if (m := _TENANT.match(path)) is not None and method == "GET":
        return Rule(Need.TENANT_ADMIN, _unquote(m.group(1)))
    if _CLUSTERS.match(path) is not None and method == "GET":
        return Rule(Need.ROLE)
    return Rule(Need.SUPER_USER)


def auth_middleware(security: SecurityContext) -> Middleware:
    metrics_authenticated = security.settings.authenticate_metrics_endpoint

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        rule = rule_for(request.method, request.rel_url.raw_path, metrics_authenticated=metrics_authenticated)
        if rule.need is Need.NOTHING:
            return await handler(request)
        try:
            role = _authenticate(security, request)
        except AuthenticationError:
            return web.json_response({"reason": HTTP_FAILURE_MESSAGE}, status=401)
        request[ROLE_KEY] = role
        if not await _allowed(security, rule, role):
            what = "this tenant" if rule.need is not Need.SUPER_USER else "this resource"
            return web.json_response({"reason": f"Don't have permission to administrate resources on {what}"},
                                     status=403)
        return await handler(request)

    return middleware


def _authenticate(security: SecurityContext, request: web.Request) -> str | None:
    authn = security.authn
    if authn is None:
        return None
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    identity = authn.authenticate_http(
        request.headers.get("Authorization"), peer_certificate(ssl_object), request.remote or "?"
    )
    return identity.role


async def _allowed(security: SecurityContext, rule: Rule, role: str | None) -> bool:
    authz = security.authz
    if authz is None or rule.need is Need.ROLE:
        return True
    if rule.need is Need.TENANT_ADMIN and rule.tenant is not None:
        return await authz.is_tenant_admin(rule.tenant, role)
    if rule.need is Need.LOOKUP and rule.topic is not None:
        try:
            return await authz.can_lookup(TopicName.parse(rule.topic), role)
        except InvalidTopicName:
            return await authz.is_tenant_admin(rule.tenant or "", role)  # the handler answers 400
    if rule.need is Need.LIST_TOPICS and rule.namespace is not None:
        try:
            return await authz.can_list_topics(NamespaceName.parse(rule.namespace), role)
        except InvalidTopicName:
            return await authz.is_tenant_admin(rule.tenant or "", role)  # the handler answers 400
    return authz.is_super_user(role)
