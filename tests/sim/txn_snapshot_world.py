"""The transaction simulator (``txn_world``) with PIP-178 segmented snapshots and snapshot faults.

The topic's buffer keeps its snapshots as keys of a ``__transaction_buffer_snapshot`` topic on the same
crashable storage: a segment size of 1-3 ids (drawn from the seed) makes almost every snapshot span several
keys, so crashes (which drop unsynced writes, or keep a random prefix of them) cut snapshots between any two
keys; a seed's fault rate also fails snapshot writes at random (a partial snapshot with the broker alive), and
the snapshot topic is compacted after some snapshots (a compaction a crash may cut too).

Invariants, besides ``txn_world``'s (isolation, atomicity, no lost commit, pending acks), after every
recovery: the recovered aborted index holds no transaction that was not aborted, and every transaction whose
abort returned on the topic is aborted in the index while any of its entries is still stored.

Run it: ``.venv/bin/python -m tests.sim.txn_snapshot_world --seeds 1000 --ops 300`` (``--seed N --trace``).
"""

from __future__ import annotations

import asyncio
import sys

from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.compaction.compactor import compact
from magnetar.broker.transactions.api import TxnAction
from magnetar.broker.transactions.segmented_snapshot import ID_BYTES, KeyedTopic, SegmentedSnapshotStore
from magnetar.broker.transactions.snapshot import SnapshotError, SnapshotStore
from magnetar.broker.transactions.snapshot_topic import SystemKeyedTopic, snapshot_topic_of
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, Position
from tests.sim.txn_world import TOPIC, TxnSimulation
from tests.sim.txn_world import main as txn_main

MAX_SIZE = 5 * 1024 * 1024


class SnapshotHost:
    def __init__(self, ledger: ManagedLedger, compacted: CompactedTopic, clock: ManualClock) -> None:
        self.ledger, self.compacted, self.clock = ledger, compacted, clock

    async def append_internal(self, entry: bytes) -> Position:
        return await self.ledger.add_entry(entry)


class FaultyKeyed:
    """Fails a write at the seed's rate; compacts the snapshot topic after some snapshots."""

    def __init__(self, inner: KeyedTopic, sim: SnapshotSimulation, compacted: CompactedTopic) -> None:
        self._inner, self._sim, self._compacted = inner, sim, compacted

    async def write(self, key: str, value: bytes | None) -> None:
        if self._sim.rng.random() < self._sim.snapshot_fault_rate:
            self._sim.snapshot_faults += 1
            raise SnapshotError("injected snapshot write failure")
        await self._inner.write(key, value)
        self._sim.snapshot_writes += 1

    async def latest(self, prefix: str) -> dict[str, bytes]:
        return await self._inner.latest(prefix)

    async def written(self) -> None:
        if self._sim.rng.random() < 0.3:
            try:
                await compact(self._compacted, self._sim.clock)
                self._sim.snapshot_compactions += 1
            except Exception as exc:  # a compaction over failing or crashed storage: retried next time
                self._sim.note(f"snapshot-topic compaction failed: {exc}")


class SnapshotSimulation(TxnSimulation):
    def __init__(self, seed: int, ops: int) -> None:
        super().__init__(seed, ops)
        self.segment_size = self.rng.choice([1, 2, 3]) * ID_BYTES
        self.snapshot_fault_rate = self.rng.choice([0.0, 0.05, 0.2])
        self.snapshot_writes = 0
        self.snapshot_faults = 0
        self.snapshot_compactions = 0

    async def snapshot_store(self) -> SnapshotStore:
        ledger = await self.factory.open(snapshot_topic_of(str(TOPIC)).managed_ledger_name)
        compacted = CompactedTopic("snapshots", ledger, self.store, max_message_size=MAX_SIZE)
        await compacted.recover()
        keyed = FaultyKeyed(SystemKeyedTopic(SnapshotHost(ledger, compacted, self.clock), lambda _: None, 1 << 62),
                            self, compacted)

        async def topics(topic: str, create: bool) -> KeyedTopic:
            return keyed

        return SegmentedSnapshotStore(topics, segment_size=self.segment_size)

    async def check(self) -> None:
        await super().check()
        index = {txn for txn, _ in self.tt.buffer.aborted_index()}
        for txn in index:
            model = self.txns.get(txn)
            if model is None or model.decision is not TxnAction.ABORT:
                raise self.fail(f"{txn} is in the recovered aborted index but was {model and model.decision}")
        first = self.topic.ledger.first_position()
        for model in self.txns.values():
            if model.decision is not TxnAction.ABORT or not model.ended_on_topic:
                continue
            stored = [p for seq, p in self.receipted.items() if self.entry_txn[seq] == model.txn and p > first]
            if stored and not self.tt.buffer.is_aborted(model.txn):
                raise self.fail(f"aborted {model.txn} lost from the index; its entries {stored[:3]} are stored")


def run_snapshot_seed(seed: int, ops: int) -> SnapshotSimulation:
    sim = SnapshotSimulation(seed, ops)
    asyncio.run(sim.run())
    return sim


def main(argv: list[str] | None = None) -> int:
    return txn_main(argv, SnapshotSimulation, "tests.sim.txn_snapshot_world")


if __name__ == "__main__":
    sys.exit(main())
