"""The cursor a ``read_compacted`` subscription dispatches from: the compacted view, then the live topic.

It wraps the subscription's own cursor (acks, persistence and backlog stay there: compacted entries keep
their original positions) and answers reads from the compacted ledger while its read position is at or
before the horizon, then seeks the wrapped cursor past the horizon and reads the topic. The view is looked
up on every read, so a compaction that finishes meanwhile is picked up at the same position.

Positions in ledgers retention already trimmed exist only in the compacted view; the wrapped cursor cannot
hold them, so this cursor keeps its own position there (``_next``) and trusts the wrapped cursor's acks only
for positions the topic still stores. A compacted batch's dropped indexes are hidden from clients by the
ack set of its MESSAGE (a cleared bit = "already acknowledged"), combined with the subscription's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from magnetar.broker.compaction.entries import CompactedEntry
from magnetar.broker.compaction.state import NO_MESSAGE, READ_RUN_ENTRIES_MAX, CompactedView
from magnetar.ledger.api import Cursor, Entry, ManagedLedger, Position
from magnetar.storage.api import LedgerNotFound


class CompactedSource(Protocol):
    """What the cursor reads of its topic's compacted view (``CompactedTopic`` has it)."""

    @property
    def ledger(self) -> ManagedLedger: ...

    @property
    def view(self) -> CompactedView | None: ...

    async def read(self, view: CompactedView, first: int, last: int) -> list[CompactedEntry]: ...

    async def find(self, view: CompactedView, position: Position) -> int: ...

ACK_SETS_REMEMBERED_MAX = 10_000  # compacted batches whose retained indexes are kept for dispatch


def _next_of(position: Position) -> Position:
    return Position(position.ledger_id, position.entry_id + 1)


def _and_words(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x & y for x, y in zip(a, b, strict=False)]


class CompactedCursor:
    """Implements :class:`magnetar.ledger.api.Cursor` over ``inner`` for a read_compacted subscription."""

    def __init__(self, topic: CompactedSource, inner: Cursor, begin: Position | None) -> None:
        self._topic = topic
        self._inner = inner
        ledger = topic.ledger
        if begin is None:
            begin = _next_of(inner.mark_delete_position)
        elif begin <= ledger.next_valid_position(ledger.first_position()):
            begin = NO_MESSAGE  # from the first stored entry: the compacted view from its start
        self._begin = begin
        self._next: Position | None = begin
        self._hint: tuple[int, Position, int] | None = None  # (compacted ledger, _next, its index)
        self._ack_sets: dict[Position, list[int]] = {}

    # ---- reads ---------------------------------------------------------------------------------------

    async def read_entries(
        self, max_entries: int, max_bytes: int | None = None, *, max_position: Position | None = None
    ) -> list[Entry]:
        """The view's entries are all at or before the horizon, which never passed ``max_position``."""
        view = self._topic.view
        if view is None:
            self._next = None
        elif self._next is None and self._inner.read_position <= view.horizon:
            self._next = self._inner.read_position  # a compaction moved the horizon past us
        if view is not None and self._next is not None and max_entries > 0:
            try:
                entries = await self._read_view(view, max_entries, max_bytes)
            except LedgerNotFound:
                self._hint = None  # a switch retired the ledger under us: the next read uses the new view
                return []
            if entries:
                return entries
        return await self._inner.read_entries(max_entries, max_bytes, max_position=max_position)

    async def _read_view(self, view: CompactedView, max_entries: int, max_bytes: int | None) -> list[Entry]:
        assert self._next is not None
        if self._next > view.horizon:
            self._leave(view)
            return []
        index = await self._index(view, self._next)
        out: list[Entry] = []
        size_bytes = 0
        examined: Position | None = None
        while index < view.entries and len(out) < max_entries:  # each pass reads at least one entry
            last = min(view.entries, index + min(max_entries - len(out), READ_RUN_ENTRIES_MAX)) - 1
            for entry in await self._topic.read(view, index, last):
                index += 1
                examined = entry.position
                if self._acked(entry.position):
                    continue
                out.append(Entry(entry.position, entry.data))
                if entry.words:
                    self._remember(entry.position, entry.words)
                size_bytes += len(entry.data)
                if len(out) >= max_entries or (max_bytes is not None and size_bytes >= max_bytes):
                    break
            if max_bytes is not None and size_bytes >= max_bytes:
                break
        if index >= view.entries:
            self._leave(view)
        elif examined is not None:
            self._next = _next_of(examined)
            self._hint = (view.ledger_id, self._next, index)
        return out

    async def _index(self, view: CompactedView, position: Position) -> int:
        hint = self._hint
        if hint is not None and hint[0] == view.ledger_id and hint[1] == position:
            return hint[2]
        return await self._topic.find(view, position)

    def _acked(self, position: Position) -> bool:
        return position > self._topic.ledger.first_position() and self._inner.is_acknowledged(position)

    def _leave(self, view: CompactedView) -> None:
        """The compacted view is read: continue with the topic's entries after the horizon."""
        self._next = None
        self._hint = None
        self._inner.seek(self._topic.ledger.next_valid_position(view.horizon))

    def _remember(self, position: Position, words: list[int]) -> None:
        self._ack_sets[position] = words
        if len(self._ack_sets) > ACK_SETS_REMEMBERED_MAX:
            for stale in list(self._ack_sets)[: ACK_SETS_REMEMBERED_MAX // 2]:
                del self._ack_sets[stale]

    def batch_ack_set(self, position: Position) -> list[int] | None:
        own = self._inner.batch_ack_set(position)
        retained = self._ack_sets.get(position)
        if retained is None:
            return own
        return retained if own is None else _and_words(retained, own)

    # ---- positions -----------------------------------------------------------------------------------

    @property
    def read_position(self) -> Position:
        return self._next if self._next is not None else self._inner.read_position

    def rewind(self) -> None:
        self._inner.rewind()
        mark_delete = self._inner.mark_delete_position
        self._next = self._begin if mark_delete <= self._topic.ledger.first_position() else _next_of(mark_delete)

    def seek(self, position: Position) -> None:
        self._inner.seek(position)
        self._next = position

    async def reset(self, position: Position) -> None:
        await self._inner.reset(position)
        self._next = position

    # ---- everything else is the subscription's own cursor --------------------------------------------

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def durable(self) -> bool:
        return self._inner.durable

    @property
    def mark_delete_position(self) -> Position:
        return self._inner.mark_delete_position

    @property
    def properties(self) -> Mapping[str, int]:
        return self._inner.properties

    def acknowledge(self, positions: Iterable[Position]) -> None:
        self._inner.acknowledge(positions)

    def acknowledge_batch_indexes(self, position: Position, unacked_bits: Sequence[int], batch_size: int) -> None:
        self._inner.acknowledge_batch_indexes(position, unacked_bits, batch_size)

    def acknowledge_cumulative(self, position: Position) -> None:
        self._inner.acknowledge_cumulative(position)

    def is_acknowledged(self, position: Position) -> bool:
        return self._inner.is_acknowledged(position)

    def backlog_entries(self) -> int:
        return self._inner.backlog_entries()

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return self._inner.individually_deleted_ranges()

    async def set_properties(self, updates: Mapping[str, int]) -> None:
        await self._inner.set_properties(updates)

    async def flush(self) -> None:
        await self._inner.flush()

    async def close(self) -> None:
        await self._inner.close()
