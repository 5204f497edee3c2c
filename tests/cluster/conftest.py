"""One real three-broker cluster per test module (``tests/cluster/harness.py``) and the official client on it.

The CI tier (``test_*.py`` here) shares one cluster per module; the fault matrix (``matrix_*.py``, run by
``scripts/cluster-matrix``) starts clusters of its own."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar.broker.cluster.bundles import Bundles, topic_hash
from tests.cluster.harness import ClusterHarness

pytestmark = pytest.mark.integration

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    harness = ClusterHarness(Path(tmp_path_factory.mktemp("cluster")))
    try:
        yield harness.start()
    finally:
        harness.close()


def make_client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


@pytest.fixture
def client(cluster: ClusterHarness) -> Iterator[pulsar.Client]:
    c = make_client(cluster.service_url)
    try:
        yield c
    finally:
        c.close()


def new_namespace(cluster: ClusterHarness) -> str:
    """A namespace nobody used yet (its bundles unowned), deduplication on."""
    ns = f"public/ns-{os.getpid()}-{next(_namespaces)}"
    node = cluster.running()[0]
    status, body = cluster.http(node, "PUT", f"/admin/v2/namespaces/{ns}", {"deduplicationEnabled": True})
    assert status in (200, 204), body
    return ns


def partitions_covering_every_bundle(topic: str, bundles: int = 4, at_most: int = 64) -> int:
    """The fewest partitions of ``topic`` that put at least one partition in each default bundle."""
    cut = Bundles.default(bundles)
    seen = set()
    for count in range(1, at_most + 1):
        seen.add(cut.find_hash(topic_hash(f"{topic}-partition-{count - 1}")))
        if len(seen) == bundles:
            return count
    raise AssertionError(f"{at_most} partitions of {topic} do not cover {bundles} bundles")
