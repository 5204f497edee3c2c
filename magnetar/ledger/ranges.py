"""A sorted set of closed position ranges, merged when they touch: a cursor's individually deleted entries.

Owns only the interval bookkeeping. Whether two ranges touch ("the entry after ``a`` is ``b``") depends on
the ledger list, so the caller passes a ``next_of`` function; this module knows nothing of ledgers,
storage or persistence. Ranges are stored closed (``[first, last]``, both real entries); the Pulsar-style
open-closed form is produced by the cursor.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from magnetar.ledger.api import Position

NextOf = Callable[[Position], Position]


class PositionRangeSet:
    def __init__(self, next_of: NextOf, ranges: Iterable[tuple[Position, Position]] = ()) -> None:
        self._next_of = next_of
        self._firsts: list[Position] = []
        self._lasts: list[Position] = []
        for first, last in sorted(ranges):
            self._add_range(first, last)

    def __len__(self) -> int:
        return len(self._firsts)

    def __bool__(self) -> bool:
        return bool(self._firsts)

    def ranges(self) -> list[tuple[Position, Position]]:
        return list(zip(self._firsts, self._lasts, strict=True))

    def first(self) -> tuple[Position, Position] | None:
        return (self._firsts[0], self._lasts[0]) if self._firsts else None

    def clear(self) -> None:
        self._firsts.clear()
        self._lasts.clear()

    def range_containing(self, position: Position) -> tuple[Position, Position] | None:
        i = bisect.bisect_right(self._firsts, position) - 1
        if i >= 0 and self._lasts[i] >= position:
            return self._firsts[i], self._lasts[i]
        return None

    def __contains__(self, position: Position) -> bool:
        return self.range_containing(position) is not None

    def next_first_after(self, position: Position) -> Position | None:
        """The first position of the earliest range that starts after ``position``."""
        i = bisect.bisect_right(self._firsts, position)
        return self._firsts[i] if i < len(self._firsts) else None

    def add(self, position: Position) -> bool:
        """Add one position; False if it was already in the set."""
        if position in self:
            return False
        self._add_range(position, position)
        return True

    def _add_range(self, first: Position, last: Position) -> None:
        """Insert ``[first, last]`` (not overlapping any range) and merge with touching neighbours."""
        i = bisect.bisect_left(self._firsts, first)
        while i < len(self._firsts) and (self._firsts[i] <= last or self._next_of(last) == self._firsts[i]):
            last = max(last, self._lasts[i])  # bounded: each pass removes a range
            del self._firsts[i]
            del self._lasts[i]
        if i > 0 and (self._lasts[i - 1] >= first or self._next_of(self._lasts[i - 1]) == first):
            self._lasts[i - 1] = max(last, self._lasts[i - 1])
            return
        self._firsts.insert(i, first)
        self._lasts.insert(i, last)

    def pop_first(self) -> tuple[Position, Position]:
        return self._firsts.pop(0), self._lasts.pop(0)

    def remove_up_to(self, position: Position) -> list[tuple[Position, Position]]:
        """Drop every position ``<= position``; returns the removed pieces (closed ranges)."""
        removed: list[tuple[Position, Position]] = []
        while self._firsts and self._firsts[0] <= position:  # bounded by the number of ranges
            first, last = self._firsts[0], self._lasts[0]
            if last <= position:
                removed.append(self.pop_first())
                continue
            removed.append((first, position))
            self._firsts[0] = self._next_of(position)
            break
        return removed
