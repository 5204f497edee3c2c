"""A topic's transaction buffer (TB): which transactions are open on it, which were aborted, and how far
readers may go.

Transactional entries are appended to the topic at once, like any other; the buffer only keeps the
bookkeeping that isolation needs:

* ``max_read_position``: just before the first entry of the oldest transaction still open here (None, i.e.
  "up to the last confirmed entry", when none is). Dispatchers, readers and GET_LAST_MESSAGE_ID never go past
  it, so plain messages published after an open transaction's first message wait until it ends. While a
  transaction's first SEND is being written (its position not yet known) the limit is the last confirmed
  entry at the moment that SEND took its place, which is before it.
* the aborted index: aborted transaction → position of its abort marker, kept in marker order (what a
  snapshot stores and what PIP-178 will segment). Entries of aborted transactions are dropped at dispatch.
* ending: a commit or abort appends a marker entry (``marker_type`` TXN_COMMIT / TXN_ABORT, the txn id, an
  empty payload) and returns once it is durable. Ending is idempotent; the opposite action after an end is
  refused with ``InvalidTxnStatus``.

Recovery (:meth:`recover`) loads the latest snapshot and replays the topic from just after its
``maxReadPosition``. The buffer knows entries' metadata and the ledger, never consumers or sockets; the topic
supplies how to append (so a failed marker write pauses the topic's writes like a failed publish does).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from magnetar import protocol as proto
from magnetar.broker.errors import PersistenceError
from magnetar.broker.transactions.api import InvalidTxnStatus, TxnAction, TxnId
from magnetar.broker.transactions.snapshot import AbortedSnapshot, SnapshotError, SnapshotInfo, SnapshotStore
from magnetar.core.clock import Clock
from magnetar.ledger.api import EntryCorruptedError, ManagedLedger, ManagedLedgerError, Position
from magnetar.metadata.api import MetadataError

log = logging.getLogger("magnetar.broker.transactions.buffer")

SNAPSHOT_EVERY_ENTRIES = 10_000  # appended entries between snapshots: what a replay after a crash reads, at most
RECENTLY_COMMITTED_MAX = 10_000  # committed txn ids remembered to refuse a late SEND (aborted ones stay indexed)
REPLAY_BATCH_ENTRIES = 256

Append = Callable[[bytes], Awaitable[Position]]
SleepMs = Callable[[int], Awaitable[None]]


async def asyncio_sleep_ms(delay_ms: int) -> None:
    await asyncio.sleep(delay_ms / 1000)


def txn_of(metadata: proto.pb.MessageMetadata) -> TxnId | None:
    """The transaction an entry belongs to (from its stored metadata), or None for a plain entry."""
    if not metadata.HasField("txnid_most_bits") and not metadata.HasField("txnid_least_bits"):
        return None
    return TxnId(int(metadata.txnid_most_bits), int(metadata.txnid_least_bits))


def before(position: Position) -> Position:
    return Position(position.ledger_id, position.entry_id - 1)


class BufferState(enum.Enum):
    RECOVERING = "Initializing"
    READY = "Ready"
    CLOSED = "Close"


class TransactionBuffer:
    def __init__(
        self,
        topic: str,
        ledger: ManagedLedger,
        clock: Clock,
        append: Append,
        snapshots: SnapshotStore,
        *,
        on_change: Callable[[], None] = lambda: None,
        snapshot_min_interval_ms: int = 5000,
        snapshot_max_txn_count: int = 1000,
        sleep_ms: SleepMs = asyncio_sleep_ms,
    ) -> None:
        self.topic = topic
        self._sleep_ms = sleep_ms
        self._ledger = ledger
        self._clock = clock
        self._append = append
        self._snapshots = snapshots
        self._on_change = on_change
        self._snapshot_min_interval_ms = snapshot_min_interval_ms
        self._snapshot_max_txn_count = snapshot_max_txn_count  # aborts that bring the next snapshot forward
        self._aborts_since_snapshot = 0
        self._snapshot_waiting = False  # the scheduled snapshot is still sleeping (may be brought forward)
        self._snapshot_lock = asyncio.Lock()  # one snapshot write in flight per topic
        self.state = BufferState.RECOVERING
        self._ongoing: dict[TxnId, Position] = {}  # open txn -> its first entry here
        self._first_in_flight: dict[TxnId, tuple[Position, int]] = {}  # fence while the first SEND is written
        self._aborted: OrderedDict[TxnId, Position] = OrderedDict()  # txn -> abort marker, in marker order
        self._committed: OrderedDict[TxnId, None] = OrderedDict()
        self._ending: dict[TxnId, tuple[TxnAction, asyncio.Future[None]]] = {}
        self._max_read: Position | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self.last_snapshot_ms = 0
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self.committed_total = 0
        self.aborted_total = 0
        self.txn_entries_total = 0
        self.recovered_entries = 0
        self._appended_since_snapshot = 0
        self._unchanged_at: Position | None = None  # last confirmed when the stored state was last current

    # ---- isolation -------------------------------------------------------------------------------------

    def max_read_position(self) -> Position | None:
        """The last position readers may see; None means no limit (nothing open on this topic)."""
        return self._max_read

    def is_aborted(self, txn: TxnId) -> bool:
        return txn in self._aborted

    def ongoing(self) -> dict[TxnId, Position]:
        return dict(self._ongoing)

    def aborted_index(self) -> list[tuple[TxnId, Position]]:
        return list(self._aborted.items())

    def aborted_count(self) -> int:
        return len(self._aborted)

    def snapshot_info(self) -> SnapshotInfo | None:
        """The last snapshot written or loaded (scheme, segments, ids) as the store knows it."""
        return self._snapshots.info(self.topic)

    def _recompute(self) -> None:
        """Once per SEND and per end: a C-level min over the open transactions, not a list of new positions."""
        new = before(min(self._ongoing.values())) if self._ongoing else None
        if self._first_in_flight:
            fence = min(fence for fence, _ in self._first_in_flight.values())
            new = fence if new is None else min(new, fence)
        if new != self._max_read:
            self._max_read = new
            self._on_change()

    # ---- transactional SENDs ---------------------------------------------------------------------------

    def check_send(self, txn: TxnId) -> None:
        """Refuse a SEND for a transaction that already ended (or is ending) on this topic."""
        if txn in self._ending or txn in self._aborted or txn in self._committed:
            raise InvalidTxnStatus(f"Transaction {txn} has already ended on {self.topic}")

    def send_started(self, txn: TxnId) -> bool:
        """A SEND of ``txn`` took its place in the ledger (call after :meth:`check_send`). True when it may
        be the transaction's first entry here: then the fence holds until :meth:`send_finished` says where
        it landed (appends may be confirmed out of order, so every such SEND is waited for)."""
        if txn in self._ongoing and txn not in self._first_in_flight:
            return False
        fence, pending = self._first_in_flight.get(txn, (self._ledger.last_confirmed, 0))
        self._first_in_flight[txn] = (fence, pending + 1)
        self._recompute()
        return True

    def send_finished(self, txn: TxnId, position: Position | None, *, tracked: bool = True) -> None:
        """The SEND landed at ``position`` (None: it failed); ``tracked`` is what ``send_started`` said."""
        if position is not None:
            self.txn_entries_total += 1
        in_flight = self._first_in_flight.get(txn) if tracked else None
        if in_flight is None:  # not a possible first entry, or the transaction ended meanwhile
            return
        fence, pending = in_flight
        if position is not None and not self._has_ended(txn):
            first = self._ongoing.get(txn)
            self._ongoing[txn] = position if first is None else min(first, position)
        if pending <= 1:
            del self._first_in_flight[txn]
        else:
            self._first_in_flight[txn] = (fence, pending - 1)
        self._recompute()

    def _has_ended(self, txn: TxnId) -> bool:
        return txn in self._aborted or txn in self._committed

    # ---- ending ----------------------------------------------------------------------------------------

    async def end(self, txn: TxnId, action: TxnAction) -> None:
        """Append the marker and apply the outcome; returns once the marker is durable. Idempotent."""
        if action is TxnAction.ABORT and txn in self._aborted:
            return
        if action is TxnAction.COMMIT and txn in self._committed:
            return
        if self._has_ended(txn):
            raise InvalidTxnStatus(f"Transaction {txn} already ended the other way on {self.topic}")
        running = self._ending.get(txn)
        if running is not None:
            if running[0] is not action:
                raise InvalidTxnStatus(f"Transaction {txn} is already ending the other way on {self.topic}")
            await asyncio.shield(running[1])
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ending[txn] = (action, done)
        try:
            await self._write_end(txn, action)
        except BaseException as exc:
            done.set_exception(exc)
            done.exception()  # retrieved: concurrent callers re-raise it themselves
            raise
        else:
            done.set_result(None)
        finally:
            del self._ending[txn]

    async def _write_end(self, txn: TxnId, action: TxnAction) -> None:
        marker_type = proto.markers.TXN_COMMIT if action is TxnAction.COMMIT else proto.markers.TXN_ABORT
        entry = proto.markers.make_txn_marker_entry(
            marker_type, (txn.most, txn.least), publish_time_ms=self._clock.now_ms()
        )
        try:
            position = await self._append(entry)
        except (ManagedLedgerError, PersistenceError) as exc:
            what = action.name.lower()
            raise PersistenceError(f"Failed to write the {what} marker of {txn} on {self.topic}: {exc}") from exc
        self._apply_end(txn, action, position)
        self._snapshot_soon()

    def _apply_end(self, txn: TxnId, action: TxnAction, marker: Position) -> None:
        self._ongoing.pop(txn, None)
        self._first_in_flight.pop(txn, None)
        if action is TxnAction.ABORT:
            if txn not in self._aborted:
                out_of_order = bool(self._aborted) and marker < next(reversed(self._aborted.values()))
                self._aborted[txn] = marker
                if out_of_order:  # markers confirmed out of order: keep the index sorted by marker
                    self._aborted = OrderedDict(sorted(self._aborted.items(), key=lambda item: item[1]))
                self.aborted_total += 1
                self._aborts_since_snapshot += 1
        else:
            self._committed[txn] = None
            while len(self._committed) > RECENTLY_COMMITTED_MAX:
                self._committed.popitem(last=False)
            self.committed_total += 1
        self._recompute()

    # ---- snapshots and recovery ------------------------------------------------------------------------

    def snapshot(self) -> AbortedSnapshot:
        limit = self._max_read if self._max_read is not None else self._ledger.last_confirmed
        return AbortedSnapshot(limit, tuple(self._aborted.items()), self._clock.now_ms())

    def prune_trimmed(self) -> int:
        """Forget aborted transactions whose abort marker (hence every entry of theirs) was trimmed away."""
        first = self._ledger.first_position()
        pruned = 0
        while self._aborted:  # bounded by the index; the index is in marker order, so stop at the first kept
            txn, marker = next(iter(self._aborted.items()))
            if marker > first:
                break
            del self._aborted[txn]
            pruned += 1
        return pruned

    async def take_snapshot(self) -> None:
        async with self._snapshot_lock:
            self.prune_trimmed()
            self._appended_since_snapshot = 0
            self._aborts_since_snapshot = 0
            try:
                at = self._ledger.last_confirmed
                await self._snapshots.save(self.topic, self.snapshot())
                self.last_snapshot_ms = self._clock.now_ms()
                self._unchanged_at = at
            except (MetadataError, SnapshotError) as exc:
                log.warning("%s: transaction-buffer snapshot not written: %s", self.topic, exc)

    def note_appended(self) -> None:
        """An entry was stored; after many, a snapshot moves the point a recovery replays from."""
        self._appended_since_snapshot += 1
        if self._appended_since_snapshot >= SNAPSHOT_EVERY_ENTRIES:
            self._snapshot_soon()

    def _snapshot_soon(self) -> None:
        """Every ``snapshot_min_interval_ms``, or at once after ``snapshot_max_txn_count`` aborts."""
        if self.state is not BufferState.READY:
            return
        due_now = self._aborts_since_snapshot >= self._snapshot_max_txn_count
        if self._snapshot_task is not None:
            if not (due_now and self._snapshot_waiting):
                return
            self._snapshot_task.cancel()  # still sleeping: bring it forward
        since_ms = max(self.last_snapshot_ms, self.recover_end_ms)  # a recovery without a snapshot counts
        delay_ms = 0 if due_now else max(0, since_ms + self._snapshot_min_interval_ms - self._clock.now_ms())

        async def later() -> None:
            me = asyncio.current_task()
            self._snapshot_waiting = True
            try:
                await self._sleep_ms(delay_ms)
            finally:
                if self._snapshot_task is me:
                    self._snapshot_task = None
                    self._snapshot_waiting = False
            await self.take_snapshot()

        self._snapshot_task = asyncio.get_running_loop().create_task(later())

    async def recover(self) -> None:
        """Load the snapshot, then replay the topic after its maxReadPosition. Idempotent per load."""
        self.recover_start_ms = self._clock.now_ms()
        try:
            snapshot = await self._snapshots.load(self.topic)
        except (MetadataError, SnapshotError, ValueError) as exc:
            log.warning("%s: transaction-buffer snapshot unusable (%s); replaying the whole topic", self.topic, exc)
            snapshot = None
        start = self._ledger.first_position()
        if snapshot is not None:
            self._aborted = OrderedDict(snapshot.aborted)
            start = max(start, snapshot.max_read_position)
        await self._replay(self._ledger.next_valid_position(start))
        self.state = BufferState.READY
        self.recover_end_ms = self._clock.now_ms()
        self._recompute()
        if self.recovered_entries:  # nothing replayed: a snapshot would move nothing (a new topic has none)
            await self.take_snapshot()
        else:
            self._unchanged_at = self._ledger.last_confirmed  # the next recovery would find the same
        level = logging.INFO if snapshot is not None or self.recovered_entries else logging.DEBUG
        log.log(level, "%s: transaction buffer ready (%d entries replayed, %d open, %d aborted)",
                self.topic, self.recovered_entries, len(self._ongoing), len(self._aborted))

    async def _replay(self, start: Position) -> None:
        cursor = self._ledger.new_non_durable_cursor(start, "__txn_buffer_recovery")
        last = self._ledger.last_confirmed
        try:
            while True:  # bounded: every round consumes entries up to the (fixed) last confirmed one
                try:
                    entries = await cursor.read_entries(REPLAY_BATCH_ENTRIES, max_position=last)
                except EntryCorruptedError as exc:
                    log.error("%s: entry %s unreadable during transaction-buffer recovery; skipped",
                              self.topic, exc.position)
                    cursor.seek(self._ledger.next_valid_position(exc.position))
                    continue
                if not entries:
                    return
                for entry in entries:
                    self._replay_entry(entry.position, proto.parse_entry_metadata(entry.data))
        finally:
            await cursor.close()

    def _replay_entry(self, position: Position, metadata: proto.pb.MessageMetadata) -> None:
        self.recovered_entries += 1
        txn = txn_of(metadata)
        if txn is None:
            return
        if not metadata.HasField("marker_type"):
            if txn not in self._ongoing and not self._has_ended(txn):
                self._ongoing[txn] = position
            return
        if metadata.marker_type == proto.markers.TXN_COMMIT:
            self._apply_end(txn, TxnAction.COMMIT, position)
        elif metadata.marker_type == proto.markers.TXN_ABORT:
            self._apply_end(txn, TxnAction.ABORT, position)

    async def close(self) -> None:
        if self.state is BufferState.CLOSED:
            return
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
            self._snapshot_task = None
        # nothing stored since the last snapshot (or a recovery that replayed nothing): the next recovery finds
        # this state without one, so a topic that never saw an entry closes without a metadata write
        if self.state is BufferState.READY and self._ledger.last_confirmed != self._unchanged_at:
            await self.take_snapshot()
        self.state = BufferState.CLOSED
