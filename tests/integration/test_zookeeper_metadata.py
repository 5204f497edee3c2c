"""A standalone broker with its metadata in a real ZooKeeper: it keeps serving while ZooKeeper restarts and
after its session expired (``zookeeperSessionExpiredPolicy=reconnect``), and stops when told to
(``shutdown``). The broker reaches ZooKeeper through a proxy the test cuts to expire its session."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.naming import topic_name
from tests.zk_server import TcpProxy, ZooKeeperServer, own_zk_server, unique_chroot, zk_server

pytestmark = pytest.mark.integration
__all__ = ["own_zk_server", "zk_server"]

RECEIVE_MS = 10_000
SESSION_MS = 2000
WAIT_S = 60.0


@pytest.fixture
def proxy(own_zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    p = TcpProxy(own_zk_server.port).start()
    try:
        yield p
    finally:
        p.close()


def _broker(tmp_path: Path, url: str, *settings: str) -> BrokerProcess:
    args: list[str] = ["--set", f"metadataStoreUrl={url}"]
    for setting in settings:
        args += ["--set", setting]
    return BrokerProcess(tmp_path / "data", extra_args=tuple(args)).start()


def _round_trip(client: pulsar.Client, name: str, count: int = 10) -> None:
    topic = topic_name(name)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(count):
        producer.send(f"{name}-{i}".encode())
    got = [consumer.receive(RECEIVE_MS) for _ in range(count)]
    assert [m.data() for m in got] == [f"{name}-{i}".encode() for i in range(count)]
    for m in got:
        consumer.acknowledge(m)
    producer.close()
    consumer.close()


def test_the_broker_keeps_serving_while_zookeeper_restarts(tmp_path: Path, own_zk_server: ZooKeeperServer) -> None:
    broker = _broker(tmp_path, own_zk_server.url(unique_chroot()))
    try:
        client = make_client(broker.url)
        topic = topic_name("through-restart")
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        producer.send(b"before")
        own_zk_server.stop()
        assert broker.wait_for_log("connection lost", 30)
        producer.send(b"while-down")  # an open topic appends without the metadata store
        for expected in (b"before", b"while-down"):
            msg = consumer.receive(RECEIVE_MS)
            assert msg.data() == expected
            consumer.acknowledge(msg)
        own_zk_server.start()
        _round_trip(client, "after-restart")  # a new topic: its metadata is written again
        producer.send(b"after")
        assert consumer.receive(RECEIVE_MS).data() == b"after"
        assert "SESSION_LOST" not in broker.log_text() and "session lost" not in broker.log_text()
        client.close()
    finally:
        broker.kill()


def test_reconnect_policy_keeps_serving_after_the_session_expired(tmp_path: Path, proxy: TcpProxy) -> None:
    broker = _broker(tmp_path, proxy.url(unique_chroot()), f"metadataStoreSessionTimeoutMillis={SESSION_MS}")
    try:
        client = make_client(broker.url)
        _round_trip(client, "before-expiry")
        proxy.cut()
        assert broker.wait_for_log("session", WAIT_S) and broker.wait_for_log("lost", WAIT_S)
        proxy.restore()
        assert broker.wait_for_log("re-established", WAIT_S)
        _round_trip(client, "after-expiry")
        assert broker.proc is not None and broker.proc.poll() is None
        client.close()
    finally:
        broker.kill()


def test_shutdown_policy_stops_the_broker_when_its_session_is_lost(tmp_path: Path, proxy: TcpProxy) -> None:
    broker = _broker(tmp_path, proxy.url(unique_chroot()), f"metadataStoreSessionTimeoutMillis={SESSION_MS}",
                     "zookeeperSessionExpiredPolicy=shutdown")
    try:
        proxy.cut()
        assert broker.wait_for_log("zookeeperSessionExpiredPolicy=shutdown: stopping", WAIT_S)
        assert broker.proc is not None
        broker.proc.wait(timeout=WAIT_S)
    finally:
        broker.kill()


def test_cursor_positions_are_written_at_most_once_a_second(tmp_path: Path, zk_server: ZooKeeperServer) -> None:
    """Acks spread over seconds make at most one ZooKeeper write per second for their cursor (Pulsar's
    managedLedgerDefaultMarkDeleteRateLimit), where SQLite's 100 ms interval would make ten."""
    from kazoo.client import KazooClient

    chroot = unique_chroot()
    broker = _broker(tmp_path, zk_server.url(chroot))
    zk = KazooClient(hosts=zk_server.hosts + chroot)
    zk.start(timeout=30)
    try:
        client = make_client(broker.url)
        topic = topic_name("paced-acks")
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(150):
            producer.send(f"m{i}".encode())
        key = f"/managed-ledgers/public/default/persistent/{topic.rsplit('/', 1)[1]}/cursors/sub"
        pace = threading.Event()
        start = time.monotonic()
        before = zk.exists(key).version
        for _ in range(150):
            consumer.acknowledge(consumer.receive(RECEIVE_MS))
            pace.wait(0.02)  # load shape: acks spread over about 3 s, not a synchronisation
        elapsed = time.monotonic() - start
        consumer.close()  # the last position is written on close
        writes = zk.exists(key).version - before
        assert 1 <= writes <= elapsed + 2, f"{writes} cursor writes in {elapsed:.1f} s"
        client.close()
    finally:
        zk.stop()
        zk.close()
        broker.kill()
