"""Token authentication with the official client: HS256 (key given inline as Pulsar's ``data:;base64,``)
and RS256 (public key file), expired and wrongly signed tokens, a token supplier, refresh of an expiring
token by AUTH_CHALLENGE during a long consume, and an unauthenticated client reaching nothing."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.security.conftest import (
    FAIL_FAST_S,
    TOKEN_PROVIDER,
    SecureBroker,
    bearer,
    client,
    http,
    start_broker,
)
from tests.integration.security.pki import rsa_key_pair, token

REFUSED = (pulsar.Timeout, pulsar.ConnectError, pulsar.AuthenticationError)


@pytest.fixture(scope="module")
def hs_broker(tmp_path_factory: pytest.TempPathFactory, secret_key: bytes) -> Iterator[SecureBroker]:
    proc = start_broker(Path(tmp_path_factory.mktemp("hs")), {
        "authenticationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenSecretKey": "data:;base64," + base64.b64encode(secret_key).decode(),
        "authorizationEnabled": "true",
        "superUserRoles": "admin,static-admin",
        "authenticationRefreshCheckSeconds": "1",
        "authenticateMetricsEndpoint": "true",
    })
    try:
        yield proc
    finally:
        proc.kill()


def _topic() -> str:
    return f"persistent://public/default/tok-{uuid.uuid4().hex[:8]}"


def _round_trip(c: pulsar.Client, payload: bytes = b"hello") -> None:
    topic = _topic()
    consumer = c.subscribe(topic, "s")
    c.create_producer(topic).send(payload)
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == payload
    consumer.acknowledge(msg)


def test_hs256_token_produces_and_consumes(hs_broker: SecureBroker, secret_key: bytes,
                                           closing: list[pulsar.Client]) -> None:
    c = client(hs_broker.url, authentication=pulsar.AuthenticationToken(token(secret_key, "admin")))
    closing.append(c)
    _round_trip(c)


def test_token_supplier_function_is_called(hs_broker: SecureBroker, secret_key: bytes,
                                           closing: list[pulsar.Client]) -> None:
    calls: list[int] = []

    def supply() -> str:
        calls.append(1)
        return token(secret_key, "admin")

    c = client(hs_broker.url, authentication=pulsar.AuthenticationToken(supply))
    closing.append(c)
    _round_trip(c)
    assert calls


@pytest.mark.parametrize("case", ["wrong-key", "expired", "none"])
def test_bad_or_missing_token_reaches_nothing(hs_broker: SecureBroker, secret_key: bytes, case: str,
                                               closing: list[pulsar.Client]) -> None:
    options = {}
    if case == "wrong-key":
        options["authentication"] = pulsar.AuthenticationToken(token(b"k" * 32, "admin"))
    elif case == "expired":
        options["authentication"] = pulsar.AuthenticationToken(token(secret_key, "admin", expires_in_s=-60))
    c = client(hs_broker.url, timeout_s=FAIL_FAST_S, **options)
    closing.append(c)
    topic = _topic()
    with pytest.raises(REFUSED):
        c.create_producer(topic)
    if case == "none":  # the same refusal covers every kind of request
        with pytest.raises(REFUSED):
            c.subscribe(topic, "s")
        with pytest.raises(REFUSED):
            c.create_reader(topic, pulsar.MessageId.earliest)
        with pytest.raises(REFUSED):
            c.get_topic_partitions(topic)
    reason = "AUTH_REQUIRED" if case == "none" else "INVALID_TOKEN"
    assert hs_broker.wait_for_log(f"reason={reason}", 10)
    secret = "data:;base64," + base64.b64encode(secret_key).decode()
    assert secret not in hs_broker.log_text()


def test_admin_and_metrics_need_a_token(hs_broker: SecureBroker, secret_key: bytes) -> None:
    base = f"http://127.0.0.1:{hs_broker.web_port}"
    assert http("GET", base + "/admin/v2/tenants")[0] == 401
    assert http("GET", base + "/admin/v2/tenants", headers=bearer(token(b"k" * 32, "admin")))[0] == 401
    assert http("GET", base + "/metrics")[0] == 401
    status, body = http("GET", base + "/metrics", headers=bearer(token(secret_key, "admin")))
    assert status == 200
    failures = {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(body) for s in family.samples
        if s.name == "pulsar_authentication_failures_total" and s.labels["auth_method"] == "token"
    }
    assert failures.get("INVALID_TOKEN", 0) >= 1
    assert http("GET", base + "/admin/v2/tenants", headers=bearer(token(secret_key, "admin")))[0] == 200


def test_expiring_token_is_refreshed_during_a_long_consume(hs_broker: SecureBroker, secret_key: bytes,
                                                           closing: list[pulsar.Client]) -> None:
    """Tokens live 2 s; the broker checks every second and challenges; the supplier hands a fresh token."""
    issued: list[int] = []

    def supply() -> str:
        issued.append(1)
        return token(secret_key, "admin", expires_in_s=2)

    c = client(hs_broker.url, authentication=pulsar.AuthenticationToken(supply))
    closing.append(c)
    topic = _topic()
    consumer = c.subscribe(topic, "long")
    producer = c.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert consumer.receive(timeout_millis=10_000).data() == b"before"
    refreshed = "authentication refreshed for role 'admin'"
    before = hs_broker.log_text().count(refreshed)
    assert hs_broker.wait_for(lambda log: log.count(refreshed) >= before + 2, 20)
    producer.send(b"after")  # the same connection, still authenticated
    assert consumer.receive(timeout_millis=10_000).data() == b"after"
    assert "credentials of role 'admin' expired" not in hs_broker.log_text()
    assert len(issued) >= 3


def test_static_token_that_expires_loses_its_connection(hs_broker: SecureBroker, secret_key: bytes,
                                                         closing: list[pulsar.Client]) -> None:
    """A fixed token cannot be refreshed: the challenge is answered with the expired token and the broker
    closes the connection; reconnecting with it is refused."""
    c = client(hs_broker.url, timeout_s=FAIL_FAST_S,
               authentication=pulsar.AuthenticationToken(token(secret_key, "static-admin", expires_in_s=2)))
    closing.append(c)
    c.subscribe(_topic(), "s")
    assert hs_broker.wait_for_log("refreshed credentials of role 'static-admin' refused", 15)
    with pytest.raises(REFUSED):
        c.create_producer(_topic())


@pytest.fixture(scope="module")
def rs_broker(tmp_path_factory: pytest.TempPathFactory, keys_dir: Path) -> Iterator[tuple[SecureBroker, object]]:
    private, public = rsa_key_pair(keys_dir)
    proc = start_broker(Path(tmp_path_factory.mktemp("rs")), {
        "authenticationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenPublicKey": f"file://{public}",
    })
    try:
        yield proc, private
    finally:
        proc.kill()


def test_rs256_token_signed_by_the_private_key(rs_broker: tuple[SecureBroker, object],
                                               closing: list[pulsar.Client]) -> None:
    broker, private = rs_broker
    good = client(broker.url, authentication=pulsar.AuthenticationToken(token(private, "app", algorithm="RS256")))
    closing.append(good)
    _round_trip(good)
    other, _ = rsa_key_pair(broker.data_dir)
    bad = client(broker.url, timeout_s=FAIL_FAST_S,
                 authentication=pulsar.AuthenticationToken(token(other, "app", algorithm="RS256")))
    closing.append(bad)
    with pytest.raises(REFUSED):
        bad.create_producer(_topic())


def test_magnetar_client_authenticates_and_refreshes(hs_broker: SecureBroker, secret_key: bytes) -> None:
    """magnetar.client (the replicator's and the Spark sink's client) with a short-lived token supplier."""
    from magnetar.client import AuthenticationToken, Client
    from magnetar.client.errors import AuthorizationError

    calls: list[int] = []

    def supply() -> str:
        calls.append(1)
        return token(secret_key, "admin", expires_in_s=2)

    refreshed = "authentication refreshed for role 'admin'"
    before = hs_broker.log_text().count(refreshed)

    async def run() -> None:
        async with Client(hs_broker.url, authentication=AuthenticationToken(supply)) as c:
            topic = _topic()
            consumer = await c.subscribe(topic, "m", initial_position="earliest")
            producer = await c.create_producer(topic)
            await producer.send(b"one")
            assert (await consumer.receive(timeout_ms=10_000)).data == b"one"
            assert await asyncio.to_thread(hs_broker.wait_for, lambda log: log.count(refreshed) > before, 20)
            await producer.send(b"two")
            assert (await consumer.receive(timeout_ms=10_000)).data == b"two"
        async with Client(hs_broker.url, authentication=AuthenticationToken(token(secret_key, "nobody"))) as c:
            with pytest.raises(AuthorizationError):
                await c.create_producer(_topic())

    asyncio.run(run())
    assert len(calls) >= 2
