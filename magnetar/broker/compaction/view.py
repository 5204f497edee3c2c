"""One topic's compacted view: the compacted ledger, reading it, and the latest value per key.

:class:`CompactedTopic` is attached to every loaded persistent topic. It knows the current
:class:`~magnetar.broker.compaction.state.CompactedView` (restored from the ``__compaction`` cursor on
load, replaced by the compactor's switch), reads compacted-ledger entries by index, finds the first one at
or after a position (binary search: positions grow along the compacted ledger), and streams "what a
``read_compacted`` reader from the start sees": the compacted entries, then the topic's own entries after
the horizon. :meth:`CompactedTopic.latest_values` folds that stream into a dict (the in-process API).

A compacted ledger that a stream is still reading is deleted only when the stream ends; every deletion goes
through :meth:`CompactedTopic.delete_ledger` (directly, or two-phase: see ``deleter``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from magnetar import protocol as proto
from magnetar.broker.compaction.cursor import CompactedCursor
from magnetar.broker.compaction.deleter import CompactedLedgerDeleter, DirectDeleter
from magnetar.broker.compaction.entries import (
    CompactedEntry,
    CompactedEntryError,
    KeyedMessage,
    decode_compacted,
    highest_retained,
    messages_of,
)
from magnetar.broker.compaction.state import (
    COMPACTION_CURSOR,
    LEDGER_PROPERTY,
    NO_MESSAGE,
    NONE,
    PENDING_PROPERTY,
    READ_RUN_ENTRIES_MAX,
    RETIRED_PROPERTY,
    RUNNING_PROPERTY,
    CompactedView,
    view_from,
)
from magnetar.broker.compaction.txn import NoTransactions, TxnFilter, is_transactional
from magnetar.ledger.api import Cursor, InitialPosition, ManagedLedger, Position
from magnetar.storage.api import LedgerStore

log = logging.getLogger("magnetar.broker.compaction")



@dataclass(frozen=True, slots=True)
class ViewMessage:
    """The latest value of one key."""

    key: str
    position: Position
    batch_index: int  # -1 when the message was not batched
    value: bytes
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class CompactionRecord:
    """What the last compactions did (topic stats' ``compaction`` and the status endpoint)."""

    status: str = "NOT_RUN"  # NOT_RUN, RUNNING, SUCCESS, ERROR
    last_error: str = ""
    removed_event_count: int = 0
    succeed_timestamp_ms: int = 0
    failed_timestamp_ms: int = 0
    duration_ms: int = 0
    succeeded: int = 0
    failed: int = 0
    removed_total: int = 0
    compacted_entries: int = 0


class CompactedTopic:
    def __init__(
        self,
        name: str,
        ledger: ManagedLedger,
        store: LedgerStore,
        *,
        max_message_size: int,
        txn: TxnFilter | None = None,
        deleter: CompactedLedgerDeleter | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.store = store
        self.max_message_size = max_message_size
        self.txn: TxnFilter = txn or NoTransactions()
        self.deleter: CompactedLedgerDeleter = deleter or DirectDeleter(store)
        self.view: CompactedView | None = None
        self.record = CompactionRecord()
        self.needs_rerun = False  # a compaction was interrupted by a crash: run it again
        self._streams: dict[int, int] = {}  # compacted ledger id -> streams reading it
        self._deferred: set[int] = set()  # retired ledgers waiting for their streams to end

    # ---- the __compaction cursor ---------------------------------------------------------------------

    async def recover(self) -> None:
        """Restore the view, finish what a crash interrupted: delete a half-written or a retired ledger."""
        cursor = self.ledger.cursors.get(COMPACTION_CURSOR)
        if cursor is None:
            return
        props = cursor.properties
        self.view = view_from(props)
        current = self.view.ledger_id if self.view is not None else NONE
        pending = props.get(PENDING_PROPERTY, NONE)
        if pending not in (NONE, current):
            await cursor.set_properties({PENDING_PROPERTY: NONE})  # first: a two-phase owner check then says "unused"
            await self.delete_ledger(pending)
        if props.get(RUNNING_PROPERTY, 0):
            log.warning("%s: a compaction was interrupted; it runs again", self.name)
            self.needs_rerun = True
        retired = props.get(RETIRED_PROPERTY, NONE)
        if retired not in (NONE, current):
            await self.delete_ledger(retired)
        if self.view is not None and cursor.mark_delete_position < self.view.horizon:
            cursor.acknowledge_cumulative(self.view.horizon)  # the switch's last step, if a crash cut it

    async def cursor(self) -> Cursor:
        """The ``__compaction`` cursor, created at the earliest position so nothing is trimmed from now on."""
        existing = self.ledger.cursors.get(COMPACTION_CURSOR)
        if existing is not None:
            return existing
        return await self.ledger.open_cursor(COMPACTION_CURSOR, InitialPosition.EARLIEST)

    async def delete_ledger(self, ledger_id: int) -> None:
        """The one way a compacted ledger of this topic leaves storage."""
        if await self.deleter.delete(self.ledger.name, ledger_id):
            log.info("%s: compacted ledger %d deleted or queued for deletion", self.name, ledger_id)
        else:
            log.warning("%s: compacted ledger %d not queued for deletion; retried when the topic loads", self.name,
                        ledger_id)

    def retire(self, ledger_id: int) -> list[int]:
        """Ledgers to delete now for a ledger the switch replaced (none while a stream still reads it)."""
        if self._streams.get(ledger_id, 0) > 0:
            self._deferred.add(ledger_id)
            return []
        return [ledger_id]

    async def delete_all(self) -> None:
        """The topic is being deleted: its compacted ledgers go too (unnamed first, so a two-phase owner
        check finds them unused)."""
        cursor = self.ledger.cursors.get(COMPACTION_CURSOR)
        if cursor is None:
            return
        slots = (LEDGER_PROPERTY, PENDING_PROPERTY, RETIRED_PROPERTY)
        ledger_ids = {cursor.properties.get(key, NONE) for key in slots} - {NONE}
        await cursor.set_properties(dict.fromkeys(slots, NONE))
        self.view = None
        for ledger_id in sorted(ledger_ids):
            await self.delete_ledger(ledger_id)

    # ---- reading the compacted ledger ----------------------------------------------------------------

    async def read(self, view: CompactedView, first: int, last: int) -> list[CompactedEntry]:
        try:
            raws = await self.store.read(view.ledger_id, first, last)
            return [decode_compacted(raw, first + i) for i, raw in enumerate(raws)]
        except CompactedEntryError as exc:
            raise CompactedEntryError(f"{self.name}: compacted ledger {view.ledger_id}: {exc}") from exc

    async def find(self, view: CompactedView, position: Position) -> int:
        """Index of the first compacted entry at or after ``position`` (``view.entries`` if none)."""
        low, high = 0, view.entries
        while low < high:  # binary search: at most log2(entries) reads
            middle = (low + high) // 2
            if (await self.read(view, middle, middle))[0].position < position:
                low = middle + 1
            else:
                high = middle
        return low

    async def stream(self, until: Position) -> AsyncIterator[CompactedEntry]:
        """The compacted view, then the topic's entries after its horizon up to ``until``, in order."""
        view = self.view
        start = self.ledger.next_valid_position(self.ledger.first_position())
        if view is not None:
            self._streams[view.ledger_id] = self._streams.get(view.ledger_id, 0) + 1
            try:
                for first in range(0, view.entries, READ_RUN_ENTRIES_MAX):
                    last = min(first + READ_RUN_ENTRIES_MAX, view.entries) - 1
                    for entry in await self.read(view, first, last):
                        yield entry
            finally:
                await self._stream_done(view.ledger_id)
            start = max(start, self.ledger.next_valid_position(view.horizon))
        if until < start:
            return
        cursor = self.ledger.new_non_durable_cursor(start, "__compaction-stream")
        try:
            while entries := await cursor.read_entries(READ_RUN_ENTRIES_MAX):  # each pass moves forward
                for e in entries:
                    if e.position > until:
                        return
                    yield CompactedEntry(e.position, [], e.data)
        finally:
            await cursor.close()

    async def _stream_done(self, ledger_id: int) -> None:
        left = self._streams.get(ledger_id, 1) - 1
        if left > 0:
            self._streams[ledger_id] = left
            return
        self._streams.pop(ledger_id, None)
        if ledger_id in self._deferred:
            self._deferred.discard(ledger_id)
            await self.delete_ledger(ledger_id)

    async def visible(
        self, entry: CompactedEntry, *, bodies: bool = True
    ) -> tuple[proto.pb.MessageMetadata | None, list[KeyedMessage]]:
        """The messages of an entry a compacted view may hold: no markers, nothing aborted, no damage."""
        try:
            meta = proto.parse_entry_metadata(entry.data)
            if proto.markers.is_marker(meta):
                return None, []
            if is_transactional(meta) and await self.txn.is_aborted(entry.position, meta):
                return None, []
            return meta, messages_of(entry.data, meta, self.max_message_size, bodies=bodies)
        except proto.ProtocolError as exc:
            log.warning("%s: entry %s is left out of the compacted view: %s", self.name, entry.position, exc)
            return None, []

    async def latest_values(self) -> dict[str, ViewMessage]:
        """The latest value of every key: the compacted view, then the entries written after its horizon
        (tombstones delete, keyless messages are ignored). The in-process API for broker services."""
        until = self.txn.max_read_position(self.ledger.last_confirmed)
        table: dict[str, ViewMessage] = {}
        async for entry in self.stream(until):
            _, messages = await self.visible(entry)
            for m in messages:
                if m.key is None:
                    continue
                if m.null_value:
                    table.pop(m.key, None)
                else:
                    table.pop(m.key, None)  # re-insert: the dict keeps the order of last writes
                    table[m.key] = ViewMessage(m.key, entry.position, m.batch_index, m.body, m.properties)
        return table

    def reading_cursor(self, cursor: Cursor, start: Position | None, *, from_start: bool) -> Cursor:
        """The cursor a read_compacted subscription dispatches from: ``start`` for a reader, the start of
        the view for a new subscription at the earliest position, else where ``cursor`` is."""
        return CompactedCursor(self, cursor, NO_MESSAGE if from_start and start is None else start)

    # ---- GET_LAST_MESSAGE_ID for read_compacted consumers ---------------------------------------------

    def _last_stored(self) -> Position | None:
        for summary in reversed(self.ledger.ledgers()):
            if summary.entries > 0:
                return Position(summary.ledger_id, summary.entries - 1)
        return None

    async def last_message_id(self, live: Position, live_batch_index: int) -> tuple[Position, int]:
        """What Pulsar answers a compacted reader: the topic's last message while it lies after the horizon,
        else the compacted ledger's last retained message ((-1, -1) when the view is empty)."""
        view = self.view
        last = live if live.entry_id >= 0 else self._last_stored()
        if view is None or (last is not None and last > view.horizon):
            return live, live_batch_index
        if view.entries == 0:
            return NO_MESSAGE, -1
        entry = (await self.read(view, view.entries - 1, view.entries - 1))[0]
        meta = proto.parse_entry_metadata(entry.data)
        if not meta.HasField("num_messages_in_batch"):
            return entry.position, -1
        return entry.position, highest_retained(entry.words, max(meta.num_messages_in_batch, 1))

    def backlog_bytes(self) -> int:
        """Bytes written after the horizon (what the compaction threshold is compared with)."""
        horizon = self.view.horizon if self.view is not None else None
        total = 0
        for summary in self.ledger.ledgers():
            if horizon is None or summary.ledger_id > horizon.ledger_id:
                total += summary.size_bytes
            elif summary.ledger_id == horizon.ledger_id and summary.entries > 0:
                after = max(summary.entries - 1 - horizon.entry_id, 0)
                total += summary.size_bytes * after // summary.entries
        return total


def compacted_of(port: object) -> CompactedTopic | None:
    """A topic's compacted-view port (``PersistentTopic.compacted``) as the view it is, None if it has none."""
    return port if isinstance(port, CompactedTopic) else None
