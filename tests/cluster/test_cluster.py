"""A real three-broker cluster (ZooKeeper, moto, ``magnetar broker`` processes, each through its own proxies) and
the official client through one service URL listing the three: a partitioned topic spreads over the brokers,
every broker's lookup names the same owner, every broker answers a topic's metadata while its other admin
calls redirect (307) to its owner, and an unload and a SIGKILL of an owner under load lose and
duplicate nothing (the checker of ``checker.py``). The fault matrix is ``matrix_*.py`` (scripts/cluster-matrix).
"""

from __future__ import annotations

import time

import pulsar

from tests.cluster.checker import Load, read_back, verify
from tests.cluster.conftest import new_namespace, partitions_covering_every_bundle
from tests.cluster.harness import ClusterHarness

RECEIPTS_BEFORE = 200
RECEIPTS_AFTER = 200
WAIT_S = 120.0


def _create_partitioned(cluster: ClusterHarness, topic: str, partitions: int) -> None:
    path = "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/partitions"
    status, body = cluster.http(cluster.running()[0], "PUT", path, partitions)
    assert status in (200, 204), body


def _owners(cluster: ClusterHarness, topic: str) -> set[str]:
    """The broker each running broker's lookup names for ``topic`` (one element when they agree)."""
    return {str(cluster.lookup(node, topic)) for node in cluster.running()}


def _receipts_grow(load: Load, cluster: ClusterHarness, by: int) -> None:
    start = load.receipts.count()
    cluster.wait_until(lambda: load.receipts.count() >= start + by, f"{by} more receipts", WAIT_S)


def test_a_partitioned_topic_spreads_over_the_brokers_and_every_broker_agrees(
    cluster: ClusterHarness, client: pulsar.Client
) -> None:
    topic = f"persistent://{new_namespace(cluster)}/spread"
    partitions = partitions_covering_every_bundle(topic)
    _create_partitioned(cluster, topic, partitions)
    load = Load(client, topic, producers=3).start()
    try:
        _receipts_grow(load, cluster, RECEIPTS_BEFORE)
    finally:
        load.stop()
    owners = {}
    for i in range(partitions):
        name = f"{topic}-partition-{i}"
        agreed = _owners(cluster, name)
        assert len(agreed) == 1, f"brokers disagree on {name}: {agreed}"
        owners[name] = agreed.pop()
    assert set(owners.values()) == {n.url for n in cluster.nodes}  # four bundles over three brokers
    verify(load.receipts, read_back(client, topic, partitions))
    _admin_from_any_broker(cluster, topic, partitions, owners)


def _admin_from_any_broker(cluster: ClusterHarness, topic: str, partitions: int, owners: dict[str, str]) -> None:
    """Metadata from any broker; a topic's own admin calls answered by its owner, others redirecting (307)."""
    path = topic.removeprefix("persistent://")
    ns = path.rsplit("/", 1)[0]
    for node in cluster.nodes:
        status, meta = cluster.http(node, "GET", f"/admin/v2/persistent/{path}/partitions")
        assert (status, meta["partitions"]) == (200, partitions), meta
        status, listed = cluster.http(node, "GET", f"/admin/v2/persistent/{ns}/partitioned")
        assert status == 200 and topic in listed, listed
        for i in range(partitions):
            name = f"{path}-partition-{i}"
            status, answer = cluster.http(node, "GET", f"/admin/v2/persistent/{name}/stats")
            owner = cluster.node(owners[f"{topic}-partition-{i}"])
            if node is owner:
                assert status == 200 and "publishers" in answer, answer
            else:
                assert status == 307 and str(answer).startswith(f"{owner.web_url}/admin/v2/persistent/{name}/stats"), \
                    (status, answer)


def test_an_unload_under_load_moves_the_bundle_and_loses_nothing(
    cluster: ClusterHarness, client: pulsar.Client
) -> None:
    ns = new_namespace(cluster)
    topic = f"persistent://{ns}/moving"
    load = Load(client, topic, producers=2).start()
    try:
        _receipts_grow(load, cluster, RECEIPTS_BEFORE)
        (before,) = _owners(cluster, topic)
        status, bundle = cluster.http(cluster.nodes[0], "GET", f"/lookup/v2/topic/{topic.replace('://', '/')}/bundle")
        assert status == 200, bundle
        status, body = cluster.http(cluster.node(before), "PUT", f"/admin/v2/namespaces/{ns}/{bundle}/unload")
        assert status == 204, body
        cluster.wait_until(lambda: _owners(cluster, topic) not in ({before}, {"None"}), "the bundle moved")
        _receipts_grow(load, cluster, RECEIPTS_AFTER)
    finally:
        load.stop()
    (after,) = _owners(cluster, topic)
    assert after != before
    verify(load.receipts, read_back(client, topic, 0))


def test_sigkill_of_an_owner_under_load_loses_nothing(cluster: ClusterHarness, client: pulsar.Client) -> None:
    topic = f"persistent://{new_namespace(cluster)}/killed-owner"
    load = Load(client, topic, producers=2).start()
    try:
        _receipts_grow(load, cluster, RECEIPTS_BEFORE)
        (owner_url,) = _owners(cluster, topic)
        victim = cluster.node(owner_url)
        killed_at = time.monotonic()
        victim.kill()
        _receipts_grow(load, cluster, RECEIPTS_AFTER)
        unavailable_s = time.monotonic() - killed_at
    finally:
        load.stop()
    cluster.wait_until(lambda: len(_owners(cluster, topic)) == 1, "the survivors agree on the new owner")
    (new_owner,) = _owners(cluster, topic)
    assert new_owner != owner_url
    verify(load.receipts, read_back(client, topic, 0))
    print(f"\nSIGKILL of the owner: receipts resumed after {unavailable_s:.1f} s "
          f"(session timeout {cluster.session_timeout_ms} ms); longest gap per producer {load.receipts.gaps()}")
    victim.start()  # the module's cluster has three brokers again
    cluster.wait_until(lambda: len(cluster.registered()) == 3, "the restarted broker registered")
