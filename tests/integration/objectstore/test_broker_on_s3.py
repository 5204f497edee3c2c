"""The real ``magnetar standalone`` with ``ledgerStoreUrl=s3://...`` on a moto server, driven by the official client:
publish and consume, SIGKILL mid-flush, the endpoint answering 503 or refusing conditional writes, topic
deletion removing the objects."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.durability.stored import RECEIVE_MS, assert_stored_once_in_order, read_all
from tests.integration.durability.test_disk_faults import Publisher
from tests.integration.objectstore.conftest import BUCKET, chunk_keys, s3_broker
from tests.s3_proxy import S3FaultProxy
from tests.s3_server import MotoServer

pytestmark = pytest.mark.integration

WAIT_S = 60.0
KILL_AFTER_RECEIPTS = (400, 900)


def new_topic() -> str:
    return f"persistent://public/default/s3-{uuid.uuid4().hex[:8]}"


def test_publish_consume_and_restart_on_s3(tmp_path: Path, moto: MotoServer, bucket: str, prefix: str) -> None:
    broker = s3_broker(tmp_path / "data", moto.endpoint, prefix).start()
    topic = new_topic()
    try:
        client = make_client(broker.url)
        try:
            consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
            plain = client.create_producer(topic, batching_enabled=False)
            for i in range(20):
                plain.send(f"p{i}".encode())
            batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                             batching_max_publish_delay_ms=5)
            for i in range(200):
                batched.send_async(f"q{i}".encode(), None)
            batched.flush()
            got = [consumer.receive(RECEIVE_MS).data().decode() for _ in range(220)]
            assert got == [f"p{i}" for i in range(20)] + [f"q{i}" for i in range(200)]
        finally:
            client.close()
        assert chunk_keys(moto, prefix), "no chunk objects in the bucket"
        broker.restart()
        assert read_all(broker, topic) == [f"p{i}" for i in range(20)] + [f"q{i}" for i in range(200)]
    finally:
        broker.kill()


def _publish_until_stopped(producer: pulsar.Producer, prefix: str, receipted: set[str], stop: threading.Event,
                           progress: threading.Condition) -> None:
    def callback(value: str) -> object:
        def done(result: pulsar.Result, _msg_id: object) -> None:
            if result == pulsar.Result.Ok:
                with progress:
                    receipted.add(value)
                    progress.notify_all()
        return done

    for i in range(1_000_000):  # bounded; ends at the kill
        if stop.is_set():
            return
        try:
            producer.send_async(f"{prefix}{i}".encode(), callback(f"{prefix}{i}"))
        except Exception:  # the broker is gone: never receipted
            return


def test_sigkill_mid_flush_keeps_every_receipted_message_once_in_order(
    tmp_path: Path, moto: MotoServer, bucket: str, prefix: str
) -> None:
    """A 20 ms flush window keeps chunks of many appends in flight when the broker is killed."""
    broker = s3_broker(tmp_path / "data", moto.endpoint, prefix, "--set", "ledgerStoreFlushMaxDelayMillis=20",
                       "--set", "managedLedgerMaxEntriesPerLedger=300")
    topic = new_topic()
    receipted: set[str] = set()
    try:
        for index, kill_after in enumerate(KILL_AFTER_RECEIPTS):
            broker.start()
            client = make_client(broker.url)
            stop, progress = threading.Event(), threading.Condition()
            round_receipts: set[str] = set()
            producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True,
                                              max_pending_messages=500, send_timeout_millis=0)
            thread = threading.Thread(target=_publish_until_stopped,
                                      args=(producer, "abcdefgh"[index], round_receipts, stop, progress), daemon=True)
            thread.start()
            with progress:
                reached = progress.wait_for(lambda n=kill_after, got=round_receipts: len(got) >= n, WAIT_S)
            broker.kill()  # SIGKILL with chunks being PUT
            stop.set()
            with progress:
                receipted |= round_receipts
            assert reached, f"round {index}: only {len(round_receipts)} receipts"
            with contextlib.suppress(pulsar.PulsarException):  # its broker is dead
                client.close()
            thread.join(timeout=30)
        broker.start()
        stored = read_all(broker, topic)
        assert_stored_once_in_order(stored, receipted)
    finally:
        broker.kill()


def test_503s_fail_or_hold_sends_and_never_receipt_without_an_object(
    tmp_path: Path, proxy: S3FaultProxy, moto: MotoServer, prefix: str
) -> None:
    broker = s3_broker(tmp_path / "data", proxy.endpoint, prefix).start()
    topic = new_topic()
    try:
        client = make_client(broker.url)
        try:
            client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
            publisher = Publisher(client, topic)
            publisher.send([f"a{i}" for i in range(10)])
            assert publisher.wait_receipts(10)
            proxy.faults.add("error_503", "PUT", count=None)
            publisher.send([f"m{i}" for i in range(30)])
            assert broker.wait_for_log("failures since writes last succeeded", WAIT_S), broker.log_text()[-3000:]
            assert len(publisher.receipted) == 10, "a send was receipted while every PUT failed"
            cleared_at = time.monotonic()
            proxy.faults.clear()  # the client's resends get through
            assert publisher.wait_receipts(40), f"{len(publisher.receipted)} of 40 receipted after the 503s stopped"
            assert time.monotonic() >= cleared_at
        finally:
            client.close()
        broker.kill()
        broker.start()
        stored = read_all(broker, topic)
        assert_stored_once_in_order(stored, publisher.receipted)
        assert stored == [f"a{i}" for i in range(10)] + [f"m{i}" for i in range(30)]
    finally:
        broker.kill()


def test_a_store_ignoring_conditional_writes_is_refused_at_startup(
    tmp_path: Path, proxy: S3FaultProxy, prefix: str
) -> None:
    proxy.faults.add("strip_conditional", "PUT", count=None)
    broker = s3_broker(tmp_path / "data", proxy.endpoint, prefix)
    with pytest.raises(RuntimeError, match="exited during start"):
        broker.start()
    assert broker.proc is not None and broker.proc.wait(timeout=30) != 0
    assert "does not honour conditional writes" in broker.log_text(), broker.log_text()[-2000:]
    assert "ledgerStoreUrl=s3://" in broker.log_text()


def test_a_missing_bucket_is_named_at_startup(tmp_path: Path, moto: MotoServer, bucket: str) -> None:
    broker = BrokerProcess(tmp_path / "data", extra_args=(
        "--set", "ledgerStoreUrl=s3://no-such-bucket/x", "--set", f"ledgerStoreServiceEndpoint={moto.endpoint}",
        "--set", "ledgerStoreRegion=us-east-1"), env={"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t"})
    with pytest.raises(RuntimeError, match="exited during start"):
        broker.start()
    assert "no-such-bucket" in broker.log_text()


def test_a_second_broker_on_the_same_data_directory_is_refused(
    tmp_path: Path, moto: MotoServer, bucket: str, prefix: str
) -> None:
    """The ledgers are in the bucket, yet the data directory still holds the broker's own state (its SQLite
    metadata here): a second process on it is refused, naming the directory, as with the embedded store."""
    first = s3_broker(tmp_path / "data", moto.endpoint, prefix).start()
    try:
        second = s3_broker(tmp_path / "data", moto.endpoint, prefix)
        with pytest.raises(RuntimeError, match="exited during start"):
            second.start()
        assert "is in use by another magnetar process" in second.log_text(), second.log_text()
    finally:
        first.kill()
    again = s3_broker(tmp_path / "data", moto.endpoint, prefix).start()  # the lock went with the process
    again.stop()


def test_deleting_a_topic_deletes_its_objects(tmp_path: Path, moto: MotoServer, bucket: str, prefix: str) -> None:
    broker = s3_broker(tmp_path / "data", moto.endpoint, prefix, "--set", "managedLedgerMaxEntriesPerLedger=5").start()
    name = f"gone-{uuid.uuid4().hex[:8]}"
    try:
        client = make_client(broker.url)
        try:
            producer = client.create_producer(f"persistent://public/default/{name}", batching_enabled=False)
            for i in range(12):
                producer.send(f"x{i}".encode())
            producer.close()
        finally:
            client.close()
        status, stats = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{name}/internalStats")
        assert status == 200, stats
        ledgers = {f"/ledgers/{x['ledgerId']:020d}/" for x in stats["ledgers"]}
        assert len(ledgers) >= 3

        def left() -> list[str]:
            return [k for k in data_keys(moto, prefix) if any(lid in k for lid in ledgers)]

        assert len(left()) >= 12 // 5
        status, body = call(broker.web_url, "DELETE", f"/admin/v2/persistent/public/default/{name}")
        assert status in (200, 204), body
        assert broker.wait_until(lambda: not left(), WAIT_S), left()
    finally:
        broker.kill()


def data_keys(moto: MotoServer, prefix: str) -> list[str]:
    """Chunk keys holding data (a deleted ledger keeps its seal as a tombstone), told apart by the kind byte."""
    client = moto.client()
    keys = []
    for key in chunk_keys(moto, prefix):
        try:
            head = client.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-5")["Body"].read()
        except client.exceptions.NoSuchKey:
            continue  # deleted since the listing
        if head[5] == 0:
            keys.append(key)
    return keys
