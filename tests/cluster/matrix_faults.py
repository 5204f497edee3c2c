"""The cluster fault matrix (``scripts/cluster-matrix``; not in CI: each scenario runs a cluster of its own for a
minute or more): a rolling restart of every broker under load; SIGSTOP of an owner past its session timeout,
then SIGCONT (the zombie: its appends are refused by the fence, it acknowledges nothing after the seal); an
owner cut off from ZooKeeper only, and from S3 only; ZooKeeper down for 10 s (the brokers keep serving what
they own and nothing is reassigned after). Each ends with the checker (``checker.py``): every receipted message
stored once, in order per producer, no message id for two payloads. Unavailability is printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.cluster.checker import Load, read_back, verify
from tests.cluster.conftest import make_client, new_namespace
from tests.cluster.harness import ClusterHarness, Node

RECEIPTS = 200
WAIT_S = 180.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterHarness]:
    harness = ClusterHarness(tmp_path)
    try:
        yield harness.start()
    finally:
        harness.close()


@pytest.fixture
def client(cluster: ClusterHarness) -> Iterator[pulsar.Client]:
    c = make_client(cluster.service_url)
    try:
        yield c
    finally:
        c.close()


def owners(cluster: ClusterHarness, topic: str, among: list[Node] | None = None) -> set[str]:
    return {str(cluster.lookup(node, topic)) for node in (among or cluster.running())}


def grow(cluster: ClusterHarness, load: Load, by: int = RECEIPTS) -> float:
    """Until ``by`` more receipts arrived; returns how long it took."""
    start, began = load.receipts.count(), time.monotonic()
    cluster.wait_until(lambda: load.receipts.count() >= start + by, f"{by} more receipts", WAIT_S)
    return time.monotonic() - began


def owner_of(cluster: ClusterHarness, topic: str) -> Node:
    cluster.wait_until(lambda: len(owners(cluster, topic)) == 1, f"the brokers agree on the owner of {topic}")
    (url,) = owners(cluster, topic)
    return cluster.node(url)


def finish(cluster: ClusterHarness, client: pulsar.Client, load: Load, topic: str, what: str) -> None:
    load.stop()
    cluster.wait_until(lambda: len(owners(cluster, topic)) == 1, "lookups agree after healing")
    counts = verify(load.receipts, read_back(client, topic, 0))
    gaps = {p: round(g, 1) for p, g in load.receipts.gaps().items()}
    print(f"\n{what}: {counts}; longest gap between receipts per producer (s): {gaps}")


def test_rolling_restart_of_every_broker_under_load(cluster: ClusterHarness, client: pulsar.Client) -> None:
    topics = [f"persistent://{new_namespace(cluster)}/rolling-{i}" for i in range(3)]
    loads = [Load(client, t, producers=1, prefix=f"r{i}-").start() for i, t in enumerate(topics)]
    try:
        for load in loads:
            grow(cluster, load)
        for node in cluster.nodes:
            assert node.stop() == 0  # SIGTERM: it hands its bundles over, then exits cleanly
            node.start()
            cluster.wait_until(lambda: len(cluster.registered()) == 3, "the broker is back")
            for load in loads:
                grow(cluster, load, RECEIPTS // 2)
    finally:
        for load in loads:
            load.stop()
    for topic, load in zip(topics, loads, strict=True):
        finish(cluster, client, load, topic, f"rolling restart, {topic}")


def test_a_paused_owner_past_its_session_is_fenced_and_acknowledges_nothing_after(
    cluster: ClusterHarness, client: pulsar.Client
) -> None:
    topic = f"persistent://{new_namespace(cluster)}/zombie"
    load = Load(client, topic, producers=2, send_timeout_ms=60_000).start()
    grow(cluster, load)
    zombie = owner_of(cluster, topic)
    zombie.pause()
    healthy = [n for n in cluster.nodes if n is not zombie]
    cluster.wait_until(lambda: zombie.broker_id not in cluster.registered(), "the zombie's session expired")
    # a client of a healthy broker makes it take the topic: its recovery seals the zombie's ledger
    other = make_client(healthy[0].url)
    try:
        reader = other.create_reader(topic, pulsar.MessageId.earliest)
        reader.close()
        cluster.wait_until(lambda: owners(cluster, topic, healthy) - {zombie.url, "None"} != set()
                           and len(owners(cluster, topic, healthy)) == 1, "a healthy broker owns the topic")
    finally:
        other.close()
    zombie.resume()
    grow(cluster, load)
    assert zombie.process.wait_for(lambda log: "ownership lost" in log or "fenced" in log.lower(), 60.0), \
        "the zombie never noticed it lost the topic"
    finish(cluster, client, load, topic, "SIGSTOP past the session timeout, SIGCONT")


def test_an_owner_cut_off_from_zookeeper(cluster: ClusterHarness, client: pulsar.Client) -> None:
    topic = f"persistent://{new_namespace(cluster)}/cut-from-zk"
    load = Load(client, topic, producers=2).start()
    grow(cluster, load)
    victim = owner_of(cluster, topic)
    victim.zk_proxy.cut()
    cluster.wait_until(lambda: victim.broker_id not in cluster.registered(), "the cut broker's session expired")
    healthy = [n for n in cluster.nodes if n is not victim]
    other = make_client(healthy[0].url)
    try:
        other.create_reader(topic, pulsar.MessageId.earliest).close()  # a healthy broker takes the topic
    finally:
        other.close()
    grow(cluster, load)  # the producers moved: the cut broker's appends were fenced
    victim.zk_proxy.restore()
    cluster.wait_until(lambda: len(cluster.registered()) == 3, "the cut broker is back")
    grow(cluster, load)
    finish(cluster, client, load, topic, "owner cut from ZooKeeper")


def test_an_owner_cut_off_from_the_object_store(cluster: ClusterHarness, client: pulsar.Client) -> None:
    topic = f"persistent://{new_namespace(cluster)}/cut-from-s3"
    load = Load(client, topic, producers=2).start()
    grow(cluster, load)
    victim = owner_of(cluster, topic)
    victim.s3_proxy.cut()
    cut_at = time.monotonic()
    cluster.wait_until(lambda: time.monotonic() - cut_at > 10.0 or False, "10 s of the cut", 30.0)
    victim.s3_proxy.restore()
    took = grow(cluster, load)
    finish(cluster, client, load, topic, f"owner cut from S3 for 10 s (receipts resumed {took:.1f} s after)")


def test_zookeeper_down_for_ten_seconds(cluster: ClusterHarness, client: pulsar.Client) -> None:
    ns = new_namespace(cluster)
    topics = [f"persistent://{ns}/zk-down-{i}" for i in range(4)]
    loads = [Load(client, t, producers=1, prefix=f"z{i}-").start() for i, t in enumerate(topics)]
    for load in loads:
        grow(cluster, load)
    before = {n.name: cluster.owned(n) for n in cluster.nodes}
    cluster.zk.stop()
    down_at = time.monotonic()
    for load in loads:  # serving goes on: every owner keeps its bundles
        grow(cluster, load, RECEIPTS // 4)
    cluster.wait_until(lambda: time.monotonic() - down_at > 10.0, "10 s of ZooKeeper down", 60.0)
    cluster.zk.start()
    cluster.wait_until(lambda: len(cluster.registered()) == 3, "every broker registered again")
    for load in loads:
        grow(cluster, load)
    after = {n.name: cluster.owned(n) for n in cluster.nodes}
    assert after == before, f"bundles moved after ZooKeeper came back: {before} -> {after}"
    for topic, load in zip(topics, loads, strict=True):
        finish(cluster, client, load, topic, f"ZooKeeper down 10 s, {topic}")
