"""The ordered list of ledgers of one managed ledger, and navigation over positions in it.

Owns the arithmetic on positions: which positions are entries, the entry after a position (crossing ledger
boundaries), clamping a position into the stored range, and counting the entries between two positions
from the per-ledger entry counts (never by reading entries). The last ledger is the current one; its entry
count is the number of *confirmed* entries. This module does no I/O and knows nothing of storage, metadata
or cursors: the managed ledger keeps it up to date and cursors ask it questions.

Ledger ids grow with creation time (the ledger store never reuses ids and hands them out ascending), so
``Position`` order is entry order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from magnetar.ledger.api import LedgerSummary, Position

#: Sentinel for an empty list (never true after a managed ledger has opened).
NO_POSITION = Position(-1, -1)


class LedgerList:
    def __init__(self, ledgers: Iterable[LedgerSummary] = ()) -> None:
        self._items: list[LedgerSummary] = []
        self._ids: list[int] = []
        self._starts: list[int] = []  # index (in entries) of each ledger's first entry
        for ledger in ledgers:
            self.append(ledger)

    # ---- mutation (by the managed ledger only) -----------------------------------------------------------

    def append(self, ledger: LedgerSummary) -> None:
        assert not self._ids or ledger.ledger_id > self._ids[-1], "ledger ids must grow"
        self._starts.append(self._starts[-1] + self._items[-1].entries if self._items else 0)
        self._items.append(ledger)
        self._ids.append(ledger.ledger_id)

    def replace(self, ledger: LedgerSummary) -> None:
        i = self._find(ledger.ledger_id)
        assert i is not None, f"unknown ledger {ledger.ledger_id}"
        self._items[i] = ledger
        self._reindex()

    def remove(self, ledger_id: int) -> None:
        i = self._find(ledger_id)
        if i is None:
            return
        del self._items[i]
        del self._ids[i]
        self._reindex()

    def record_add(self, ledger_id: int, entry_id: int, size_bytes: int) -> None:
        """A confirmed entry of the current ledger (confirmations arrive in entry order)."""
        last = self._items[-1]
        assert last.ledger_id == ledger_id, "adds go to the current ledger only"
        # the constructor, not dataclasses.replace: this runs once per stored entry
        self._items[-1] = LedgerSummary(
            ledger_id=ledger_id, entries=max(last.entries, entry_id + 1), size_bytes=last.size_bytes + size_bytes,
            created_ms=last.created_ms, offload=last.offload,
        )

    def _reindex(self) -> None:
        self._starts = []
        total = 0
        for item in self._items:
            self._starts.append(total)
            total += item.entries

    def _find(self, ledger_id: int) -> int | None:
        i = bisect.bisect_left(self._ids, ledger_id)
        return i if i < len(self._ids) and self._ids[i] == ledger_id else None

    # ---- queries -------------------------------------------------------------------------------------------

    def summaries(self) -> list[LedgerSummary]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, ledger_id: int) -> LedgerSummary | None:
        i = self._find(ledger_id)
        return None if i is None else self._items[i]

    @property
    def current(self) -> LedgerSummary:
        return self._items[-1]

    def total_entries(self) -> int:
        return self._starts[-1] + self._items[-1].entries if self._items else 0

    def total_size_bytes(self) -> int:
        return sum(item.size_bytes for item in self._items)

    def first_position(self) -> Position:
        """Just before the first stored entry."""
        return Position(self._ids[0], -1) if self._ids else NO_POSITION

    def last_confirmed(self) -> Position:
        """The last confirmed entry, or (current ledger, -1) when there is none."""
        for item in reversed(self._items):
            if item.entries > 0:
                return Position(item.ledger_id, item.entries - 1)
        return Position(self._ids[-1], -1) if self._ids else NO_POSITION

    def end_position(self) -> Position:
        """Where the next added entry will be if no rollover happens: one past the last confirmed entry."""
        if not self._items:
            return NO_POSITION
        return Position(self._ids[-1], self._items[-1].entries)

    def is_entry(self, position: Position) -> bool:
        """True if ``position`` is a confirmed entry."""
        i = self._find(position.ledger_id)
        return i is not None and 0 <= position.entry_id < self._items[i].entries

    def forward(self, position: Position) -> Position:
        """The first confirmed entry at or after ``position``, or :meth:`end_position` if there is none.

        Clamps anything before the first entry to the first entry, skips ids of ledgers that do not exist
        and entry ids past a sealed ledger's end.
        """
        if not self._items:
            return NO_POSITION
        ledger_id, entry_id = position.ledger_id, max(position.entry_id, 0)
        i = bisect.bisect_left(self._ids, ledger_id)
        if i < len(self._ids) and self._ids[i] != ledger_id:
            entry_id = 0
        for j in range(i, len(self._items)):  # bounded by the number of ledgers
            if entry_id < self._items[j].entries:
                return Position(self._ids[j], entry_id)
            entry_id = 0
        return self.end_position()

    def next_position(self, position: Position) -> Position:
        """The position after ``position``, crossing ledger boundaries. Past the current ledger's end it is
        the plain successor (the entry that has not been written yet)."""
        if not self._items:
            return NO_POSITION
        if position.ledger_id >= self._ids[-1]:
            return Position(position.ledger_id, max(position.entry_id + 1, 0))
        return self.forward(Position(position.ledger_id, position.entry_id + 1))

    def index(self, position: Position) -> int:
        """How many confirmed entries are at or before ``position``."""
        i = bisect.bisect_right(self._ids, position.ledger_id) - 1
        if i < 0:
            return 0
        entries = self._items[i].entries
        if self._ids[i] == position.ledger_id:
            return self._starts[i] + min(max(position.entry_id + 1, 0), entries)
        return self._starts[i] + entries

    def count_between(self, after: Position, upto: Position) -> int:
        """Confirmed entries ``p`` with ``after < p <= upto``."""
        return max(0, self.index(upto) - self.index(after))
