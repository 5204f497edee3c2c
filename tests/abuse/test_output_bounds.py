"""Peers that do not read what the broker sends them (issue items 4, 5) and clients that name themselves
absurdly (items 8, 9). The broker runs with a 1 MiB output high-water mark so bounds are reached fast.

Each test measures the broker's RSS from /proc against what the old behaviour needed (the whole
stream buffered), and checks another client is still served.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pulsar
import pytest

from magnetar import protocol as proto
from tests.abuse.conftest import (
    assert_still_serving,
    create_producer,
    http,
    rss_bytes,
    start_broker,
    unique,
)
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

MIB = 1024 * 1024
SEND_TIMEOUT_S = 3.0  # a send that blocks this long: the broker stopped reading us
RSS_GROWTH_MAX = 80 * MIB  # the old behaviour grew by the whole stream (hundreds of MiB here)
REPLIES_RSS_GROWTH_MAX = 32 * MIB  # 1 MiB high-water mark + 32 running requests x ~75 KB replies
SAMPLE_WINDOW_S = 4.0
# once blocked, the broker reads again only as far as the kernel's socket buffers grow (autotuning);
# the old broker went on reading at its full pace (2.3 MB in the 3 s window)
RESUMED_BYTES_MAX = 512 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory, "connectionOutputHighWaterBytes=1048576",
                        "dispatcherMaxReadSizeBytes=5242880")
    try:
        yield proc
    finally:
        proc.kill()


def _never_reading_socket(proc: BrokerProcess) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):  # keep the kernel's share small
        sock.setsockopt(socket.SOL_SOCKET, option, 64 * 1024)
    sock.settimeout(SEND_TIMEOUT_S)
    sock.connect(("127.0.0.1", proc.port))
    sock.sendall(proto.encode_command(proto.commands.connect("never-reads", protocol_version=20)))
    return sock


class _FrameStream:
    """Sends ``chunk`` (whole frames) over and over, resuming a partly sent chunk where the kernel cut it, so
    the broker always reads whole frames: a chunk started afresh after a partial send would misalign the
    stream, and the broker would read a length field from inside a frame (then wait for, or refuse, a frame
    that does not exist)."""

    def __init__(self, sock: socket.socket, chunk: bytes) -> None:
        self._sock = sock
        self._chunk = memoryview(chunk)
        self._offset = 0  # how much of the current chunk went out

    def send(self) -> int:
        """One send of the rest of the current chunk; raises TimeoutError if the broker took no byte within the
        socket's timeout."""
        n = self._sock.send(self._chunk[self._offset:])
        self._offset = (self._offset + n) % len(self._chunk)
        return n


def _send_until_blocked(stream: _FrameStream, bytes_max: int) -> int:
    """Send until the broker takes no byte for SEND_TIMEOUT_S (each send's own timeout, unlike ``sendall``'s,
    whose deadline covers a whole chunk and so also expires on a broker that is only slow) or ``bytes_max``."""
    sent = 0
    while sent < bytes_max:  # every pass sends at least one byte or returns
        try:
            sent += stream.send()
        except TimeoutError:
            return sent
    return sent


def _sent_within(sock: socket.socket, stream: _FrameStream, window_s: float) -> int:
    """How many more bytes the broker takes from us within ``window_s`` (bounded loop)."""
    sock.settimeout(0.25)
    sent = 0
    deadline = time.monotonic() + window_s
    for _ in range(10_000):
        if time.monotonic() > deadline:
            break
        try:
            sent += stream.send()
        except TimeoutError:
            continue
    return sent


def _reading_stopped(sock: socket.socket, stream: _FrameStream) -> bool:
    """True once two windows in a row take (almost) nothing from us: the broker stopped reading.
    A single quiet window could be a stall of a loaded machine; an early block could be one too."""
    quiet = 0
    for _ in range(6):
        quiet = quiet + 1 if _sent_within(sock, stream, SEND_TIMEOUT_S) < RESUMED_BYTES_MAX else 0
        if quiet == 2:
            return True
    return False


def test_pings_without_reading_the_pongs_stop_being_read(broker: BrokerProcess) -> None:
    sock = _never_reading_socket(broker)
    try:
        before = rss_bytes(broker)
        pings = _FrameStream(sock, proto.encode_command(proto.commands.ping()) * 20_000)
        sent = _send_until_blocked(pings, 64 * MIB)
        assert sent < 64 * MIB, "the broker kept reading a peer that never reads its pongs"
        assert _reading_stopped(sock, pings), "the broker went on reading"
        assert rss_bytes(broker) - before < RSS_GROWTH_MAX
        assert_still_serving(broker)
    finally:
        sock.close()


def test_large_replies_to_a_peer_that_never_reads_are_bounded(broker: BrokerProcess) -> None:
    namespace = f"public/{unique('listing')}"
    assert http(broker, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    long_suffix = "x" * 400
    for i in range(150):  # a listing reply of ~75 KB
        status, _ = http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t{i}-{long_suffix}")
        assert status == 204
    sock = _never_reading_socket(broker)
    try:
        before = rss_bytes(broker)
        listings = b"".join(proto.encode_command(proto.commands.get_topics_of_namespace(i, namespace))
                            for i in range(1000))
        requests = _FrameStream(sock, listings)
        sent = _send_until_blocked(requests, 64 * MIB)  # 1.5 M requests: 100 GB of replies
        assert sent < 64 * MIB, "the broker kept reading a peer that never reads its replies"
        assert _reading_stopped(sock, requests), "the broker went on reading"
        peak = _peak_rss_growth(broker, before)
        assert peak < REPLIES_RSS_GROWTH_MAX, f"RSS grew by {peak // MIB} MiB"
        assert_still_serving(broker)
    finally:
        sock.close()


def _peak_rss_growth(proc: BrokerProcess, before: int) -> int:
    """The largest RSS growth seen over a short window (bounded sampling, not a wait for anything)."""
    peak = 0

    def sample() -> bool:  # never "done": sampled on every broker log line and every 1/100 of the window
        nonlocal peak
        peak = max(peak, rss_bytes(proc) - before)
        return False

    proc.wait_until(sample, SAMPLE_WINDOW_S, recheck_s=SAMPLE_WINDOW_S / 100)
    return peak


async def test_many_subscriptions_on_a_stalled_connection_share_one_budget(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('stalled')}"
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        body = b"m" * (900 * 1024)
        for _ in range(24):  # ~21 MiB of backlog: every subscription could read 5 MiB at once
            producer.send(body)
    finally:
        client.close()
    peer = await WirePeer.connect(broker.port)
    try:
        for cid in range(60):
            peer.send(proto.commands.subscribe(topic, f"slow-{cid}", proto.pb.CommandSubscribe.Exclusive, cid, cid,
                                               initial_position=proto.pb.CommandSubscribe.Earliest))
            await peer.expect(T.SUCCESS)
        before = rss_bytes(broker)
        for cid in range(60):
            peer.send(proto.commands.flow(cid, 1000))  # then never read again: 60 x 21 MiB wanted
        peak = await asyncio.to_thread(_peak_rss_growth, broker, before)
        assert peak < RSS_GROWTH_MAX, f"RSS grew by {peak // MIB} MiB"
        await asyncio.to_thread(assert_still_serving, broker)
    finally:
        peer.writer.transport.abort()


async def test_names_and_metadata_are_bounded(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('names')}"
    peer = await WirePeer.connect(broker.port)
    try:
        huge = "n" * (4 * MIB)
        refused = await create_producer(peer, topic, producer_name=huge)
        assert refused.command.type == T.ERROR and "longer than" in refused.command.error.message
        fat = {f"k{i}": "v" * 100_000 for i in range(40)}
        refused = await create_producer(peer, topic, 2, metadata=fat)
        assert refused.command.error.error == proto.pb.MetadataError
        peer.send(proto.commands.subscribe(topic, "s", proto.pb.CommandSubscribe.Key_Shared, 3, 3, consumer_name=huge))
        assert (await peer.expect(T.ERROR)).command.error.error == proto.pb.NotAllowedError
        peer.send(proto.commands.subscribe(topic, "s", proto.pb.CommandSubscribe.Shared, 4, 4, metadata=fat))
        assert (await peer.expect(T.ERROR)).command.error.error == proto.pb.MetadataError
    finally:
        await peer.close()
    await asyncio.to_thread(assert_still_serving, broker)


def test_key_shared_consumers_with_longest_names_join_and_leave(broker: BrokerProcess) -> None:
    topic = unique("ks")
    client = make_client(broker.url)
    try:
        consumers = [
            client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                             consumer_name=f"{i:04d}" + "c" * 1020)
            for i in range(30)
        ]
        producer = client.create_producer(topic)
        for i in range(30):
            producer.send(b"k%d" % i, partition_key=f"key-{i}")
        for consumer in consumers:
            consumer.close()
        last = client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared)
        got = {last.receive(10_000).data() for _ in range(30)}
        assert got == {b"k%d" % i for i in range(30)}
    finally:
        client.close()


async def test_a_stalled_connection_does_not_stall_a_shared_subscriptions_other_connections(
    broker: BrokerProcess,
) -> None:
    """One Shared subscription, its first consumer on a connection that stops reading, the other on an
    official client: each consumer's output is charged to its own connection, so the other keeps receiving
    everything the stalled one was not sent, old and new, and the broker's memory stays bounded."""
    topic = f"persistent://public/default/{unique('shared-stall')}"
    stalled = await WirePeer.connect(broker.port)
    client = make_client(broker.url)
    try:
        stalled.send(proto.commands.subscribe(topic, "s", proto.pb.CommandSubscribe.Shared, 1, 1))
        await stalled.expect(T.SUCCESS)
        stalled.send(proto.commands.flow(1, 1000))  # and never read again
        reader = await asyncio.to_thread(client.subscribe, topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                         receiver_queue_size=4)
        producer = client.create_producer(topic, batching_enabled=False)
        before = rss_bytes(broker)
        for _ in range(30):  # ~26 MiB: far more than the stalled connection's budget and socket buffers
            await asyncio.to_thread(producer.send, b"m" * (900 * 1024))
        received = await asyncio.to_thread(_receive_until_quiet, reader, 30)
        stats = http(broker, "GET", f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats")[1]
        consumers = {c["consumerName"]: c for c in stats["subscriptions"]["s"]["consumers"]}
        to_stalled = sum(c["msgOutCounter"] for name, c in consumers.items() if name != reader.consumer_name())
        assert 0 < to_stalled < 30 and received + to_stalled == 30, (received, to_stalled)
        for i in range(5):  # new messages still flow to the connection that reads
            await asyncio.to_thread(producer.send, b"new-%d" % i)
        fresh = {(await asyncio.to_thread(reader.receive, 10_000)).data() for _ in range(5)}
        assert fresh == {b"new-%d" % i for i in range(5)}
        peak = await asyncio.to_thread(_peak_rss_growth, broker, before)
        assert peak < RSS_GROWTH_MAX, f"RSS grew by {peak // MIB} MiB"
    finally:
        stalled.writer.transport.abort()
        client.close()


def _receive_until_quiet(consumer: pulsar.Consumer, most: int) -> int:
    """Receive and acknowledge until nothing comes for 5 s (at most ``most`` messages)."""
    count = 0
    for _ in range(most):
        try:
            consumer.acknowledge(consumer.receive(5_000))
        except pulsar.Timeout:
            break
        count += 1
    return count
