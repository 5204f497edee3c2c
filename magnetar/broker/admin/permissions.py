"""Granting and revoking permissions (Pulsar's namespace, topic and subscription permission resources).

Every change is a read-modify-write of the namespace's ``auth_policies`` by compare-and-set
(:meth:`BrokerAdmin.update_policy`); a concurrent change makes the request fail with 409, never lose a grant.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.authorization.policies import AuthAction, AuthPolicies, check_role, grants_json
from magnetar.broker.errors import PreconditionFailed
from magnetar.broker.names import NamespaceName, TopicName

FIELD = "auth_policies"


class PermissionsAdmin:
    def __init__(self, admin: BrokerAdmin) -> None:
        self.admin = admin

    async def _policies(self, ns: NamespaceName) -> AuthPolicies:
        return AuthPolicies.from_json(await self.admin.policy(ns, FIELD))

    async def _change(self, ns: NamespaceName, change: Any) -> None:
        await self.admin.update_policy(ns, FIELD, lambda current: change(AuthPolicies.from_json(current)).to_json())

    # ---- namespace ---------------------------------------------------------------------------------------

    async def namespace_permissions(self, ns: NamespaceName) -> dict[str, list[str]]:
        return grants_json((await self._policies(ns)).namespace_auth)

    async def grant_namespace(self, ns: NamespaceName, role: str, actions: frozenset[AuthAction]) -> None:
        await self._change(ns, lambda p: p.grant_namespace(role, actions))

    async def revoke_namespace(self, ns: NamespaceName, role: str) -> None:
        await self._change(ns, lambda p: p.revoke_namespace(role))

    # ---- subscriptions -----------------------------------------------------------------------------------

    async def subscription_permissions(self, ns: NamespaceName) -> dict[str, list[str]]:
        return {s: sorted(r) for s, r in (await self._policies(ns)).subscription_auth_roles.items()}

    async def grant_subscription(self, ns: NamespaceName, subscription: str, roles: list[str]) -> None:
        checked = frozenset(check_role(r) for r in roles)
        await self._change(ns, lambda p: p.grant_subscription(subscription, checked))

    async def revoke_subscription(self, ns: NamespaceName, subscription: str, role: str) -> None:
        await self._change(ns, lambda p: p.revoke_subscription(subscription, role))

    # ---- topics --------------------------------------------------------------------------------------------

    async def topic_permissions(self, topic: TopicName) -> dict[str, list[str]]:
        """The namespace's grants merged with the topic's own (as Pulsar answers)."""
        policies = await self._policies(topic.namespace_name)
        merged: dict[str, set[AuthAction]] = {r: set(a) for r, a in policies.namespace_auth.items()}
        for role, actions in policies.destination_auth.get(str(topic), {}).items():
            merged.setdefault(role, set()).update(actions)
        return grants_json({r: frozenset(a) for r, a in merged.items()})

    async def grant_topic(self, topic: TopicName, role: str, actions: frozenset[AuthAction]) -> None:
        await self._change(topic.namespace_name, lambda p: p.grant_topic(str(topic), role, actions))

    async def revoke_topic(self, topic: TopicName, role: str) -> None:
        def revoke(p: AuthPolicies) -> AuthPolicies:
            if role not in p.destination_auth.get(str(topic), {}):
                raise PreconditionFailed("Permissions are not set at the topic level")
            return p.revoke_topic(str(topic), role)

        await self._change(topic.namespace_name, revoke)
