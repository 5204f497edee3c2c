"""The exactly-once sink's intent files: written whole, read back, pruned; only local or mounted paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.spark.exactly_once import IntentStore
from magnetar.spark.options import OptionError


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
