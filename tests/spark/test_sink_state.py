"""The exactly-once sink's files (intents and open-transaction records: written whole, read back, pruned; only
local or mounted paths), which recorded transactions are orphans, what a task's reap does to an orphan that
freezes a topic, and what the sink makes of a repeated commit."""

from __future__ import annotations

import time
from pathlib import Path

import pulsar
import pytest

from magnetar.client import Client
from magnetar.client.errors import TransactionNotFound
from magnetar.spark import runtime
from magnetar.spark.exactly_once import ExactlyOnceError, _commit_one, orphans, write_in_txn
from magnetar.spark.options import OptionError, parse_sink
from magnetar.spark.sink_state import OpenRecord, SinkFiles, SinkStateError
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import topic_name


def test_intents_round_trip_and_are_pruned(tmp_path: Path) -> None:
    files = SinkFiles(f"file://{tmp_path}", "sink-a")
    assert files.load_intent(3) is None
    files.save_intent(3, [(0, 7, 1_000), (1, 2, 2_000)], done=False)
    assert files.load_intent(3) == ([(0, 7, 1_000), (1, 2, 2_000)], False)
    files.save_intent(3, [(0, 7, 1_000), (1, 2, 2_000)], done=True)
    assert files.load_intent(3) == ([(0, 7, 1_000), (1, 2, 2_000)], True)
    assert not list(files.root.glob("*.tmp"))  # the temp file was renamed over the intent
    assert SinkFiles(str(tmp_path), "sink-b").load_intent(3) is None  # another sinkId sees nothing
    for batch in range(4, 30):
        files.save_intent(batch, [(0, batch, 5)], done=True)
    files.prune_intents(29)
    assert sorted(int(p.stem.split("-")[1]) for p in files.root.glob("intent-*.json")) == list(range(10, 30))
    assert files.named() == {(0, b) for b in range(10, 30)}


def test_open_records_round_trip_and_need_the_drivers_directory(tmp_path: Path) -> None:
    files = SinkFiles(str(tmp_path / "cp"), "default")
    record = OpenRecord((0, 9), 123, "w1", 4, 1, 0)
    with pytest.raises(SinkStateError, match="every worker mounts"):
        files.record_open(record)  # an executor that does not see the driver's checkpoint
    files.prepare()
    files.record_open(record)
    files.record_open(OpenRecord((1, 2), 456, "w2", None, None, None))
    assert files.open_records() == [record, OpenRecord((1, 2), 456, "w2", None, None, None)]
    files.forget((0, 9))
    assert [r.txn for r in files.open_records()] == [(1, 2)]
    (files.open_dir / "3-4.json").write_text("{torn")
    with pytest.raises(SinkStateError, match="unreadable"):
        files.open_records()


def test_orphans_are_unnamed_and_at_a_task_from_other_writers() -> None:
    records = [OpenRecord((0, 1), 0, "old", 3, 0, 0), OpenRecord((0, 2), 0, "old", 3, 1, 0),
               OpenRecord((0, 3), 0, "mine", 4, 0, 0), OpenRecord((0, 4), 0, "mine", 4, 0, 1)]
    named = {(0, 2)}  # an intent decided its commit: never aborted
    assert [r.txn for r in orphans(records, named, writer="mine")] == [(0, 1)]
    assert [r.txn for r in orphans(records, named, writer=None)] == [(0, 1), (0, 3), (0, 4)]


def test_remote_checkpoint_locations_are_refused() -> None:
    with pytest.raises(OptionError, match="local or mounted path"):
        SinkFiles("s3a://bucket/cp", "default")


def test_a_task_aborts_an_orphan_that_froze_the_topic_at_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """A killed writer's recorded transaction holds the topic: a committed message after it stays invisible,
    until the next writer's task reaps it (no waiting for its ten-minute timeout)."""
    topic = topic_name("reap")
    opts = parse_sink({"service.url": broker.url, "topic": topic, "checkpointLocation": str(tmp_path),
                       "deliveryGuarantee": "exactly_once"})
    files = SinkFiles(str(tmp_path), "default")
    files.prepare()
    client = runtime.client_for(broker.url)
    partitioned = runtime.run(client.create_producer(topic, batching=False))  # auto-created with partitions
    producer = partitioned.producers[0]
    orphan = runtime.run(client.new_transaction(600_000))
    files.record_open(OpenRecord(orphan.txn_id, int(time.time() * 1000) + 600_000, "killed-run", 0, 0, 0))
    runtime.run(orphan.register_partition(producer.topic))
    runtime.run(producer.send(b"never", txn=orphan))
    runtime.run(producer.send(b"visible"))
    assert _read_now(broker.url, producer.topic) == []  # frozen behind the orphan
    write_in_txn(opts, iter([]), "next-run")  # an empty task: reaps, opens nothing
    assert _read_now(broker.url, producer.topic) == ["visible"]
    assert files.open_records() == []
    runtime.run(partitioned.close())


def _read_now(url: str, topic: str) -> list[str]:
    client = pulsar.Client(url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = []
        for _ in range(100):  # bounded
            if not reader.has_message_available():
                break
            got.append(reader.read_next(5_000).data().decode())
        return got
    finally:
        client.close()


def test_repeated_commit_of_a_recorded_txn(broker: BrokerProcess) -> None:
    """The coordinator answers a second COMMIT of a committed transaction with TransactionNotFound: before the
    deadline the task reported, the sink takes it as its own earlier commit; after it, it refuses to guess."""
    client = runtime.client_for(broker.url)
    txn = runtime.run(client.new_transaction(60_000))
    runtime.run(txn.commit())
    ref_live = (txn.txn_id[0], txn.txn_id[1], int(time.time() * 1000) + 60_000)
    with pytest.raises(TransactionNotFound):
        runtime.run(_commit_one_raw(client, ref_live))
    runtime.run(_commit_one(client, ref_live, 60_000, 7))  # success: an earlier attempt committed it
    ref_past = (txn.txn_id[0], txn.txn_id[1], int(time.time() * 1000) - 1)
    with pytest.raises(ExactlyOnceError, match="cannot say which"):
        runtime.run(_commit_one(client, ref_past, 60_000, 7))
    with pytest.raises(ExactlyOnceError, match="before the job ended"):
        runtime.run(_commit_one(client, ref_live, 60_000, None))


async def _commit_one_raw(client: Client, ref: tuple[int, int, int]) -> None:
    await (await client.transaction_of((ref[0], ref[1]))).commit()
