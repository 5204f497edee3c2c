"""Faults of the S3 endpoint with the real broker process and the official client: the endpoint down during
an offload (ERROR status with the reason, local copy kept and served, the stored request resumed whole under
a fresh uuid once it is back), down during reads of offloaded ledgers (nothing delivered, never wrong data,
the error in offload-status / stats / internal stats / metrics, admin reads answer 500, delivery resumes by
itself in order), a deleted object and a corrupted block (errors, never data; delivery resumes once
restored), GET_LAST_MESSAGE_ID needing the failing store, SIGKILL in the middle of an offload (the request
resumed after restart without touching the topic, the stale attempt's uuid never becomes the ledger's
copy), and the threshold reaching topics not loaded after a restart. The broker reaches moto through a TCP
gate the test opens and closes."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.offload.conftest import BUCKET, WAIT_S, admin, internal_stats, s3_args, start_broker
from tests.s3_server import MotoServer, TcpGate

NOT_DELIVERED_MS = 3000
RECEIVE_MS = 15_000
EXPECTED = [b"msg-%d" % i for i in range(12)]


@pytest.fixture(scope="module")
def gate(moto: MotoServer) -> Iterator[TcpGate]:
    moto.create_bucket(BUCKET)
    g = TcpGate(moto.port).open()
    try:
        yield g
    finally:
        g.close()


def gated_args(gate: TcpGate) -> tuple[str, ...]:
    return (*s3_args(gate.endpoint), "--set", "managedLedgerOffloadReadCacheSizeInBytes=0")


@pytest.fixture(scope="module")
def broker(gate: TcpGate, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(Path(tmp_path_factory.mktemp("faults")), gated_args(gate))
    try:
        yield proc
    finally:
        proc.kill()


def produce(broker: BrokerProcess, topic: str) -> None:
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for data in EXPECTED:
            producer.send(data)
    finally:
        client.close()


def assert_reads_all(broker: BrokerProcess, topic: str) -> None:
    client = make_client(broker.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert [reader.read_next(RECEIVE_MS).data() for _ in EXPECTED] == EXPECTED
    finally:
        client.close()


def offloaded_count(broker: BrokerProcess, local: str, count: int) -> bool:
    pattern = re.compile(rf"default/persistent/{local}: offloaded ledger")
    return broker.wait_for(lambda log: len(pattern.findall(log)) >= count, WAIT_S)


def first_context(broker: BrokerProcess, local: str) -> dict[str, Any]:
    context: dict[str, Any] = internal_stats(broker, local)["ledgers"][0]["offloadContext"]
    return context


def uuid_of(context: dict[str, Any]) -> str:
    return next(p["value"] for p in context["driverMetadata"]["properties"] if p["key"] == "uuid")


def offloaded_and_released(broker: BrokerProcess, local: str) -> list[dict[str, Any]]:
    topic = f"persistent://public/default/{local}"
    produce(broker, topic)
    assert admin(broker, "topics", "offload", "-s", "0", topic)[0] == 0
    assert admin(broker, "topics", "offload-status", "-w", topic)[0] == 0
    pattern = f"{local}: deleted the local copy of offloaded ledger"
    assert broker.wait_for(lambda log: log.count(pattern) >= 2, WAIT_S), broker.log_text()[-3000:]
    ledgers: list[dict[str, Any]] = internal_stats(broker, local)["ledgers"]
    return ledgers


def test_endpoint_down_during_offload_then_back(broker: BrokerProcess, gate: TcpGate, moto: MotoServer) -> None:
    local = f"down-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    produce(broker, topic)  # two sealed ledgers and a current one
    gate.close()
    try:
        assert admin(broker, "topics", "offload", "-s", "0", topic)[0] == 0
        code, out = admin(broker, "topics", "offload-status", "-w", topic)
        assert code == 1 and "Error in offload" in out and "s3 offload" in out, out
        status = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{local}/offload")[1]
        assert status["status"] == "ERROR" and "s3 offload" in status["lastError"]
        assert "offload failed" in broker.log_text()
        stale = first_context(broker, local)
        assert not stale["complete"] and not internal_stats(broker, local)["ledgers"][0]["offloaded"]
        client = make_client(broker.url)
        try:  # the local copy is whole and served
            consumer = client.subscribe(topic, "while-down", initial_position=pulsar.InitialPosition.Earliest)
            assert [consumer.receive(RECEIVE_MS).data() for _ in EXPECTED] == EXPECTED
        finally:
            client.close()
    finally:
        gate.open()
    assert offloaded_count(broker, local, 2), broker.log_text()[-3000:]  # the stored request: resumed whole
    code, out = admin(broker, "topics", "offload-status", "-w", topic)
    assert code == 0 and "success" in out, out
    assert [x["offloaded"] for x in internal_stats(broker, local)["ledgers"]] == [True, True, False]
    done = first_context(broker, local)
    assert done["complete"] and uuid_of(done) != uuid_of(stale)
    assert not [k for k in moto.keys(BUCKET) if k.startswith(uuid_of(stale))]


def offload_status(broker: BrokerProcess, local: str) -> dict[str, Any]:
    status, body = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{local}/offload")
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def read_errors_metric(broker: BrokerProcess, local: str) -> float:
    with urllib.request.urlopen(f"{broker.web_url}/metrics", timeout=15) as resp:
        text = resp.read().decode()
    labels = rf'\{{[^}}]*topic="persistent://public/default/{local}"[^}}]*\}}'
    pattern = rf"^brk_ledgeroffloader_read_offload_error\S*{labels} (\S+)$"
    found = re.findall(pattern, text, re.MULTILINE)
    return float(found[0]) if found else 0.0


def assert_admin_reads_fail(broker: BrokerProcess, local: str, ledger_id: int) -> None:
    """Admin reads of an entry only in the failing store: HTTP 500 with the reason, never a body."""
    base = f"/admin/v2/persistent/public/default/{local}"
    for path in (f"{base}/subscription/reads/position/1", f"{base}/examinemessage?initialPosition=earliest",
                 f"{base}/ledger/{ledger_id}/entry/0"):
        status, body = call(broker.web_url, "GET", path)
        assert status == 500 and "Failed to read message" in body["reason"], (path, status, body)


def test_endpoint_down_during_reads_delivers_nothing_then_resumes(broker: BrokerProcess, gate: TcpGate) -> None:
    local = f"reads-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    first = offloaded_and_released(broker, local)[0]["ledgerId"]
    client = make_client(broker.url)
    try:
        gate.close()
        try:
            consumer = client.subscribe(topic, "reads", initial_position=pulsar.InitialPosition.Earliest)
            with pytest.raises(pulsar.Timeout):
                consumer.receive(NOT_DELIVERED_MS)  # the first ledgers are only in the store: nothing, no junk
            assert broker.wait_until(lambda: "EndpointConnectionError" in offload_status(broker, local)
                                     ["offloadReadError"], WAIT_S), offload_status(broker, local)
            assert f"ledger {first}" in offload_status(broker, local)["offloadReadError"]
            assert broker.wait_until(lambda: read_errors_metric(broker, local) >= 2, WAIT_S)  # retried, counted
            stats = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{local}/stats")[1]
            assert stats["offloadReadErrors"] >= 2 and stats["offloadReadError"]
            assert "EndpointConnectionError" in internal_stats(broker, local)["ledgers"][0]["offloadReadError"]
            code, out = admin(broker, "topics", "offload-status", topic)
            assert code == 0 and "Reads from the offload store are failing" in out, out
            assert_admin_reads_fail(broker, local, first)
            assert "read failed, retrying in" in broker.log_text()
        finally:
            gate.open()
        received = [consumer.receive(RECEIVE_MS) for _ in EXPECTED]
        assert [m.data() for m in received] == EXPECTED  # the dispatcher retried by itself, in order
        for m in received:
            consumer.acknowledge(m)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(NOT_DELIVERED_MS)  # and nothing twice
        assert offload_status(broker, local)["offloadReadError"] == ""  # a good read cleared it
        assert "offloadReadError" not in internal_stats(broker, local)["ledgers"][0]
    finally:
        client.close()


def test_shared_redelivery_while_the_store_is_down_is_kept_then_delivered(broker: BrokerProcess,
                                                                          gate: TcpGate) -> None:
    local = f"redeliver-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    offloaded_and_released(broker, local)
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        assert [consumer.receive(RECEIVE_MS).data() for _ in EXPECTED] == EXPECTED  # none acknowledged
        failures = read_errors_metric(broker, local)
        gate.close()
        try:  # the redelivery's reads fail: the positions must stay queued for redelivery, not be dropped
            consumer.redeliver_unacknowledged_messages()
            assert broker.wait_until(lambda: read_errors_metric(broker, local) > failures, WAIT_S)
        finally:
            gate.open()
        assert [consumer.receive(RECEIVE_MS).data() for _ in EXPECTED] == EXPECTED
    finally:
        client.close()


def test_last_message_id_needing_the_failing_store_is_an_error(broker: BrokerProcess, gate: TcpGate) -> None:
    local = f"last-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{local}"
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for data in EXPECTED[:10]:  # two full ledgers
            producer.send(data)
        producer.close()
        path = f"/admin/v2/persistent/public/default/{local}"
        assert call(broker.web_url, "PUT", f"{path}/unload")[0] == 204  # reloaded: a new, empty current ledger
        assert admin(broker, "topics", "offload", "-s", "0", topic)[0] == 0
        assert admin(broker, "topics", "offload-status", "-w", topic)[0] == 0
        pattern = f"{local}: deleted the local copy of offloaded ledger"
        assert broker.wait_for(lambda log: log.count(pattern) >= 2, WAIT_S), broker.log_text()[-3000:]
        reader = client.create_reader(topic, pulsar.MessageId.latest)
        gate.close()
        try:  # the last entry's batch size is only in the store: an error, not a made-up id
            status, body = call(broker.web_url, "GET", f"{path}/lastMessageId")
            assert status == 500 and "Failed to get batch size for entry" in body["reason"], (status, body)
            with pytest.raises(pulsar.PulsarException):
                reader.has_message_available()
        finally:
            gate.open()
        status, body = call(broker.web_url, "GET", f"{path}/lastMessageId")
        assert status == 200 and body["entryId"] == 4, body
        assert not reader.has_message_available()
    finally:
        client.close()


def test_sigkill_mid_offload_is_retried_under_a_fresh_uuid(
    gate: TcpGate, moto: MotoServer, tmp_path: Path
) -> None:
    proc = start_broker(tmp_path / "data", gated_args(gate))
    try:
        local = f"kill-{uuid.uuid4().hex[:6]}"
        topic = f"persistent://public/default/{local}"
        produce(proc, topic)
        gate.stall()  # uploads hang: the offload is in the middle when the broker dies
        try:
            status, _ = call(proc.web_url, "PUT", f"/admin/v2/persistent/public/default/{local}/offload",
                             {"ledgerId": 2**62, "entryId": 0, "partitionIndex": -1})
            assert status == 204
            assert proc.wait_for_log(f"{local}: ", WAIT_S)
            stale = first_context(proc, local)  # step 1 is done before any upload starts
            assert not stale["complete"]
            proc.kill()
        finally:
            gate.open()
        proc.start()  # the topic is not touched: the pass finds the stored request and resumes all of it
        assert offloaded_count(proc, local, 2), proc.log_text()[-3000:]
        assert f"resuming the requested offload up to {2**62}:0" in proc.log_text()
        code, out = admin(proc, "topics", "offload-status", "-w", topic)
        assert code == 0 and "success" in out, out
        stats = internal_stats(proc, local)
        offloaded = [x["offloaded"] for x in stats["ledgers"]]
        assert offloaded[-1] is False and all(offloaded[:-1]) and len(offloaded) >= 3  # all sealed ones
        assert stats["properties"]["magnetar.offload.requested"] == ""  # done: nothing left to resume
        done = first_context(proc, local)
        assert done["complete"] and uuid_of(done) != uuid_of(stale)
        assert not [k for k in moto.keys(BUCKET) if k.startswith(uuid_of(stale))]
        assert_reads_all(proc, topic)
    finally:
        proc.kill()


def test_threshold_offloads_topics_not_loaded_after_a_restart(gate: TcpGate, tmp_path: Path) -> None:
    proc = start_broker(tmp_path / "data", gated_args(gate))
    try:
        local = f"cold-{uuid.uuid4().hex[:6]}"
        topic = f"persistent://public/cold/{local}"
        assert admin(proc, "namespaces", "create", "public/cold")[0] == 0
        produce(proc, topic)  # two sealed ledgers and a current one
        proc.kill()
        proc.start()  # the topic is not loaded, and nothing touches it
        assert admin(proc, "namespaces", "set-offload-threshold", "--size", "0", "public/cold")[0] == 0
        pattern = f"{local}: deleted the local copy of offloaded ledger"
        assert proc.wait_for(lambda log: log.count(pattern) >= 2, WAIT_S), proc.log_text()[-3000:]
        assert f"offload pass: loaded {topic}" in proc.log_text()
        status, stats = call(proc.web_url, "GET", f"/admin/v2/persistent/public/cold/{local}/internalStats")
        assert status == 200 and [x["offloaded"] for x in stats["ledgers"]][:2] == [True, True]
        assert all(x["offloadContext"]["bookkeeperDeleted"] for x in stats["ledgers"][:2])
        assert_reads_all(proc, topic)
    finally:
        proc.kill()


def test_missing_bucket_is_named_at_start_and_in_the_status(moto: MotoServer, tmp_path: Path) -> None:
    proc = start_broker(tmp_path / "data", s3_args(moto.endpoint, bucket="no-such-bucket"))
    try:
        assert proc.wait_for_log("the offload store is not usable", WAIT_S)
        assert "bucket 'no-such-bucket' does not exist" in proc.log_text()
        local = f"nobucket-{uuid.uuid4().hex[:6]}"
        topic = f"persistent://public/default/{local}"
        produce(proc, topic)
        assert admin(proc, "topics", "offload", "-s", "0", topic)[0] == 0
        code, out = admin(proc, "topics", "offload-status", "-w", topic)
        assert code == 1 and "no-such-bucket" in out, out
        assert_reads_all(proc, topic)  # nothing was lost or released: the local copy serves
    finally:
        proc.kill()


def test_deleted_object_and_corrupted_block_are_errors_never_data(broker: BrokerProcess, moto: MotoServer) -> None:
    gone, bad = f"gone-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"
    gone_ledgers, bad_ledgers = offloaded_and_released(broker, gone), offloaded_and_released(broker, bad)
    gone_key = f"{uuid_of(gone_ledgers[0]['offloadContext'])}-ledger-{gone_ledgers[0]['ledgerId']}"
    gone_data = moto.get_object(BUCKET, gone_key)
    moto.delete_object(BUCKET, gone_key)  # behind the broker's back
    bad_key = f"{uuid_of(bad_ledgers[0]['offloadContext'])}-ledger-{bad_ledgers[0]['ledgerId']}"
    good_data = moto.get_object(BUCKET, bad_key)
    data = bytearray(good_data)
    data[60] ^= 0xFF  # inside the first block's entries
    moto.put_object(BUCKET, bad_key, bytes(data))
    mark = len(broker.log_text())
    client = make_client(broker.url)
    try:
        consumers = []
        for local in (gone, bad):
            consumer = client.subscribe(f"persistent://public/default/{local}", "after-fault",
                                        initial_position=pulsar.InitialPosition.Earliest)
            with pytest.raises(pulsar.Timeout):
                consumer.receive(NOT_DELIVERED_MS)  # the first ledger is damaged: nothing, never junk
            consumers.append(consumer)
        assert broker.wait_for(lambda log: "object not found in bucket" in log[mark:], WAIT_S)
        assert broker.wait_for(lambda log: "failed its checksum and is not delivered" in log[mark:], WAIT_S)
        assert "not found" in offload_status(broker, gone)["offloadReadError"]
        assert "checksum mismatch" in offload_status(broker, bad)["offloadReadError"]
        moto.put_object(BUCKET, gone_key, gone_data)  # the operator restores the objects
        moto.put_object(BUCKET, bad_key, good_data)
        for consumer in consumers:  # delivery resumes by itself, everything in order
            assert [consumer.receive(RECEIVE_MS).data() for _ in EXPECTED] == EXPECTED
    finally:
        client.close()
