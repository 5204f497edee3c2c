"""Geo-replication between three real clusters (separate ``magnetar standalone`` processes), driven by the
official client. The clusters are shared by the module; each test uses its own namespace, and the tests
that kill a cluster restart it before they end."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest

from magnetar.cli.admin import main as admin_main
from magnetar.client import Client
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.replication.geo import Clusters, assert_nothing_more, receive_all, wait_until

pytestmark = pytest.mark.integration
MAX_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def geo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    # a small maxMessageSize so a 200 KiB message travels in chunks
    clusters = Clusters(Path(tmp_path_factory.mktemp("geo")), ("a", "b", "c"), "--set", f"maxMessageSize={MAX_BYTES}")
    try:
        yield clusters.start()
    finally:
        clusters.kill_all()


def _subscribe(client: pulsar.Client, topic: str, sub: str = "s") -> pulsar.Consumer:
    return client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest)


def test_produce_in_a_consume_in_b_and_c_keeps_keys_properties_event_time_and_batches(geo: Clusters) -> None:
    ns = geo.namespace("fanout", ["a", "b", "c"])
    topic = f"persistent://{ns}/t"
    with geo.client("a") as ca, geo.client("b") as cb, geo.client("c") as cc:
        single = ca.create_producer(topic, batching_enabled=False)  # loads the topic: replicators start
        consumers = {"b": _subscribe(cb, topic), "c": _subscribe(cc, topic)}
        for i in range(20):
            single.send(f"m{i}".encode(), partition_key=f"k{i % 3}", properties={"i": str(i)}, event_timestamp=1000 + i)
        batched = ca.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                     batching_max_publish_delay_ms=50)
        for i in range(20, 40):
            batched.send_async(f"m{i}".encode(), None, partition_key=f"k{i % 3}", properties={"i": str(i)},
                               event_timestamp=1000 + i)
        batched.flush()
        for name, consumer in consumers.items():
            got = receive_all(consumer, 40)
            assert [m.data() for m in got] == [f"m{i}".encode() for i in range(40)], name
            for i, msg in enumerate(got):
                assert msg.partition_key() == f"k{i % 3}"
                assert msg.properties() == {"i": str(i)}
                assert msg.event_timestamp() == 1000 + i
            assert_nothing_more(consumer, 500)
    stats = geo.stats("a", topic.removeprefix("persistent://"))
    assert set(stats["replication"]) == {"b", "c"}
    for remote in ("b", "c"):
        wait_until(lambda r=remote: geo.stats("a", topic.removeprefix("persistent://"))["replication"][r][
            "replicationBacklog"] == 0, f"backlog to {remote} drained")
        assert stats["replication"][remote]["connected"] is True
    inbound = geo.stats("b", topic.removeprefix("persistent://"))["replication"]
    assert inbound["a"]["inboundConnection"]  # b sees a's replicator producer
    cursors = geo.internal_stats("a", topic.removeprefix("persistent://"))["cursors"]
    assert {"pulsar.repl.b", "pulsar.repl.c"} <= set(cursors)
    assert "pulsar.repl.b" not in geo.stats("a", topic.removeprefix("persistent://"))["subscriptions"]


def test_every_cluster_produces_at_once_and_each_sees_every_message_once(geo: Clusters) -> None:
    ns = geo.namespace("mesh", ["a", "b", "c"])
    topic = f"persistent://{ns}/t"
    names = ("a", "b", "c")
    with geo.client("a") as ca, geo.client("b") as cb, geo.client("c") as cc:
        clients = {"a": ca, "b": cb, "c": cc}
        consumers = {n: _subscribe(clients[n], topic) for n in names}
        producers = {n: clients[n].create_producer(topic, batching_enabled=False) for n in names}

        def produce(name: str) -> None:
            for i in range(30):
                producers[name].send(f"{name}-{i}".encode())

        threads = [threading.Thread(target=produce, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        expected = {f"{n}-{i}".encode() for n in names for i in range(30)}
        for name, consumer in consumers.items():
            got = [m.data() for m in receive_all(consumer, 90)]
            assert sorted(got) == sorted(expected), name  # each message exactly once: no loops
            assert_nothing_more(consumer)
        for name in names:
            stats = geo.stats(name, topic.removeprefix("persistent://"))
            assert stats["msgInCounter"] == 90


def test_replicate_to_limits_the_copies(geo: Clusters) -> None:
    ns = geo.namespace("limited", ["a", "b", "c"])
    topic = f"persistent://{ns}/t"
    with geo.client("a") as ca, geo.client("b") as cb, geo.client("c") as cc:
        producer = ca.create_producer(topic, batching_enabled=False)
        local = _subscribe(ca, topic)
        in_b, in_c = _subscribe(cb, topic), _subscribe(cc, topic)
        producer.send(b"only-b", replication_clusters=["b"])
        producer.send(b"only-local", disable_replication=True)
        producer.send(b"everywhere")
        assert [m.data() for m in receive_all(local, 3)] == [b"only-b", b"only-local", b"everywhere"]
        assert [m.data() for m in receive_all(in_b, 2)] == [b"only-b", b"everywhere"]
        assert [m.data() for m in receive_all(in_c, 1)] == [b"everywhere"]  # in order: the others never came


async def _transactions(url: str, topic: str) -> None:
    async with Client(url, operation_timeout_ms=15_000) as client:
        producer = await client.create_producer(topic)
        aborted = await client.new_transaction(timeout_ms=60_000)
        await producer.send(b"aborted", txn=aborted)
        await aborted.abort()
        async with client.transaction(timeout_ms=60_000) as committed:
            await producer.send(b"committed", txn=committed)
        await producer.send(b"plain")


def test_chunked_messages_and_committed_transactions_replicate_aborted_ones_do_not(geo: Clusters) -> None:
    ns = geo.namespace("chunks", ["a", "b"])
    topic = f"persistent://{ns}/t"
    big = bytes(range(256)) * (200 * 1024 // 256)
    with geo.client("b") as cb:
        consumer = _subscribe(cb, topic)
        with geo.client("a") as ca:
            chunker = ca.create_producer(topic, chunking_enabled=True, batching_enabled=False)
            chunker.send(big, properties={"kind": "big"})
        asyncio.run(_transactions(geo["a"].url, topic))  # the official Python client has no transactions
        got = receive_all(consumer, 3)
        assert got[0].data() == big and got[0].properties() == {"kind": "big"}
        assert [m.data() for m in got[1:]] == [b"committed", b"plain"]
        assert_nothing_more(consumer, 500)


def test_partitioned_topic_replicates_per_partition_and_the_remote_gets_the_partitions(geo: Clusters) -> None:
    ns = geo.namespace("parts", ["a", "b"])
    path = f"{ns}/p"
    assert call(geo["a"].web_url, "PUT", f"/admin/v2/persistent/{path}/partitions", 3)[0] == 204
    with geo.client("a") as ca, geo.client("b") as cb:
        producer = ca.create_producer(f"persistent://{path}", batching_enabled=False)
        for i in range(30):
            producer.send(f"p{i}".encode(), partition_key=f"key-{i}")
        wait_until(lambda: call(geo["b"].web_url, "GET", f"/admin/v2/persistent/{path}/partitions")[1] ==
                   {"partitions": 3}, "the partitioned topic on b")
        consumer = _subscribe(cb, f"persistent://{path}")
        got = receive_all(consumer, 30)
        assert sorted(m.data() for m in got) == sorted(f"p{i}".encode() for i in range(30))
        assert {m.data(): m.partition_key() for m in got} == {f"p{i}".encode(): f"key-{i}" for i in range(30)}
        assert_nothing_more(consumer, 500)


def test_removing_a_cluster_removes_its_replicator_and_cursor(geo: Clusters) -> None:
    ns = geo.namespace("shrink", ["a", "b", "c"])
    path = f"{ns}/t"
    with geo.client("a") as ca:
        ca.create_producer(f"persistent://{path}").send(b"x")
        wait_until(lambda: all(geo.stats("a", path)["replication"].get(r, {}).get("connected") for r in "bc"),
                   "two connected replicators")
        assert call(geo["a"].web_url, "POST", f"/admin/v2/namespaces/{ns}/replication", ["a", "b"])[0] == 204
        replication = geo.stats("a", path)["replication"]
        assert replication["b"]["outboundConnection"]
        if "c" in replication:  # c still replicates into a (its own policy lists a): inbound only
            assert replication["c"]["outboundConnection"] is None and replication["c"]["connected"] is False
        cursors = geo.internal_stats("a", path)["cursors"]
        assert "pulsar.repl.c" not in cursors and "pulsar.repl.b" in cursors
        with pytest.raises(pulsar.PulsarException):
            ca.subscribe(f"persistent://{path}", "pulsar.repl.b")  # reserved: never a subscription


def test_remote_killed_holds_the_backlog_then_drains_it_once(geo: Clusters) -> None:
    ns = geo.namespace("outage", ["a", "b"])
    path = f"{ns}/t"
    topic = f"persistent://{path}"
    with geo.client("b") as cb:
        _subscribe(cb, topic).close()  # the subscription exists on b before the outage
    geo["b"].kill()  # SIGKILL
    try:
        with geo.client("a") as ca:
            producer = ca.create_producer(topic, batching_enabled=False)
            for i in range(100):
                producer.send(f"o{i}".encode())
            wait_until(lambda: geo.stats("a", path)["replication"]["b"]["connected"] is False, "b disconnected")
            repl = geo.stats("a", path)["replication"]["b"]
            assert repl["replicationBacklog"] == 100
            status, metrics = call(geo["a"].web_url, "GET", "/metrics")
            assert status == 200 and "pulsar_replication_backlog{" in metrics
            assert f'remote_cluster="b",topic="{topic}"}} 100.0' in metrics
    finally:
        geo["b"].start()  # same ports and data
    with geo.client("b") as cb:
        consumer = _subscribe(cb, topic)
        got = [m.data() for m in receive_all(consumer, 100)]
        assert got == [f"o{i}".encode() for i in range(100)]  # nothing lost, in order
        assert_nothing_more(consumer)  # nothing doubled
    wait_until(lambda: geo.stats("a", path)["replication"]["b"]["replicationBacklog"] == 0, "backlog drained")


def test_local_broker_killed_mid_replication_loses_and_doubles_nothing(geo: Clusters) -> None:
    ns = geo.namespace("crash", ["a", "b"])
    path = f"{ns}/t"
    topic = f"persistent://{path}"
    count = 3000
    with geo.client("b") as cb:
        _subscribe(cb, topic).close()
    with geo.client("a") as ca:
        producer = ca.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        for i in range(count):
            producer.send_async(f"x{i}".encode(), None)
        producer.flush()  # every message acknowledged (durable in a)
        geo["a"].kill()  # SIGKILL while the replicator is still copying (hundreds of entries behind, here)
    geo["a"].start()
    with geo.client("b") as cb:
        consumer = _subscribe(cb, topic)
        got = [m.data() for m in receive_all(consumer, count, timeout_s=60)]
        assert sorted(got) == sorted(f"x{i}".encode() for i in range(count))
        assert_nothing_more(consumer)
    assert geo.internal_stats("b", path)["numberOfEntries"] == count  # not stored twice on the remote


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _admin(url: str, *args: str) -> Ran:
    """``magnetar admin`` in this process (the same argv and printing; no interpreter start per verb)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin_main(["--admin-url", url, *args])
    return Ran(code, out.getvalue(), err.getvalue())


def test_admin_cli_clusters_and_replication_clusters(geo: Clusters) -> None:
    url = geo["a"].web_url
    created = _admin(url, "clusters", "create", "extra", "--url", "http://127.0.0.1:1",
                     "--broker-url", "pulsar://127.0.0.1:2")
    assert created.returncode == 0, created.stderr
    assert _admin(url, "clusters", "create", "extra", "--url", "http://x:1").returncode == 1  # 409
    assert _admin(url, "clusters", "update", "extra", "--url", "http://127.0.0.1:3",
                  "--broker-url", "pulsar://127.0.0.1:4", "--broker-url-secure", "pulsar+ssl://127.0.0.1:5"
                  ).returncode == 0
    shown = json.loads(_admin(url, "clusters", "get", "extra").stdout)
    assert shown == {"serviceUrl": "http://127.0.0.1:3", "brokerServiceUrl": "pulsar://127.0.0.1:4",
                     "brokerServiceUrlTls": "pulsar+ssl://127.0.0.1:5"}
    assert "extra" in _admin(url, "clusters", "list").stdout.split()
    assert _admin(url, "clusters", "update", "nowhere", "--url", "http://x:1").returncode == 1  # 404
    assert call(url, "POST", "/admin/v2/clusters/extra", {"brokerServiceUrl": "http://wrong"})[0] == 400
    ns = geo.namespace("cli", ["a", "b"])
    assert _admin(url, "namespaces", "get-clusters", ns).stdout.split() == ["a", "b"]
    refused = _admin(url, "namespaces", "set-clusters", ns, "-c", "a,extra")  # not allowed for the tenant
    assert refused.returncode == 1 and "allowed clusters" in refused.stderr
    topic = f"persistent://{ns}/t"
    assert _admin(url, "topics", "create", topic).returncode == 0
    assert _admin(url, "topics", "set-replication-clusters", topic, "-c", "a").returncode == 0
    assert _admin(url, "topics", "get-replication-clusters", topic).stdout.split() == ["a"]
    assert geo.stats("a", topic.removeprefix("persistent://"))["replication"] == {}  # the topic's policy wins
    assert _admin(url, "topics", "remove-replication-clusters", topic).returncode == 0
    wait_until(lambda: "b" in geo.stats("a", topic.removeprefix("persistent://"))["replication"],
               "the namespace's clusters apply again")
    assert _admin(url, "clusters", "delete", "extra").returncode == 0
    assert _admin(url, "clusters", "delete", "a").returncode == 1  # the local cluster stays


def test_replicated_copies_without_deduplication_are_warned_and_counted(geo: Clusters) -> None:
    """Deduplication off where copies arrive: a crash of the receiver may store a resend twice (issue 35 item 4),
    so the receiving topic says so in its log and counts the copies in its stats."""
    ns = geo.namespace("nodedup", ["a", "b"])
    path = f"{ns}/t"
    assert call(geo["b"].web_url, "POST", f"/admin/v2/namespaces/{ns}/deduplication", False)[0] == 204
    with geo.client("a") as ca, geo.client("b") as cb:
        in_b = _subscribe(cb, f"persistent://{path}")
        producer = ca.create_producer(f"persistent://{path}", batching_enabled=False)
        for i in range(3):
            producer.send(f"m{i}".encode())
        assert [m.data() for m in receive_all(in_b, 3)] == [b"m0", b"m1", b"m2"]
    stats = geo.stats("b", path)
    assert stats["deduplicationStatus"] == "Disabled"
    assert stats["replicatedCopiesNotDeduplicated"] == 3
    assert geo["b"].wait_for_log(f"persistent://{path} receives geo-replicated messages with deduplication off", 10)
    assert geo.stats("a", path)["replicatedCopiesNotDeduplicated"] == 0  # nothing came to a


def test_a_broker_without_deduplication_and_with_remote_clusters_warns_at_start(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", extra_args=("--set", "brokerDeduplicationEnabled=false")).start()
    try:
        body = {"serviceUrl": "http://127.0.0.1:1", "brokerServiceUrl": "pulsar://127.0.0.1:1"}
        assert call(proc.web_url, "PUT", "/admin/v2/clusters/elsewhere", body)[0] == 204
        proc.restart()
        assert proc.wait_for_log("brokerDeduplicationEnabled=false with other clusters registered (elsewhere)", 10)
    finally:
        proc.kill()
