"""The authorization decisions, Pulsar's rules:

* a super-user role (``superUserRoles``) may do everything;
* a tenant's ``adminRoles`` may administer the tenant's namespaces and topics, and produce and consume there;
* any other role needs the action granted on the namespace or on the topic (a partition inherits its
  partitioned topic's grants); consuming from a subscription listed in ``subscription_auth_roles`` also
  needs the role in that list; a lookup (and a topic's stats) needs produce or consume; a namespace's topic list
  needs produce or consume granted on the namespace.

Roles are plain strings; None is an unauthenticated caller and is refused everything when authorization
is on. Decisions read the tenants' and namespaces' records each time, through ``magnetar.resources`` (whose
cache the store's watch keeps current, so admin changes apply to the next request).
"""

from __future__ import annotations

import logging

from magnetar.broker.authorization.policies import AuthAction, AuthPolicies
from magnetar.broker.errors import AuthorizationError, InvalidRequest, MetadataError, TopicNotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources, Policies, TenantInfo

log = logging.getLogger("magnetar.broker.authorization")


class AuthorizationService:
    def __init__(
        self, resources: MetadataResources, *, enabled: bool, super_user_roles: frozenset[str]
    ) -> None:
        self.resources = resources
        self.enabled = enabled
        self.super_user_roles = super_user_roles

    async def _tenant(self, tenant: str) -> TenantInfo:
        try:
            stored = await self.resources.tenants.get(tenant)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
        return stored.value if stored is not None else TenantInfo()

    async def _policies(self, ns: NamespaceName) -> Policies:
        try:
            return await self.resources.namespaces.policies(ns)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    def is_super_user(self, role: str | None) -> bool:
        return role is not None and role in self.super_user_roles

    async def is_tenant_admin(self, tenant: str, role: str | None) -> bool:
        if role is None:
            return False
        if self.is_super_user(role):
            return True
        return role in (await self._tenant(tenant)).admin_roles

    async def auth_policies(self, ns: NamespaceName) -> AuthPolicies:
        stored = (await self._policies(ns)).get("auth_policies")
        try:
            return AuthPolicies.from_json(stored)
        except InvalidRequest:
            log.warning("namespace %s has unreadable auth_policies: refusing non-admin roles", ns)
            return AuthPolicies()

    async def allowed(self, topic: TopicName, role: str | None, action: AuthAction,
                      subscription: str | None = None) -> bool:
        """May ``role`` do ``action`` on ``topic`` (always True when authorization is off)?"""
        if not self.enabled:
            return True
        if role is None:
            return False
        if await self.is_tenant_admin(topic.tenant, role):
            return True
        policies = await self.auth_policies(topic.namespace_name)
        names = {str(topic), str(topic.partitioned_topic_name)}
        if action is AuthAction.CONSUME and subscription is not None and not policies.subscription_allows(
            subscription, role
        ):
            return False
        return policies.allows(names, role, action)

    async def can_lookup(self, topic: TopicName, role: str | None) -> bool:
        return await self.allowed(topic, role, AuthAction.PRODUCE) or await self.allowed(
            topic, role, AuthAction.CONSUME
        )

    async def can_list_topics(self, ns: NamespaceName, role: str | None) -> bool:
        """A namespace's topic list: its tenant's admins, and roles granted produce or consume on the namespace
        itself (a grant on one topic is not enough), as Pulsar's GET_TOPICS."""
        if not self.enabled:
            return True
        if role is None:
            return False
        if await self.is_tenant_admin(ns.tenant, role):
            return True
        policies = await self.auth_policies(ns)
        return policies.allows((), role, AuthAction.PRODUCE) or policies.allows((), role, AuthAction.CONSUME)

    async def check(self, topic: TopicName, role: str | None, action: AuthAction,
                    subscription: str | None = None) -> None:
        """Raise AuthorizationError (with Pulsar's message) unless allowed."""
        if not await self.allowed(topic, role, action, subscription):
            await self._refuse_missing_namespace(topic)
            verb = "Produce" if action is AuthAction.PRODUCE else "subscribe"
            log.info("role %r refused %s on %s", role, action.value, topic)
            raise AuthorizationError(f"Client is not authorized to {verb}")

    async def check_lookup(self, topic: TopicName, role: str | None, what: str = "Lookup") -> None:
        if not await self.can_lookup(topic, role):
            await self._refuse_missing_namespace(topic)
            log.info("role %r refused %s on %s", role, what, topic)
            raise AuthorizationError(f"Client is not authorized to {what}")

    async def _refuse_missing_namespace(self, topic: TopicName) -> None:
        """A refused topic whose namespace does not exist is not found, as Pulsar answers (TopicNotFound)."""
        try:
            exists = await self.resources.namespaces.exists(topic.namespace_name)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
        if not exists:
            raise TopicNotFound(f"Namespace {topic.namespace_name} does not exist")
