"""Offload with the official client reading back, on both drivers: admin offload (``topics offload
--size-threshold``, ``offload-status``), the local copies released at deletion lag 0 so reads really come
from the store, consume/reader/seek by time into offloaded ledgers, a restart; the namespace threshold; the
deletion lag keeping the local copy."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.offload.conftest import (
    BUCKET,
    WAIT_S,
    admin,
    fs_args,
    internal_stats,
    s3_args,
    start_broker,
)
from tests.s3_server import MotoServer

RECEIVE_MS = 10_000


@pytest.fixture(scope="module", params=["aws-s3", "filesystem"])
def tiered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = Path(tmp_path_factory.mktemp("tiered"))
    if request.param == "aws-s3":
        moto: MotoServer = request.getfixturevalue("moto")
        moto.create_bucket(BUCKET)
        args = s3_args(moto.endpoint)
    else:
        (data / "offload").mkdir()
        args = fs_args(data / "offload")
    proc = start_broker(data / "broker", args)
    proc.driver = request.param  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.kill()


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            producer.send(b"msg-%d" % i)
    finally:
        client.close()


def consume_all(client: pulsar.Client, topic: str, count: int) -> list[pulsar.Message]:
    consumer = client.subscribe(topic, f"s-{uuid.uuid4().hex[:6]}",
                                initial_position=pulsar.InitialPosition.Earliest)
    messages = [consumer.receive(RECEIVE_MS) for _ in range(count)]
    for m in messages:
        consumer.acknowledge(m)
    consumer.close()
    return messages


def released(broker: BrokerProcess, local: str, count: int) -> bool:
    pattern = f"{local}: deleted the local copy of offloaded ledger"
    return broker.wait_for(lambda log: log.count(pattern) >= count, WAIT_S)


def test_admin_offload_then_consume_read_and_seek_by_time(tiered: BrokerProcess) -> None:
    local = f"t-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    produce(tiered, topic, 23)  # 5 entries a ledger: 4 sealed ledgers and the current one
    code, out = admin(tiered, "topics", "offload", "--size-threshold", "0", topic)
    assert code == 0 and "Offload triggered" in out, out
    code, out = admin(tiered, "topics", "offload-status", "-w", topic)
    assert code == 0 and "Offload was a success" in out, out
    assert released(tiered, local, 4), tiered.log_text()[-3000:]

    ledgers = internal_stats(tiered, local)["ledgers"]
    assert [x["offloaded"] for x in ledgers] == [True, True, True, True, False]
    for ledger in ledgers[:4]:
        context = ledger["offloadContext"]
        assert context["complete"] and context["bookkeeperDeleted"]
        assert context["driverMetadata"]["name"] == tiered.driver  # type: ignore[attr-defined]
    stats = call(tiered.web_url, "GET", f"/admin/v2/persistent/public/default/{local}/stats")[1]
    assert stats["offloadedStorageSize"] == sum(x["size"] for x in ledgers[:4]) > 0
    with urllib.request.urlopen(f"{tiered.web_url}/metrics", timeout=15) as response:
        metrics = response.read().decode()
    offloaded = f'pulsar_storage_offloaded_size{{cluster="standalone",namespace="public/default",topic="{topic}"}}'
    assert f"{offloaded} {float(stats['offloadedStorageSize'])}" in metrics, metrics[-2000:]
    status, body = call(tiered.web_url, "GET", f"/admin/v2/persistent/public/default/{local}/offload")
    assert status == 200 and body["status"] == "SUCCESS"
    assert body["firstUnoffloadedMessage"]["ledgerId"] == ledgers[4]["ledgerId"]

    client = make_client(tiered.url)
    try:
        messages = consume_all(client, topic, 23)
        assert [m.data() for m in messages] == [b"msg-%d" % i for i in range(23)]
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert [reader.read_next(RECEIVE_MS).data() for _ in range(23)] == [m.data() for m in messages]
        reader.close()
        # seek by time to a message inside an offloaded ledger: the first with publish time >= t
        times = [m.publish_timestamp() for m in messages]
        k = next(i for i in range(6, 19) if times[i] > times[i - 1]) if times[6] != times[18] else 6
        consumer = client.subscribe(topic, "seeker", initial_position=pulsar.InitialPosition.Latest)
        consumer.seek(times[k])
        assert consumer.receive(RECEIVE_MS).data() == messages[k].data()
        consumer.close()
    finally:
        client.close()

    tiered.restart()
    assert [x["offloaded"] for x in internal_stats(tiered, local)["ledgers"]][:4] == [True] * 4
    client = make_client(tiered.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert [reader.read_next(RECEIVE_MS).data() for _ in range(23)] == [b"msg-%d" % i for i in range(23)]
    finally:
        client.close()


def test_namespace_threshold_offloads_by_itself(tiered: BrokerProcess) -> None:
    ns = f"thr-{uuid.uuid4().hex[:6]}"
    assert call(tiered.web_url, "PUT", f"/admin/v2/namespaces/public/{ns}")[0] == 204
    code, _ = admin(tiered, "namespaces", "set-offload-threshold", "--size", "0", f"public/{ns}")
    assert code == 0
    code, out = admin(tiered, "namespaces", "get-offload-threshold", f"public/{ns}")
    assert code == 0 and out.strip() == "0"
    topic = f"persistent://public/{ns}/auto"
    produce(tiered, topic, 12)  # two sealed ledgers: both go beyond a threshold of 0 bytes
    pattern = re.compile(rf"public/{ns}/persistent/auto: offloaded ledger")
    assert tiered.wait_for(lambda log: len(pattern.findall(log)) >= 2, WAIT_S), tiered.log_text()[-3000:]
    client = make_client(tiered.url)
    try:
        assert [m.data() for m in consume_all(client, topic, 12)] == [b"msg-%d" % i for i in range(12)]
    finally:
        client.close()


def test_deletion_lag_keeps_the_local_copy_until_it_passes(tiered: BrokerProcess) -> None:
    ns = f"lag-{uuid.uuid4().hex[:6]}"
    assert call(tiered.web_url, "PUT", f"/admin/v2/namespaces/public/{ns}")[0] == 204
    assert admin(tiered, "namespaces", "set-offload-deletion-lag", "--lag", "1h", f"public/{ns}")[0] == 0
    code, out = admin(tiered, "namespaces", "get-offload-deletion-lag", f"public/{ns}")
    assert code == 0 and out.strip() == "3600000"
    topic = f"persistent://public/{ns}/lagged"
    produce(tiered, topic, 7)
    assert admin(tiered, "topics", "offload", "-s", "0", topic)[0] == 0
    assert admin(tiered, "topics", "offload-status", "-w", topic)[0] == 0
    path = f"/admin/v2/persistent/public/{ns}/lagged/internalStats"
    first = call(tiered.web_url, "GET", path)[1]["ledgers"][0]
    assert first["offloaded"] and not first["offloadContext"]["bookkeeperDeleted"]
    assert admin(tiered, "namespaces", "set-offload-deletion-lag", "--lag", "0s", f"public/{ns}")[0] == 0
    assert released(tiered, f"public/{ns}/persistent/lagged", 1), tiered.log_text()[-3000:]
    assert call(tiered.web_url, "GET", path)[1]["ledgers"][0]["offloadContext"]["bookkeeperDeleted"]
