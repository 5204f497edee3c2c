"""Bad input gets Pulsar's clear errors, never a 500 or "internal error" (issue items 10, 11, 13, 15)."""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import Iterator

import pytest

from magnetar import protocol as proto
from tests.abuse.conftest import assert_still_serving, create_producer, http, start_broker, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

V2 = "/admin/v2"
FLOOD = 300


async def test_long_and_odd_names_get_clear_errors(broker: BrokerProcess) -> None:
    accented = "é" * 1024  # 1,024 characters, 6,144 once URL-encoded: more than a metadata key holds
    accented_path = urllib.parse.quote(accented)
    for method, path in (
        ("PUT", f"{V2}/persistent/public/default/{accented_path}"),
        ("PUT", f"{V2}/persistent/public/default/{accented_path}/partitions"),
        ("PUT", f"{V2}/tenants/{'t' * 5000}"),
        ("GET", f"{V2}/tenants/{'t' * 5000}"),
        ("PUT", f"{V2}/namespaces/public/{'n' * 5000}"),
    ):
        status, reply = http(broker, method, path, 2 if path.endswith("partitions") else None)
        assert 400 <= status < 500, (method, path[:80], status, reply)
    assert http(broker, "GET", f"{V2}/clusters/%2F")[0] == 404
    peer = await WirePeer.connect(broker.port)
    try:
        reply = await create_producer(peer, f"persistent://public/default/{accented}")
        assert reply.command.error.error == proto.pb.InvalidTopicName
        peer.send(proto.commands.subscribe(f"persistent://public/default/{unique('s')}", "é" * 1000,
                                           proto.pb.CommandSubscribe.Shared, 2, 2))
        refused = (await peer.expect(T.ERROR)).command.error
        assert "internal error" not in refused.message
    finally:
        await peer.close()


@pytest.mark.parametrize("name", ["%2E", "%2E%2E", "bad%0A", "bad%0D%0A", "sp%20ace", "t" * 200])
def test_invalid_names_get_pulsars_412(broker: BrokerProcess, name: str) -> None:
    """Pulsar's admin answers names it cannot accept with 412 PreconditionFailed and these reasons."""
    refusals = (
        ("PUT", f"{V2}/tenants/{name}", {"allowedClusters": ["standalone"]}, "Tenant name is not valid"),
        ("PUT", f"{V2}/namespaces/public/{name}", None, "Namespace name is not valid"),
        ("GET", f"{V2}/namespaces/public/{name}/retention", None, "Namespace name is not valid"),
        ("PUT", f"{V2}/clusters/{name}", {"serviceUrl": "http://localhost:1"}, "Cluster name is not valid"),
        ("PUT", f"{V2}/persistent/{name}/default/x", None, "Topic name is not valid"),
        ("GET", f"{V2}/persistent/public/{name}/x/stats", None, "Topic name is not valid"),
    )
    for method, path, body, why in refusals:
        assert http(broker, method, path, body) == (412, {"reason": why}), (method, path)
    assert name.replace("%2E", ".").replace("%0A", "\n") not in (http(broker, "GET", f"{V2}/tenants")[1] or [])


@pytest.mark.parametrize("local", ["%2E", "%2E%2E", "bad%0A", "\u00e9" * 1024])
def test_invalid_local_topic_names_get_412(broker: BrokerProcess, local: str) -> None:
    path = f"{V2}/persistent/public/default/{urllib.parse.quote(local, safe='%')}"
    assert http(broker, "PUT", path) == (412, {"reason": "Topic name is not valid"})
    assert http(broker, "PUT", f"{path}/partitions", 2) == (412, {"reason": "Topic name is not valid"})


def test_partitioned_topic_names_must_not_contain_partition(broker: BrokerProcess) -> None:
    path = f"{V2}/persistent/public/default/{unique('p')}-partition-x/partitions"
    assert http(broker, "PUT", path, 2) == (412, {"reason": "Partitioned Topic Name should not contain '-partition-'"})


def test_admin_topic_names_are_decoded_once(broker: BrokerProcess) -> None:
    base = f"{V2}/persistent/public/default"
    stem = unique("pct")
    assert http(broker, "PUT", f"{base}/{stem}A")[0] == 204
    assert http(broker, "PUT", f"{base}/{stem}%2541")[0] == 204  # the topic named "<stem>%41"
    listed = http(broker, "GET", base)[1]
    assert f"persistent://public/default/{stem}%41" in listed and f"persistent://public/default/{stem}A" in listed
    assert http(broker, "DELETE", f"{base}/{stem}%2541")[0] == 204
    listed = http(broker, "GET", base)[1]
    assert f"persistent://public/default/{stem}A" in listed, "DELETE hit another topic"
    assert f"persistent://public/default/{stem}%41" not in listed


def test_negative_protocol_version_is_not_echoed(broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(proto.encode_command(proto.commands.connect("negative", protocol_version=-5)))
        decoder = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE))
        frame = None
        for _ in range(100):
            decoder.feed(sock.recv(65536))
            if (frame := decoder.next_frame()) is not None:
                break
        assert frame is not None and frame.command.type == T.CONNECTED
        assert frame.command.connected.protocol_version == 0


def test_floods_of_unsupported_commands_and_bad_http_log_a_few_lines(broker: BrokerProcess) -> None:
    before = len(broker.log_lines)
    unsupported = proto.encode_command(proto.pb.BaseCommand(type=T.CONSUMER_STATS_RESPONSE))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(proto.encode_command(proto.commands.connect("flood", protocol_version=20)) + unsupported * FLOOD)
        sock.sendall(proto.encode_command(proto.commands.ping()))
        data = b""
        for _ in range(1000):  # until the PONG after the flood: everything before it was handled
            data += sock.recv(65536)
            if proto.encode_command(proto.commands.pong()) in data:
                break
    for _ in range(FLOOD):
        with socket.create_connection(("127.0.0.1", broker.web_port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n")
            assert b" 400 " in sock.recv(1000).split(b"\r\n", 1)[0]
    flood_lines = broker.log_lines[before:]
    assert sum("unsupported command" in line for line in flood_lines) <= 3
    assert sum("Error handling request" in line for line in flood_lines) <= 3
    assert not any("Traceback" in line for line in flood_lines)
    assert_still_serving(broker)


def test_sigterm_with_open_connections_logs_no_traceback(tmp_path_factory: pytest.TempPathFactory) -> None:
    proc = start_broker(tmp_path_factory)
    try:
        client = make_client(proc.url)
        client.subscribe(unique("term"), "s")
        idle = [socket.create_connection(("127.0.0.1", proc.port)) for _ in range(3)]
        half = socket.create_connection(("127.0.0.1", proc.web_port))
        half.sendall(b"GET /metrics HTTP/1.1\r\nHo")
        assert proc.stop() == 0
        assert "Traceback" not in proc.log_text() and "CancelledError" not in proc.log_text()
        for sock in [*idle, half]:
            sock.close()
        client.close()
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory)
    try:
        yield proc
    finally:
        proc.kill()


def test_the_system_tenant_and_namespace_cannot_be_deleted(broker: BrokerProcess) -> None:
    """Issue 36 item 16: deleting tenant pulsar answered 204 (force), its system topics kept working and it
    reappeared after a restart. Refused, with or without force."""
    for path in ("/admin/v2/tenants/pulsar?force=true", "/admin/v2/tenants/pulsar",
                 "/admin/v2/namespaces/pulsar/system?force=true"):
        status, body = http(broker, "DELETE", path)
        assert status == 409, (path, status, body)
        assert "system" in body["reason"] or "active namespaces" in body["reason"], body
    assert "pulsar" in http(broker, "GET", "/admin/v2/tenants")[1]
    assert http(broker, "GET", "/admin/v2/namespaces/pulsar")[1] == ["pulsar/system"]


def _nested_avro(depth: int) -> bytes:
    """A record nested ``depth`` records deep, written as text (json.dumps itself recurses)."""
    text = json.dumps({"type": "record", "name": "leaf", "fields": [{"name": "x", "type": "int"}]})
    for i in range(depth):
        text = f'{{"type": "record", "name": "r{i}", "fields": [{{"name": "f", "type": {text}}}]}}'
    return text.encode()


async def test_a_deeply_nested_avro_schema_is_invalid_not_an_internal_error(broker: BrokerProcess) -> None:
    """Issue 36 item 15: answered "internal error: RecursionError"."""
    topic = f"persistent://public/default/{unique('deep-avro')}"
    peer = await WirePeer.connect(broker.port)
    try:
        deep = proto.pb.Schema(name="deep", schema_data=_nested_avro(3000), type=proto.pb.Schema.Avro)
        reply = await create_producer(peer, topic, schema=deep)
        assert reply.command.type == T.ERROR, reply.command
        assert "RecursionError" not in reply.command.error.message and "internal" not in reply.command.error.message
        assert "nested too deeply" in reply.command.error.message, reply.command.error
    finally:
        await peer.close()
    status, body = http(broker, "POST", f"/admin/v2/schemas/public/default/{unique('deep-admin')}/schema",
                        {"type": "AVRO", "schema": _nested_avro(3000).decode(), "properties": {}})
    assert status in (400, 409, 412) and "nested too deeply" in str(body), (status, body)
