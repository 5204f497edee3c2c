"""A namespace's ``auth_policies`` as Pulsar stores them in the namespace policies:

    {"namespace_auth": {role: [action, ...]},
     "destination_auth": {"persistent://t/ns/topic": {role: [action, ...]}},
     "subscription_auth_roles": {subscription: [role, ...]}}

Values are immutable; every change returns a new value that the admin writes back by compare-and-set.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.errors import InvalidRequest

ROLES_MAX = 10_000  # per map: a namespace's policies stay one small metadata record
ROLE_CHARS_MAX = 1024


class AuthAction(enum.Enum):
    PRODUCE = "produce"
    CONSUME = "consume"
    FUNCTIONS = "functions"
    SOURCES = "sources"
    SINKS = "sinks"
    PACKAGES = "packages"


Grants = Mapping[str, frozenset[AuthAction]]


def parse_actions(value: Any) -> frozenset[AuthAction]:
    """A JSON list of action names (``["produce", "consume"]``); 400 on anything else."""
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise InvalidRequest("The body must be a list of actions, e.g. [\"produce\", \"consume\"]")
    try:
        return frozenset(AuthAction(x) for x in value)
    except ValueError:
        names = ", ".join(a.value for a in AuthAction)
        raise InvalidRequest(f"Unknown action in {value}: use {names}") from None


def check_role(role: str) -> str:
    if not role or len(role) > ROLE_CHARS_MAX:
        raise InvalidRequest(f"A role must have 1 to {ROLE_CHARS_MAX} characters")
    return role


def _grants(value: Any, what: str) -> dict[str, frozenset[AuthAction]]:
    if not isinstance(value, dict) or len(value) > ROLES_MAX:
        raise InvalidRequest(f"{what} must be an object of role -> [actions]")
    return {check_role(str(role)): parse_actions(actions) for role, actions in value.items()}


def _roles(value: Any, what: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value) or len(value) > ROLES_MAX:
        raise InvalidRequest(f"{what} must be a list of roles")
    return frozenset(check_role(x) for x in value)


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def _sorted(actions: Iterable[AuthAction]) -> list[str]:
    return sorted(a.value for a in actions)


@dataclass(frozen=True, slots=True)
class AuthPolicies:
    namespace_auth: Grants = field(default_factory=dict)
    destination_auth: Mapping[str, Grants] = field(default_factory=dict)
    subscription_auth_roles: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Any) -> AuthPolicies:
        """Parse (and validate) the JSON form; None or {} is the empty policy."""
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise InvalidRequest("auth_policies must be an object")
        topics = _or_empty(value.get("destination_auth"))
        if not isinstance(topics, dict) or len(topics) > ROLES_MAX:
            raise InvalidRequest("destination_auth must be an object of topic -> {role: [actions]}")
        subs = _or_empty(value.get("subscription_auth_roles"))
        if not isinstance(subs, dict) or len(subs) > ROLES_MAX:
            raise InvalidRequest("subscription_auth_roles must be an object of subscription -> [roles]")
        return cls(
            namespace_auth=_grants(_or_empty(value.get("namespace_auth")), "namespace_auth"),
            destination_auth={str(t): _grants(g, f"destination_auth[{t}]") for t, g in topics.items()},
            subscription_auth_roles={str(s): _roles(r, f"subscription_auth_roles[{s}]") for s, r in subs.items()},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace_auth": grants_json(self.namespace_auth),
            "destination_auth": {t: grants_json(g) for t, g in self.destination_auth.items()},
            "subscription_auth_roles": {s: sorted(r) for s, r in self.subscription_auth_roles.items()},
        }

    # ---- checks ------------------------------------------------------------------------------------------

    def allows(self, topics: Iterable[str], role: str, action: AuthAction) -> bool:
        """Does ``role`` hold ``action`` on the namespace or on one of ``topics`` (a partition and its parent)?"""
        if action in self.namespace_auth.get(role, frozenset()):
            return True
        return any(action in self.destination_auth.get(t, {}).get(role, frozenset()) for t in topics)

    def subscription_allows(self, subscription: str, role: str) -> bool:
        """A subscription with listed roles admits only those roles; an unlisted one admits everyone."""
        roles = self.subscription_auth_roles.get(subscription)
        return not roles or role in roles

    # ---- changes (each returns a new value) ---------------------------------------------------------------

    def grant_namespace(self, role: str, actions: frozenset[AuthAction]) -> AuthPolicies:
        return _replace(self, namespace_auth={**self.namespace_auth, check_role(role): actions})

    def revoke_namespace(self, role: str) -> AuthPolicies:
        return _replace(self, namespace_auth={r: a for r, a in self.namespace_auth.items() if r != role})

    def grant_topic(self, topic: str, role: str, actions: frozenset[AuthAction]) -> AuthPolicies:
        grants = {**self.destination_auth.get(topic, {}), check_role(role): actions}
        return _replace(self, destination_auth={**self.destination_auth, topic: grants})

    def revoke_topic(self, topic: str, role: str) -> AuthPolicies:
        grants = {r: a for r, a in self.destination_auth.get(topic, {}).items() if r != role}
        others = {t: g for t, g in self.destination_auth.items() if t != topic}
        return _replace(self, destination_auth={**others, topic: grants} if grants else others)

    def grant_subscription(self, subscription: str, roles: frozenset[str]) -> AuthPolicies:
        merged = self.subscription_auth_roles.get(subscription, frozenset()) | roles
        return _replace(self, subscription_auth_roles={**self.subscription_auth_roles, subscription: merged})

    def revoke_subscription(self, subscription: str, role: str) -> AuthPolicies:
        left = self.subscription_auth_roles.get(subscription, frozenset()) - {role}
        others = {s: r for s, r in self.subscription_auth_roles.items() if s != subscription}
        return _replace(self, subscription_auth_roles={**others, subscription: left} if left else others)


def grants_json(grants: Grants) -> dict[str, list[str]]:
    return {role: _sorted(actions) for role, actions in grants.items()}


def _replace(p: AuthPolicies, **changes: Any) -> AuthPolicies:
    values = {"namespace_auth": p.namespace_auth, "destination_auth": p.destination_auth,
              "subscription_auth_roles": p.subscription_auth_roles, **changes}
    return AuthPolicies(**values)
