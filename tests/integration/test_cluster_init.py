"""``magnetar initialize-cluster-metadata`` against a real ZooKeeper: the records a cluster's brokers need,
idempotent, updates what differs, and clear errors; then a broker started on that store serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.zk_server import ZooKeeperServer, unique_chroot, zk_server

pytestmark = pytest.mark.integration
__all__ = ["zk_server"]


def _init(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "initialize-cluster-metadata", *args],
                          capture_output=True, text=True, timeout=120)


def test_initializes_a_cluster_idempotently_and_a_broker_serves_on_it(
    tmp_path: Path, zk_server: ZooKeeperServer
) -> None:
    chroot = unique_chroot()
    url = zk_server.url(chroot)
    args = ["--cluster", "east", "--metadata-store", url, "--web-service-url", "http://east:8080",
            "--broker-service-url", "pulsar://east:6650"]
    first = _init(*args)
    assert first.returncode == 0, first.stderr
    assert "cluster east: created" in first.stdout and "namespace public/default: created" in first.stdout
    again = _init(*args)
    assert again.returncode == 0 and "created" not in again.stdout and "updated" not in again.stdout
    moved = _init(*args[:-2], "--broker-service-url", "pulsar://east-2:6650")
    assert "cluster east: updated" in moved.stdout
    zk = KazooClient(hosts=zk_server.hosts + chroot)
    zk.start(timeout=30)
    try:
        cluster = json.loads(zk.get("/admin/clusters/east")[0])
        assert cluster["serviceUrl"] == "http://east:8080" and cluster["brokerServiceUrl"] == "pulsar://east-2:6650"
        assert json.loads(zk.get("/admin/policies/public")[0])["allowedClusters"] == ["east"]
        assert zk.exists("/admin/policies/pulsar/system") is not None
    finally:
        zk.stop()
        zk.close()
    broker = BrokerProcess(tmp_path / "data", extra_args=("--set", f"metadataStoreUrl={url}",
                                                          "--set", "clusterName=east")).start()
    try:
        client = make_client(broker.url)
        consumer = client.subscribe("public/default/after-init", "sub")
        client.create_producer("public/default/after-init").send(b"hello")
        assert consumer.receive(10_000).data() == b"hello"
        client.close()
    finally:
        broker.kill()


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--cluster", "c", "--metadata-store", "etcd:http://x:2379"], 2, "unknown metadata store"),
    (["--cluster", "a/b", "--metadata-store", "zk:127.0.0.1:1"], 2, "--cluster must be a name"),
    (["--cluster", "c", "--metadata-store", "zk:127.0.0.1:1", "--metadata-store-operation-timeout-seconds", "1"],
     1, "cannot connect to ZooKeeper"),
    (["--cluster", "c"], 2, "--metadata-store"),
])
def test_clear_errors(args: list[str], code: int, message: str) -> None:
    result = _init(*args)
    assert result.returncode == code, result
    assert message in result.stderr
