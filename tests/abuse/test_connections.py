"""Connections that never finish their handshake or request, and too many of them (issue items 6, 12).

The broker runs with small caps: 20 connections per address, 30 in all, a 2 s CONNECT handshake and
HTTP request timeout, 16 HTTP connections.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pulsar
import pytest

from magnetar import protocol as proto
from tests.abuse.conftest import assert_still_serving, http, start_broker, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

PER_ADDRESS_MAX = 20
TOTAL_MAX = 30
CLOSE_WAIT_S = 15.0  # generous: the configured timeouts are 2 s


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory, f"brokerMaxConnectionsPerIp={PER_ADDRESS_MAX}", f"brokerMaxConnections={TOTAL_MAX}",
        "connectHandshakeTimeoutSeconds=2", "httpRequestTimeoutSeconds=2", "maxHttpServerConnections=16",
    )
    try:
        yield proc
    finally:
        proc.kill()


def _open(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WAIT_S, source_address=(source, 0))


def _closed_by_broker(sock: socket.socket) -> bool:
    """True once the broker closes ``sock`` (bounded by the socket timeout), reading what it sends."""
    deadline = time.monotonic() + CLOSE_WAIT_S
    try:
        for _ in range(10_000):
            if not sock.recv(65536):
                return True
            if time.monotonic() > deadline:
                return False
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def _connected(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = _open(port, source)
    sock.sendall(proto.encode_command(proto.commands.connect("cap-test", protocol_version=20)))
    assert sock.recv(65536), "no CONNECTED"
    return sock


def test_silent_and_half_sent_handshakes_are_closed(broker: BrokerProcess) -> None:
    silent = _open(broker.port)
    half = _open(broker.port)
    half.sendall(proto.encode_command(proto.commands.connect("half", protocol_version=20))[:7])
    try:
        assert _closed_by_broker(silent) and _closed_by_broker(half)
        assert broker.wait_for_log("no CONNECT within", CLOSE_WAIT_S)
        assert_still_serving(broker)
    finally:
        silent.close()
        half.close()


def test_connection_caps_per_address_and_in_all(broker: BrokerProcess) -> None:
    held = [_connected(broker.port) for _ in range(PER_ADDRESS_MAX)]
    try:
        assert _closed_by_broker(_open(broker.port)), "a connection over brokerMaxConnectionsPerIp was kept"
        held += [_connected(broker.port, "127.0.0.2") for _ in range(TOTAL_MAX - PER_ADDRESS_MAX)]
        assert _closed_by_broker(_open(broker.port, "127.0.0.3")), "a connection over brokerMaxConnections was kept"
        assert broker.wait_for_log("brokerMaxConnections", CLOSE_WAIT_S)
    finally:
        for sock in held:
            sock.close()
    assert_still_serving(broker)  # the caps count live connections only


def test_half_sent_http_requests_and_surplus_connections_are_closed(broker: BrokerProcess) -> None:
    half = _open(broker.web_port)
    half.sendall(b"GET /admin/v2/clusters HTTP/1.1\r\nHo")
    idle = [_open(broker.web_port) for _ in range(24)]
    try:
        assert _closed_by_broker(half)
        assert all(_closed_by_broker(s) for s in idle)
        assert http(broker, "GET", "/admin/v2/clusters") == (200, ["standalone"])
    finally:
        for sock in [half, *idle]:
            sock.close()


def _raw_http(port: int, head: bytes, parts: list[bytes]) -> bytes:
    sock = _open(port)
    try:
        sock.sendall(head)
        for part in parts:
            sock.sendall(part)
        data = b""
        for _ in range(1000):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                break
        return data
    finally:
        sock.close()


def test_admin_bodies_are_read_whole_and_bounded(broker: BrokerProcess) -> None:
    name = unique("body")
    assert http(broker, "PUT", f"/admin/v2/persistent/public/default/{name}/partitions", 2)[0] == 204
    body = json.dumps({"ledgerId": -1, "entryId": -1, "partitionIndex": -1, "pad": "p" * 159_000}).encode()
    path = f"/admin/v2/persistent/public/default/{name}/subscription/split"
    head = (f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    reply = _raw_http(broker.web_port, head, [body[:70_000], body[70_000:]])  # two segments at least
    assert reply.startswith(b"HTTP/1.1 204"), reply[:200]
    liar = (f"PUT {path}2 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 99999999999\r\nConnection: close\r\n\r\n{}").encode()
    assert _raw_http(broker.web_port, liar, []).startswith(b"HTTP/1.1 413")
    subs = http(broker, "GET", f"/admin/v2/persistent/public/default/{name}/subscriptions")[1]
    assert subs == ["split"]


REQUEST_FLOOD = 10_000  # far more than the 1,024 requests a connection holds in flight, sent in one write


async def test_requests_over_the_in_flight_bound_get_too_many_requests(broker: BrokerProcess) -> None:
    peer = await WirePeer.connect(broker.port)
    try:
        topic = f"persistent://public/default/{unique('flood')}"
        peer.writer.write(b"".join(proto.encode_command(proto.commands.partitioned_metadata(topic, request_id))
                                   for request_id in range(REQUEST_FLOOD)))
        outcomes: dict[int, int] = {}
        for _ in range(REQUEST_FLOOD):
            reply = (await peer.expect(T.PARTITIONED_METADATA_RESPONSE)).command.partitionMetadataResponse
            assert reply.request_id not in outcomes, "a request answered twice"
            failed = reply.response == proto.pb.CommandPartitionedTopicMetadataResponse.Failed
            outcomes[reply.request_id] = reply.error if failed else -1
        assert sorted(outcomes) == list(range(REQUEST_FLOOD))
        refused = [code for code in outcomes.values() if code != -1]
        assert refused and set(refused) == {proto.pb.TooManyRequests}, set(refused)
        assert len(refused) <= REQUEST_FLOOD - 1024
        peer.send(proto.commands.partitioned_metadata(topic, REQUEST_FLOOD))  # the connection still serves
        reply = (await peer.expect(T.PARTITIONED_METADATA_RESPONSE)).command.partitionMetadataResponse
        assert reply.request_id == REQUEST_FLOOD
        assert reply.response == proto.pb.CommandPartitionedTopicMetadataResponse.Success
    finally:
        await peer.close()


def test_max_consumers_per_subscription_refuses_the_next_one(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 36 item 8: Pulsar's maxConsumersPerSubscription (the ring itself: bench/key_shared_ring.py)."""
    proc = start_broker(tmp_path_factory, "maxConsumersPerSubscription=3")
    client = make_client(proc.url)
    try:
        topic = f"persistent://public/default/{unique('max-consumers')}"
        joined = [client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared) for _ in range(3)]
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared)
        client.subscribe(topic, "other", consumer_type=pulsar.ConsumerType.KeyShared)  # per subscription
        joined[0].close()
        client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared)  # room again
    finally:
        client.close()
        proc.kill()
