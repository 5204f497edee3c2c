"""Authorization decisions over an in-memory metadata store, the auth_policies value, and the HTTP path rules."""

from __future__ import annotations

import json

import pytest

from magnetar.broker.authorization import AuthAction, AuthorizationService, AuthPolicies
from magnetar.broker.errors import AuthorizationError, InvalidRequest
from magnetar.broker.names import TopicName
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.resources import MetadataResources
from magnetar.server.auth.http import Need, Rule, rule_for

P, C = AuthAction.PRODUCE, AuthAction.CONSUME
TOPIC = TopicName.parse("persistent://acme/app/orders")


async def _service(policies: AuthPolicies) -> AuthorizationService:
    store = MemoryMetadataStore()
    await store.put("/admin/policies/acme", json.dumps({"adminRoles": ["acme-admin"]}).encode())
    await store.put("/admin/policies/acme/app", json.dumps({"auth_policies": policies.to_json()}).encode())
    return AuthorizationService(MetadataResources(store), enabled=True, super_user_roles=frozenset({"root"}))


async def test_roles_are_checked_as_pulsar_does() -> None:
    policies = (AuthPolicies().grant_namespace("writer", frozenset({P}))
                .grant_topic(str(TOPIC), "one", frozenset({C}))
                .grant_namespace("reader", frozenset({C}))
                .grant_subscription("audit", frozenset({"auditor"})))
    authz = await _service(policies)
    partition = TOPIC.partition(3)
    assert await authz.allowed(TOPIC, "root", P) and await authz.allowed(TOPIC, "acme-admin", C)
    assert await authz.allowed(partition, "writer", P) and not await authz.allowed(TOPIC, "writer", C)
    assert await authz.allowed(partition, "one", C)  # a partition inherits its topic's grants
    assert not await authz.allowed(TopicName.parse("persistent://acme/app/other"), "one", C)
    assert not await authz.allowed(TOPIC, "reader", C, subscription="audit")
    assert await authz.allowed(TOPIC, "reader", C, subscription="mine")
    assert not await authz.allowed(TOPIC, None, C)
    assert await authz.can_lookup(TOPIC, "writer") and await authz.can_lookup(TOPIC, "reader")
    assert not await authz.can_lookup(TOPIC, "stranger")
    with pytest.raises(AuthorizationError, match="Client is not authorized to Produce"):
        await authz.check(TOPIC, "reader", P)
    with pytest.raises(AuthorizationError, match="Client is not authorized to Lookup"):
        await authz.check_lookup(TOPIC, "stranger")
    assert await authz.is_tenant_admin("acme", "acme-admin") and not await authz.is_tenant_admin("other", "acme-admin")


def test_policies_round_trip_and_validate() -> None:
    p = AuthPolicies().grant_namespace("w", frozenset({P, C})).grant_topic("persistent://a/b/t", "r", frozenset({C}))
    p = p.grant_subscription("s", frozenset({"x", "y"}))
    assert AuthPolicies.from_json(p.to_json()) == p
    assert p.to_json()["namespace_auth"] == {"w": ["consume", "produce"]}
    assert p.revoke_subscription("s", "x").revoke_subscription("s", "y").subscription_auth_roles == {}
    assert p.revoke_topic("persistent://a/b/t", "r").destination_auth == {}
    assert p.revoke_namespace("w").namespace_auth == {}
    assert AuthPolicies.from_json(None) == AuthPolicies()
    for bad in ({"namespace_auth": {"w": ["fly"]}}, {"namespace_auth": []}, "x",
                {"subscription_auth_roles": {"s": "x"}}, {"namespace_auth": {"": ["produce"]}}):
        with pytest.raises(InvalidRequest):
            AuthPolicies.from_json(bad)


@pytest.mark.parametrize(("method", "path", "rule"), [
    ("GET", "/status.html", Rule(Need.NOTHING)),
    ("GET", "/admin/v2/openapi.json", Rule(Need.NOTHING)),
    ("GET", "/metrics", Rule(Need.NOTHING)),
    ("GET", "/admin/v2/clusters", Rule(Need.ROLE)),
    ("PUT", "/admin/v2/clusters/c2", Rule(Need.SUPER_USER)),
    ("GET", "/admin/v2/tenants", Rule(Need.SUPER_USER)),
    ("GET", "/admin/v2/tenants/acme", Rule(Need.TENANT_ADMIN, "acme")),
    ("POST", "/admin/v2/tenants/acme", Rule(Need.SUPER_USER)),
    ("POST", "/admin/v2/namespaces/acme/app/permissions/w", Rule(Need.TENANT_ADMIN, "acme")),
    ("GET", "/admin/v2/persistent/acme/app/t/stats", Rule(Need.LOOKUP, "acme", "persistent://acme/app/t")),
    ("GET", "/admin/v2/persistent/acme/app/t/internalStats", Rule(Need.LOOKUP, "acme", "persistent://acme/app/t")),
    ("GET", "/admin/v2/persistent/acme/app/t/subscriptions", Rule(Need.TENANT_ADMIN, "acme")),
    ("DELETE", "/admin/v2/persistent/acme/app/t", Rule(Need.TENANT_ADMIN, "acme")),
    ("GET", "/admin/v2/persistent/acme/app", Rule(Need.LIST_TOPICS, "acme", namespace="acme/app")),
    ("GET", "/admin/v2/persistent/acme/app/partitioned", Rule(Need.LIST_TOPICS, "acme", namespace="acme/app")),
    ("GET", "/admin/v2/namespaces/acme/app/topics", Rule(Need.LIST_TOPICS, "acme", namespace="acme/app")),
    ("GET", "/admin/v2/namespaces/acme/app", Rule(Need.TENANT_ADMIN, "acme")),
    ("GET", "/admin/v2/non-persistent/acme", Rule(Need.TENANT_ADMIN, "acme")),
    ("GET", "/admin/v2/brokers/health", Rule(Need.SUPER_USER)),
    ("GET", "/admin/v3/transactions/coordinatorStats", Rule(Need.SUPER_USER)),  # a route added later: closed
    ("GET", "/lookup/v2/topic/persistent/a/b/c%2Fd", Rule(Need.LOOKUP, "a", "persistent://a/b/c/d")),
    ("GET", "/admin/v2/persistent/a/b/c/partitions", Rule(Need.LOOKUP, "a", "persistent://a/b/c")),
    ("PUT", "/admin/v2/persistent/a/b/c/partitions", Rule(Need.TENANT_ADMIN, "a")),
    ("GET", "/lookup/v2/other", Rule(Need.ROLE)),
])
def test_path_rules(method: str, path: str, rule: Rule) -> None:
    assert rule_for(method, path, metrics_authenticated=False) == rule


def test_metrics_rule_follows_the_setting() -> None:
    assert rule_for("GET", "/metrics", metrics_authenticated=True) == Rule(Need.ROLE)
