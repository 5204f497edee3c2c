"""Read-only admin requests create nothing (issue item 7, "GETs that never create").

A GET on a declared partition that was never written to answers from an empty view (zero stats, as Pulsar
shows them) and a GET on a topic that does not exist answers 404: neither opens or creates a managed ledger,
a file, a descriptor held afterwards, or metadata.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.abuse.conftest import http, open_fds, unique
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

PARTITIONS = 2000
SAMPLED = range(0, PARTITIONS, 50)  # every GET kind on 40 single partitions, the fan-out ones on all 2,000
FDS_SLACK = 8  # HTTP keep-alive sockets and the like, never one per partition
SETTLE_S = 15.0
V2 = "/admin/v2/persistent"

PER_TOPIC_GETS = (
    "/stats", "/internalStats", "/lastMessageId", "/subscriptions", "/offload", "/compaction",
    "/examinemessage?initialPosition=earliest&messagePosition=1", "/ledger/0/entry/0",
    "/subscription/s/position/1", "/subscription/s/replicatedSubscriptionStatus", "/backlogQuotaMap",
    "/permissions", "/partitions", "/replication",
)
PARTITIONED_GETS = ("/partitioned-stats", "/partitioned-stats?perPartition=true", "/partitioned-internalStats",
                    "/subscriptions", "/partitions")


def _files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def _txn_gets(local_path: str) -> tuple[str, ...]:
    tenant_ns_topic = local_path.removeprefix(V2 + "/")
    return (f"/admin/v3/transactions/transactionBufferStats/{tenant_ns_topic}",
            f"/admin/v3/transactions/pendingAckStats/{tenant_ns_topic}/s")


def test_gets_on_a_fresh_2000_partition_topic_create_nothing(broker: BrokerProcess) -> None:
    name = unique("wide")
    parent = f"{V2}/public/default/{name}"
    assert http(broker, "PUT", f"{parent}/partitions", PARTITIONS)[0] == 204
    written = f"persistent://public/default/{name}-partition-{PARTITIONS - 1}"
    client = make_client(broker.url)  # one partition written, so an empty view can be compared to a real one
    try:
        client.create_producer(written).send(b"x")
    finally:
        client.close()
    files, fds = _files(broker.data_dir), open_fds(broker)
    for suffix in PARTITIONED_GETS:
        status, reply = http(broker, "GET", parent + suffix)
        assert status == 200, (suffix, status, reply)
    stats = http(broker, "GET", f"{parent}/partitioned-stats?perPartition=true")[1]
    assert stats["metadata"] == {"partitions": PARTITIONS} and len(stats["partitions"]) == PARTITIONS
    assert stats["msgInCounter"] == 1 and stats["storageSize"] > 0
    fresh, real = stats["partitions"][f"persistent://public/default/{name}-partition-0"], stats["partitions"][written]
    assert set(fresh) == set(real), set(fresh) ^ set(real)
    assert fresh["msgInCounter"] == 0 and fresh["storageSize"] == 0 and fresh["subscriptions"] == {}
    for i in SAMPLED:
        path = f"{parent}-partition-{i}"
        for get in PER_TOPIC_GETS:
            status, reply = http(broker, "GET", path + get)
            assert status in (200, 404) and status < 500, (get, status, reply)
        for get in _txn_gets(path):
            assert http(broker, "GET", get)[0] in (404, 503)  # transactions may be disabled
    internal = http(broker, "GET", f"{parent}-partition-0/internalStats")[1]
    assert internal["ledgers"] == [] and internal["numberOfEntries"] == 0
    assert http(broker, "GET", f"{parent}-partition-0/lastMessageId")[1] == {
        "ledgerId": -1, "entryId": -1, "partitionIndex": 0}
    assert _files(broker.data_dir) == files, "a GET created files"
    # sockets of the finished HTTP requests may take a moment to close on a loaded machine: bounded wait
    assert broker.wait_until(lambda: open_fds(broker) <= fds + FDS_SLACK, SETTLE_S), "a GET left descriptors open"
    assert http(broker, "GET", f"{parent}-partition-1/internalStats")[1]["ledgers"] == []  # still unwritten
    created = [line for line in broker.log_lines if "creating topic" in line and name in line]
    assert all(line.rstrip().endswith(written) for line in created), created


def test_gets_on_a_topic_that_does_not_exist_answer_404(broker: BrokerProcess) -> None:
    path = f"{V2}/public/default/{unique('ghost')}"
    files = _files(broker.data_dir)
    for get in (*PER_TOPIC_GETS, "/partitioned-stats", "/partitioned-internalStats"):
        status, _ = http(broker, "GET", path + get)
        if get in ("/partitions", "/permissions", "/backlogQuotaMap", "/replication"):
            assert status in (200, 404), (get, status)  # answered from metadata, as Pulsar does
        else:
            assert status == 404, (get, status)
    assert http(broker, "GET", path + "/stats") == (404, {"reason": "Topic not found"})
    assert _files(broker.data_dir) == files
    assert path.rsplit("/", 1)[1] not in str(http(broker, "GET", f"{V2}/public/default")[1])
