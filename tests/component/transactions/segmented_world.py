"""A topic's transaction buffer with PIP-178 segmented snapshots, over real managed ledgers and a real
compacted snapshot topic on in-memory stores; restartable, with a write budget that cuts a snapshot short."""

from __future__ import annotations

from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.compaction.compactor import compact
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.broker.transactions.buffer import TransactionBuffer
from magnetar.broker.transactions.segmented_snapshot import ID_BYTES, KeyedTopic, SegmentedSnapshotStore
from magnetar.broker.transactions.snapshot import SnapshotError
from magnetar.broker.transactions.snapshot_topic import SystemKeyedTopic
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, Position, RetentionPolicy
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore
from tests.unit.broker.transactions.test_txn_buffer import message

TOPIC = "persistent://public/default/t"
TOPIC_ML = "public/default/persistent/t"
SNAP_ML = "public/default/persistent/__transaction_buffer_snapshot"
MAX_SIZE = 5 * 1024 * 1024
NEVER = 10**12


class SnapHost:
    """The snapshot topic as the broker would host it: appends and its compacted view."""

    def __init__(self, ledger: ManagedLedger, store: MemoryLedgerStore) -> None:
        self.clock = ManualClock()
        self.ledger = ledger
        self.compacted: CompactedTopic | None = CompactedTopic("snap", ledger, store, max_message_size=MAX_SIZE)

    async def append_internal(self, entry: bytes) -> Position:
        return await self.ledger.add_entry(entry)


class Budgeted:
    """A KeyedTopic that fails every write once ``budget`` writes are spent (None: no limit): a crash cut."""

    def __init__(self, inner: KeyedTopic, world: SegmentedWorld) -> None:
        self._inner = inner
        self._world = world

    async def write(self, key: str, value: bytes | None) -> None:
        if self._world.budget is not None:
            if self._world.budget <= 0:
                raise SnapshotError("cut")
            self._world.budget -= 1
        self._world.in_flight += 1
        self._world.max_in_flight = max(self._world.max_in_flight, self._world.in_flight)
        try:
            await self._inner.write(key, value)
        finally:
            self._world.in_flight -= 1

    async def latest(self, prefix: str) -> dict[str, bytes]:
        return await self._inner.latest(prefix)

    async def written(self) -> None:
        await self._inner.written()


class SegmentedWorld:
    def __init__(self, *, segment_ids: int = 5, entries_per_ledger: int = 50_000) -> None:
        self.store = MemoryLedgerStore()
        self.metadata = MemoryMetadataStore()
        self.config = ManagedLedgerConfig(max_entries_per_ledger=entries_per_ledger, min_ledger_rollover_time_ms=0)
        self.segment_size = segment_ids * ID_BYTES
        self.budget: int | None = None
        self.compactions_asked = 0
        self.in_flight = self.max_in_flight = 0  # keyed writes under way at once
        self.compact_after_bytes = NEVER
        self.truth_aborted: dict[TxnId, Position] = {}
        self.truth_committed: set[TxnId] = set()
        self.next_txn = 1

    async def start(self) -> TransactionBuffer:
        self.factory = LedgerFactory(self.store, self.metadata, config=self.config)
        self.ledger = await self.factory.open(TOPIC_ML)
        self.host = SnapHost(await self.factory.open(SNAP_ML), self.store)
        assert self.host.compacted is not None
        await self.host.compacted.recover()
        self.snapshots = SegmentedSnapshotStore(self._keyed, segment_size=self.segment_size)
        self.tb = TransactionBuffer(TOPIC, self.ledger, ManualClock(), self.ledger.add_entry, self.snapshots,
                                    snapshot_min_interval_ms=NEVER, snapshot_max_txn_count=NEVER)
        await self.tb.recover()
        return self.tb

    async def restart(self) -> TransactionBuffer:
        """Drop every in-memory state; the ledgers stay."""
        self.budget = None
        self.tb.state = self.tb.state.CLOSED  # no snapshot on the way down: a crash
        await self.factory.close()
        return await self.start()

    async def _keyed(self, topic: str, create: bool) -> KeyedTopic | None:
        def asked(_: CompactedTopic) -> None:
            self.compactions_asked += 1

        return Budgeted(SystemKeyedTopic(self.host, asked, self.compact_after_bytes), self)

    async def compact_snapshots(self) -> None:
        assert self.host.compacted is not None
        await compact(self.host.compacted, ManualClock())

    async def abort_some(self, count: int, *, with_message: bool = True) -> None:
        for _ in range(count):
            txn = TxnId(7, self.next_txn)
            self.next_txn += 1
            if with_message:
                position = await self.ledger.add_entry(message(b"x", txn))
                self.tb.send_finished(txn, position, tracked=self.tb.send_started(txn))
            await self.tb.end(txn, TxnAction.ABORT)
            self.truth_aborted[txn] = self.tb._aborted[txn]

    async def commit_one(self) -> None:
        txn = TxnId(8, self.next_txn)
        self.next_txn += 1
        position = await self.ledger.add_entry(message(b"c", txn))
        self.tb.send_finished(txn, position, tracked=self.tb.send_started(txn))
        await self.tb.end(txn, TxnAction.COMMIT)
        self.truth_committed.add(txn)

    async def trim(self) -> None:
        """Every entry consumed; closed ledgers trimmed (the aborted index loses its front)."""
        cursor = self.ledger.cursors.get("all") or await self.ledger.open_cursor("all")
        cursor.acknowledge_cumulative(self.ledger.last_confirmed)
        await cursor.flush()
        await self.ledger.trim(RetentionPolicy())

    def expected_aborted(self) -> set[TxnId]:
        first = self.ledger.first_position()
        return {t for t, marker in self.truth_aborted.items() if marker > first}

    async def snapshot_keys(self) -> dict[str, bytes]:
        assert self.host.compacted is not None
        return {k: m.value for k, m in (await self.host.compacted.latest_values()).items()}
