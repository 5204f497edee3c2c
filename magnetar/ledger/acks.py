"""A cursor's acknowledgement state: mark-delete position, individually deleted ranges, batch ack sets.

Owns the rules of acknowledgement: everything at or before the mark-delete position is acked; entries
after it may be acked individually (kept as merged ranges, and the mark-delete position advances when the
acks become contiguous with it); a batch entry may be partially acked (a bit set of the indexes still
unacked, AND-merged; all clear means the entry is acked whole). Bad input (positions that are not entries,
already acked, or beyond the last confirmed entry) is ignored: every method says whether it changed
anything. Pure logic over a :class:`LedgerList`; no I/O, no asyncio, no persistence format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from magnetar.ledger.api import Position
from magnetar.ledger.bitset import BATCH_SIZE_MAX, all_set, int_to_words, words_to_int
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.ranges import PositionRangeSet


class AckState:
    def __init__(self, ledgers: LedgerList, mark_delete: Position) -> None:
        self._ledgers = ledgers
        self._mark_delete = mark_delete
        self._ranges = PositionRangeSet(ledgers.next_position)
        self._acked_in_ranges = 0
        self._batches: dict[Position, int] = {}  # position -> bits still unacked (never 0)

    # ---- queries -------------------------------------------------------------------------------------------

    @property
    def mark_delete(self) -> Position:
        return self._mark_delete

    def is_acked(self, position: Position) -> bool:
        return position <= self._mark_delete or position in self._ranges

    def backlog(self) -> int:
        upto = self._ledgers.last_confirmed()
        return max(0, self._ledgers.count_between(self._mark_delete, upto) - self._acked_in_ranges)

    def ranges(self) -> list[tuple[Position, Position]]:
        """Individually acked entries after the mark-delete position, as closed ranges."""
        return self._ranges.ranges()

    def batch_words(self, position: Position) -> list[int] | None:
        bits = self._batches.get(position)
        return None if bits is None else int_to_words(bits)

    def batches(self) -> list[tuple[Position, list[int]]]:
        return [(p, int_to_words(bits)) for p, bits in sorted(self._batches.items())]

    def first_unacked(self, position: Position) -> Position:
        """The first position ``>= position`` that is not acked (may be the end of the ledger)."""
        position = max(position, self._ledgers.next_position(self._mark_delete))
        position = self._ledgers.forward(position)
        for _ in range(len(self._ranges) + 1):  # ranges are merged: one jump normally suffices
            hit = self._ranges.range_containing(position)
            if hit is None:
                break
            position = self._ledgers.next_position(hit[1])
        return position

    def next_acked_after(self, position: Position) -> Position | None:
        """The first individually acked position after ``position`` (where a read run must stop)."""
        return self._ranges.next_first_after(position)

    # ---- acknowledgement -----------------------------------------------------------------------------------

    def ack(self, position: Position) -> bool:
        mark_delete = self._mark_delete
        if (
            not self._ranges
            and position.ledger_id == mark_delete.ledger_id
            and position.entry_id == mark_delete.entry_id + 1
            and self._ledgers.is_entry(position)
        ):  # the entry right after the mark-delete position, no gaps: acks in order take only this step
            if self._batches:
                self._batches.pop(position, None)
            self._mark_delete = position
            return True
        if not self._ledgers.is_entry(position) or self.is_acked(position):
            return False
        self._ranges.add(position)
        self._acked_in_ranges += 1
        self._batches.pop(position, None)
        self._advance()
        return True

    def ack_batch(self, position: Position, unacked_words: Sequence[int], batch_size: int) -> bool:
        if not 0 < batch_size <= BATCH_SIZE_MAX or not self._ledgers.is_entry(position):
            return False
        if self.is_acked(position):
            return False
        before = self._batches.get(position, all_set(batch_size))
        after = before & words_to_int(unacked_words, batch_size)
        if after == 0:
            return self.ack(position)
        self._batches[position] = after
        return after != before

    def ack_cumulative(self, position: Position) -> bool:
        if position <= self._mark_delete or not self._ledgers.is_entry(position):
            return False
        self._set_mark_delete(position)
        self._advance()
        return True

    def reset(self, mark_delete: Position) -> None:
        """Everything at or before ``mark_delete`` acked, everything after it unacked."""
        self._mark_delete = mark_delete
        self._ranges.clear()
        self._acked_in_ranges = 0
        self._batches.clear()

    def restore(
        self, ranges: Iterable[tuple[Position, Position]], batches: Iterable[tuple[Position, Sequence[int]]]
    ) -> None:
        """Load persisted state, dropping whatever is not after the mark-delete position or not an entry."""
        lowest = self._ledgers.next_position(self._mark_delete)
        # A range may start in a ledger trimmed since it was persisted: keep the part that still exists
        # (dropping the whole range would redeliver acked entries; the simulator found this).
        clamped = [(max(self._ledgers.forward(first), lowest), last) for first, last in ranges]
        valid = [
            (first, last)
            for first, last in clamped
            if self._ledgers.is_entry(first) and self._ledgers.is_entry(last) and first <= last
        ]
        self._ranges = PositionRangeSet(self._ledgers.next_position, [*self._ranges.ranges(), *valid])
        self._acked_in_ranges = sum(self._count(f, la) for f, la in self._ranges.ranges())
        for position, words in batches:
            if self._ledgers.is_entry(position) and not self.is_acked(position):
                bits = words_to_int(words, BATCH_SIZE_MAX)
                if bits:
                    self._batches[position] = bits
        self._advance()

    # ---- internals -----------------------------------------------------------------------------------------

    def _count(self, first: Position, last: Position) -> int:
        return self._ledgers.index(last) - self._ledgers.index(first) + 1

    def _set_mark_delete(self, position: Position) -> None:
        self._mark_delete = position
        for first, last in self._ranges.remove_up_to(position):
            self._acked_in_ranges -= self._count(first, last)
        for p in [p for p in self._batches if p <= position]:
            del self._batches[p]

    def _advance(self) -> None:
        """Move the mark-delete position over acked ranges that touch it."""
        for _ in range(len(self._ranges) + 1):
            first = self._ranges.first()
            if first is None or first[0] != self._ledgers.next_position(self._mark_delete):
                return
            self._set_mark_delete(first[1])
