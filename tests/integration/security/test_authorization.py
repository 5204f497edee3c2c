"""Authorization with the official client and the admin API: namespace permissions granted and revoked
with ``magnetar admin`` (token credentials on its command line), produce/consume/read allowed and
denied per role, subscription and topic permissions, tenant admins, the super-user, ``auth_policies`` in a
namespace creation body, and the admin endpoints' 401/403/200 per role."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar import protocol as proto
from tests.integration.security.conftest import (
    FAIL_FAST_S,
    SecureBroker,
    bearer,
    client,
    http,
    raw_exchange,
    start_broker,
    token_broker_settings,
)
from tests.integration.security.pki import token

NS = "acme/app"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, keys_dir: Path, secret_key: bytes) -> Iterator[SecureBroker]:
    proc = start_broker(Path(tmp_path_factory.mktemp("authz")), token_broker_settings(keys_dir))
    try:
        base = f"http://127.0.0.1:{proc.web_port}/admin/v2"
        root = bearer(token(secret_key, "admin"))
        assert http("PUT", base + "/tenants/acme", headers=root,
                    body={"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]})[0] == 204
        assert http("PUT", f"{base}/namespaces/{NS}", headers=root)[0] == 204
        yield proc
    finally:
        proc.kill()


def admin_cli(broker: SecureBroker, secret_key: bytes, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", f"http://127.0.0.1:{broker.web_port}",
         "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken",
         "--auth-params", f"token:{token(secret_key, role)}", *args],
        capture_output=True, text=True, timeout=60,
    )


def rest(broker: SecureBroker, secret_key: bytes, method: str, path: str, body: object = None,
         role: str = "admin") -> tuple[int, object]:
    return http(method, f"http://127.0.0.1:{broker.web_port}/admin/v2{path}",
                headers=bearer(token(secret_key, role)), body=body)


@pytest.fixture
def as_role(broker: SecureBroker, secret_key: bytes, closing: list[pulsar.Client]):  # type: ignore[no-untyped-def]
    def make(role: str) -> pulsar.Client:
        c = client(broker.url, authentication=pulsar.AuthenticationToken(token(secret_key, role)))
        closing.append(c)
        return c

    return make


def _topic(ns: str = NS) -> str:
    return f"persistent://{ns}/t-{uuid.uuid4().hex[:8]}"


def test_namespace_permissions_decide_produce_and_consume(broker: SecureBroker, secret_key: bytes, as_role) -> None:  # type: ignore[no-untyped-def]
    assert admin_cli(broker, secret_key, "admin", "namespaces", "grant-permission", NS,
                     "--role", "writer", "--actions", "produce").returncode == 0
    assert rest(broker, secret_key, "POST", f"/namespaces/{NS}/permissions/reader", ["consume"], "acme-admin")[0] == 204
    shown = admin_cli(broker, secret_key, "acme-admin", "namespaces", "permissions", NS)
    assert json.loads(shown.stdout) == {"writer": ["produce"], "reader": ["consume"]}

    topic = _topic()
    writer, reader, stranger = as_role("writer"), as_role("reader"), as_role("stranger")
    consumer = reader.subscribe(topic, "s")
    writer.create_producer(topic).send(b"allowed")
    assert consumer.receive(timeout_millis=10_000).data() == b"allowed"
    assert reader.create_reader(topic, pulsar.MessageId.earliest).read_next(10_000).data() == b"allowed"
    with pytest.raises(pulsar.AuthorizationError):
        writer.subscribe(topic, "w")
    with pytest.raises(pulsar.AuthorizationError):
        writer.create_reader(topic, pulsar.MessageId.earliest)
    with pytest.raises(pulsar.AuthorizationError):
        reader.create_producer(topic)
    with pytest.raises(pulsar.AuthorizationError):
        stranger.create_producer(topic)
    with pytest.raises(pulsar.AuthorizationError):
        stranger.get_topic_partitions(topic)

    assert rest(broker, secret_key, "DELETE", f"/namespaces/{NS}/permissions/writer")[0] == 204
    with pytest.raises(pulsar.AuthorizationError):
        as_role("writer").create_producer(_topic())


def test_stranger_cannot_grant_itself(broker: SecureBroker, secret_key: bytes) -> None:
    refused = admin_cli(broker, secret_key, "stranger", "namespaces", "grant-permission", NS,
                        "--role", "stranger", "--actions", "produce,consume")
    assert refused.returncode == 1 and "403" in refused.stderr


def test_subscription_permission_limits_a_subscription_to_its_roles(broker: SecureBroker, secret_key: bytes,
                                                                    as_role) -> None:  # type: ignore[no-untyped-def]
    for role in ("auditor", "consumer-b"):
        assert rest(broker, secret_key, "POST", f"/namespaces/{NS}/permissions/{role}", ["consume"])[0] == 204
    assert admin_cli(broker, secret_key, "admin", "namespaces", "grant-subscription-permission", NS,
                     "--subscription", "audit", "--roles", "auditor").returncode == 0
    listed = rest(broker, secret_key, "GET", f"/namespaces/{NS}/permissions/subscription")
    assert listed == (200, {"audit": ["auditor"]})
    topic, shared = _topic(), pulsar.ConsumerType.Shared
    as_role("auditor").subscribe(topic, "audit", consumer_type=shared)
    with pytest.raises(pulsar.AuthorizationError):
        as_role("consumer-b").subscribe(topic, "audit", consumer_type=shared)
    as_role("consumer-b").subscribe(topic, "other")
    assert rest(broker, secret_key, "DELETE", f"/namespaces/{NS}/permissions/audit/auditor")[0] == 204
    as_role("consumer-b").subscribe(topic, "audit", consumer_type=shared)  # no roles listed: open to consumers


def test_topic_permission_covers_that_topic_only(broker: SecureBroker, secret_key: bytes, as_role) -> None:  # type: ignore[no-untyped-def]
    topic, sibling = _topic(), _topic()
    assert admin_cli(broker, secret_key, "admin", "topics", "grant-permission", topic,
                     "--role", "one-topic", "--actions", "produce,consume").returncode == 0
    local = topic.rsplit("/", 1)[1]
    status, shown = rest(broker, secret_key, "GET", f"/persistent/{NS}/{local}/permissions")
    assert status == 200 and shown["one-topic"] == ["consume", "produce"]  # type: ignore[index]
    c = as_role("one-topic")
    c.create_producer(topic).send(b"x")
    c.subscribe(topic, "s")
    with pytest.raises(pulsar.AuthorizationError):
        c.create_producer(sibling)
    assert rest(broker, secret_key, "DELETE", f"/persistent/{NS}/{local}/permissions/one-topic")[0] == 204
    assert rest(broker, secret_key, "DELETE", f"/persistent/{NS}/{local}/permissions/one-topic")[0] == 412
    with pytest.raises(pulsar.AuthorizationError):
        as_role("one-topic").create_producer(topic)


def test_schemas_need_lookup_or_produce_permission(broker: SecureBroker, secret_key: bytes) -> None:
    T = proto.pb.BaseCommand
    topic = _topic()
    get = T(type=T.GET_SCHEMA)
    get.getSchema.request_id, get.getSchema.topic = 1, topic
    create = T(type=T.GET_OR_CREATE_SCHEMA)
    create.getOrCreateSchema.request_id, create.getOrCreateSchema.topic = 2, topic
    create.getOrCreateSchema.schema.name, create.getOrCreateSchema.schema.type = "s", proto.pb.Schema.String
    create.getOrCreateSchema.schema.schema_data = b""
    stranger = token(secret_key, "stranger")
    refused = raw_exchange(broker.port, stranger, get, T.GET_SCHEMA_RESPONSE).getSchemaResponse
    assert (refused.error_code, refused.error_message) == (proto.pb.AuthorizationError,
                                                           "Client is not authorized to GetSchema")
    created = raw_exchange(broker.port, stranger, create, T.GET_OR_CREATE_SCHEMA_RESPONSE).getOrCreateSchemaResponse
    assert created.error_code == proto.pb.AuthorizationError
    allowed = raw_exchange(broker.port, token(secret_key, "acme-admin"), create, T.GET_OR_CREATE_SCHEMA_RESPONSE)
    assert not allowed.getOrCreateSchemaResponse.HasField("error_code")


def test_revoked_permission_closes_connected_producers_and_consumers(broker: SecureBroker, secret_key: bytes,
                                                                     closing: list[pulsar.Client]) -> None:
    topic = _topic()
    local = topic.rsplit("/", 1)[1]
    path = f"/persistent/{NS}/{local}/permissions/revokee"
    assert rest(broker, secret_key, "POST", path, ["produce", "consume"])[0] == 204
    c = client(broker.url, timeout_s=FAIL_FAST_S,
               authentication=pulsar.AuthenticationToken(token(secret_key, "revokee")))
    closing.append(c)
    producer = c.create_producer(topic, send_timeout_millis=2000)
    consumer = c.subscribe(topic, "kept-out")
    producer.send(b"before")
    assert consumer.receive(timeout_millis=10_000).data() == b"before"
    assert rest(broker, secret_key, "DELETE", path)[0] == 204
    assert broker.wait_for(lambda log: f"of role 'revokee' on {topic}" in log and log.count(
        f"of role 'revokee' on {topic}") >= 2, 15)
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"after")


def test_tenant_admin_and_super_user_need_no_grants(broker: SecureBroker, as_role) -> None:  # type: ignore[no-untyped-def]
    for role in ("acme-admin", "admin"):
        c = as_role(role)
        topic = _topic()
        consumer = c.subscribe(topic, "s")
        c.create_producer(topic).send(role.encode())
        assert consumer.receive(timeout_millis=10_000).data() == role.encode()
    with pytest.raises(pulsar.AuthorizationError):
        as_role("acme-admin").create_producer(_topic("public/default"))  # another tenant's namespace


def test_auth_policies_in_the_namespace_creation_body(broker: SecureBroker, secret_key: bytes) -> None:
    base = f"http://127.0.0.1:{broker.web_port}/admin/v2/namespaces/acme/seeded"
    body = {"auth_policies": {"namespace_auth": {"seeded-writer": ["produce"]}}}
    assert http("PUT", base, headers=bearer(token(secret_key, "acme-admin")), body=body)[0] == 204
    assert http("GET", base + "/permissions", headers=bearer(token(secret_key, "acme-admin"))) == (
        200, {"seeded-writer": ["produce"]})
    bad = {"auth_policies": {"namespace_auth": {"w": ["fly"]}}}
    assert http("PUT", base + "2", headers=bearer(token(secret_key, "admin")), body=bad)[0] == 400


ADMIN_CASES = [
    # (method, path, {role: status}); None is no credentials
    ("GET", "/admin/v2/tenants", {None: 401, "writer": 403, "acme-admin": 403, "admin": 200}),
    ("GET", "/admin/v2/tenants/acme", {None: 401, "writer": 403, "acme-admin": 200, "admin": 200}),
    ("PUT", "/admin/v2/tenants/newco", {None: 401, "writer": 403, "acme-admin": 403}),
    ("GET", "/admin/v2/clusters", {None: 401, "writer": 200, "acme-admin": 200, "admin": 200}),
    ("GET", f"/admin/v2/namespaces/{NS}", {None: 401, "writer": 403, "acme-admin": 200, "admin": 200}),
    ("GET", "/admin/v2/namespaces/public/default", {None: 401, "acme-admin": 403, "admin": 200}),
    ("GET", f"/admin/v2/persistent/{NS}", {None: 401, "stranger": 403, "acme-admin": 200, "admin": 200}),
    ("GET", f"/admin/v2/namespaces/{NS}/permissions", {None: 401, "writer": 403, "acme-admin": 200}),
    ("GET", "/admin/v2/brokers/health", {None: 401, "acme-admin": 403, "admin": 200}),
    ("GET", "/status.html", {None: 200}),
    # lookups over HTTP (clients with an http:// service URL): produce or consume on the topic is enough
    ("GET", f"/lookup/v2/topic/persistent/{NS}/looked-up", {None: 401, "stranger": 403, "reader": 200}),
    ("GET", f"/admin/v2/persistent/{NS}/looked-up/partitions", {None: 401, "stranger": 403, "reader": 200}),
]


@pytest.mark.parametrize(("method", "path", "expected"), ADMIN_CASES, ids=[f"{m} {p}" for m, p, _ in ADMIN_CASES])
def test_admin_endpoints_answer_per_role(broker: SecureBroker, secret_key: bytes, method: str, path: str,
                                         expected: dict[str | None, int]) -> None:
    for role, status in expected.items():
        headers = bearer(token(secret_key, role)) if role is not None else {}
        body = {"adminRoles": [], "allowedClusters": ["standalone"]} if method == "PUT" else None
        got, answer = http(method, f"http://127.0.0.1:{broker.web_port}{path}", headers=headers, body=body)
        assert got == status, (role, answer)
        if status in (401, 403):
            assert isinstance(answer, dict) and answer["reason"]


def test_produce_or_consume_permission_reads_stats_and_lists_the_namespace(broker: SecureBroker, secret_key: bytes,
                                                                           as_role) -> None:  # type: ignore[no-untyped-def]
    """Pulsar's GET_STATS needs what a lookup needs; GET_TOPICS needs produce or consume on the namespace."""
    ns = "acme/listing"
    assert rest(broker, secret_key, "PUT", f"/namespaces/{ns}")[0] == 204
    assert rest(broker, secret_key, "POST", f"/namespaces/{ns}/permissions/ns-writer", ["produce"])[0] == 204
    topic, other = _topic(ns), _topic(ns)
    path, other_path = topic.removeprefix("persistent://"), other.removeprefix("persistent://")
    assert rest(broker, secret_key, "POST", f"/persistent/{path}/permissions/topic-reader", ["consume"])[0] == 204
    as_role("admin").create_producer(topic).send(b"x")
    as_role("admin").create_producer(other).send(b"y")
    for role in ("ns-writer", "topic-reader"):
        for sub in ("stats", "internalStats"):
            status, body = rest(broker, secret_key, "GET", f"/persistent/{path}/{sub}", role=role)
            assert status == 200, (role, sub, body)
    assert rest(broker, secret_key, "GET", f"/persistent/{other_path}/stats", role="ns-writer")[0] == 200
    assert rest(broker, secret_key, "GET", f"/persistent/{other_path}/stats", role="topic-reader")[0] == 403
    assert rest(broker, secret_key, "GET", f"/persistent/{path}/stats", role="stranger")[0] == 403
    for listing in (f"/persistent/{ns}", f"/namespaces/{ns}/topics"):
        status, body = rest(broker, secret_key, "GET", listing, role="ns-writer")
        assert status == 200 and topic in body, (listing, body)
        assert rest(broker, secret_key, "GET", listing, role="topic-reader")[0] == 403  # a topic grant only
        assert rest(broker, secret_key, "GET", listing, role="stranger")[0] == 403
    # what a reader may not do stays refused
    assert rest(broker, secret_key, "DELETE", f"/persistent/{path}", role="ns-writer")[0] == 403


def test_a_topic_in_a_namespace_that_does_not_exist_is_not_found(as_role) -> None:  # type: ignore[no-untyped-def]
    """The official client's test_create_producer_failure: Pulsar answers TopicNotFound, not AuthorizationError,
    for a tenant or namespace that does not exist; an existing one still refuses the role."""
    stranger = as_role("stranger")
    for missing in ("persistent://private/auth/my-python-topic-producer-failure", f"persistent://{NS}-none/t"):
        with pytest.raises(pulsar.TopicNotFound):
            stranger.create_producer(missing)
        with pytest.raises(pulsar.TopicNotFound):
            stranger.subscribe(missing, "s")
    with pytest.raises(pulsar.AuthorizationError):
        stranger.create_producer(_topic())
