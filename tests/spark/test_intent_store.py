"""The exactly-once sink's intent files (written whole, read back, pruned; only local or mounted paths) and
what it makes of a repeated commit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from magnetar.client import Client
from magnetar.client.errors import TransactionNotFound
from magnetar.spark import runtime
from magnetar.spark.exactly_once import ExactlyOnceError, IntentStore, _commit_one
from magnetar.spark.options import OptionError
from tests.integration.broker_process import BrokerProcess


def test_intents_round_trip_and_are_pruned(tmp_path: Path) -> None:
    store = IntentStore(f"file://{tmp_path}", "sink-a")
    assert store.load(3) is None
    store.save(3, [(0, 7, 1_000), (1, 2, 2_000)], done=False)
    assert store.load(3) == ([(0, 7, 1_000), (1, 2, 2_000)], False)
    store.save(3, [(0, 7, 1_000), (1, 2, 2_000)], done=True)
    assert store.load(3) == ([(0, 7, 1_000), (1, 2, 2_000)], True)
    assert not list(store.root.glob("*.tmp"))  # the temp file was renamed over the intent
    assert IntentStore(str(tmp_path), "sink-b").load(3) is None  # another sinkId sees nothing
    for batch in range(4, 30):
        store.save(batch, [], done=True)
    store.prune(29)
    assert sorted(int(p.stem.split("-")[1]) for p in store.root.glob("intent-*.json")) == list(range(10, 30))


def test_remote_checkpoint_locations_are_refused() -> None:
    with pytest.raises(OptionError, match="local or mounted path"):
        IntentStore("s3a://bucket/cp", "default")


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
