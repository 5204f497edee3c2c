"""Garbage on the socket costs only that connection; the broker keeps serving everyone else."""

from __future__ import annotations

import random
import socket
import struct
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from magnetar import protocol as proto
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

SOCKET_TIMEOUT_S = 10.0


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=SOCKET_TIMEOUT_S)
    try:
        yield sock
    finally:
        sock.close()


def connect_frame() -> bytes:
    return proto.encode_command(proto.commands.connect("garbage-test", protocol_version=20))


def read_until_closed(sock: socket.socket, max_bytes: int = 1 << 20) -> bytes:
    """Everything the broker sends until it closes the connection (bounded by time and size)."""
    data = b""
    while len(data) < max_bytes:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    raise AssertionError("broker kept talking instead of closing")


def decoded(data: bytes) -> list[proto.pb.BaseCommand]:
    decoder = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE))
    decoder.feed(data)
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame.command)
    return frames


def assert_still_serving(broker: BrokerProcess) -> None:
    client = make_client(broker.url)
    try:
        topic = f"still-serving-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"alive")
        assert consumer.receive(10_000).data() == b"alive"
    finally:
        client.close()


def test_http_request_closes_only_that_connection(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_until_closed(raw) == b""
    assert_still_serving(broker)


def test_absurd_frame_size_is_refused_before_buffering(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(struct.pack(">I", 0x7FFF_FFFF) + b"\x00" * 16)
    assert read_until_closed(raw) == b""
    assert "closing connection" in broker.log_text()
    assert_still_serving(broker)


def test_invalid_protobuf_closes_the_connection(broker: BrokerProcess, raw: socket.socket) -> None:
    body = b"\xff" * 12
    raw.sendall(struct.pack(">II", len(body) + 4, len(body)) + body)
    assert read_until_closed(raw) == b""
    assert_still_serving(broker)


def test_unknown_command_type_after_connect(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(connect_frame())
    # BaseCommand{type: 99} - a type no schema version defines
    body = b"\x08\x63"
    raw.sendall(struct.pack(">II", len(body) + 4, len(body)) + body)
    reply = read_until_closed(raw)
    assert decoded(reply)[0].type == proto.pb.BaseCommand.CONNECTED
    assert_still_serving(broker)


def test_command_before_connect_closes(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(proto.encode_command(proto.commands.ping()))
    assert read_until_closed(raw) == b""
    assert_still_serving(broker)


def test_random_bytes_never_crash_the_broker(broker: BrokerProcess) -> None:
    rng = random.Random(1234)
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=SOCKET_TIMEOUT_S) as sock:
            if rng.random() < 0.5:
                sock.sendall(connect_frame())
            sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
            sock.shutdown(socket.SHUT_WR)
            read_until_closed(sock)
    assert broker.proc is not None and broker.proc.poll() is None
    assert_still_serving(broker)


def test_half_frame_that_stalls_does_not_block_others(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(connect_frame())
    frame = proto.encode_command(proto.commands.ping())
    raw.sendall(frame[: len(frame) // 2])
    assert_still_serving(broker)
    raw.sendall(frame[len(frame) // 2 :])  # the stalled connection still works once it completes
    raw.settimeout(SOCKET_TIMEOUT_S)
    data = b""
    while len(decoded(data)) < 2:
        chunk = raw.recv(65536)
        assert chunk, "connection closed"
        data += chunk
    assert [c.type for c in decoded(data)] == [proto.pb.BaseCommand.CONNECTED, proto.pb.BaseCommand.PONG]


def test_send_for_an_unknown_producer_gets_an_error_not_a_crash(broker: BrokerProcess, raw: socket.socket) -> None:
    raw.sendall(connect_frame())
    meta = proto.pb.MessageMetadata(producer_name="nobody", sequence_id=0, publish_time=1)
    entry = proto.make_entry(meta, b"x")
    raw.sendall(proto.encode_payload_command(proto.commands.send(42, 0), entry))
    raw.shutdown(socket.SHUT_WR)
    types = [c.type for c in decoded(read_until_closed(raw))]
    assert types == [proto.pb.BaseCommand.CONNECTED, proto.pb.BaseCommand.SEND_ERROR]
    assert_still_serving(broker)


def test_oversize_message_is_refused_by_the_client(client: pulsar.Client) -> None:
    producer = client.create_producer(f"big-{uuid.uuid4().hex[:8]}")
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024))
