"""The delayed-delivery index: entries held back until their ``deliver_at_time`` (Shared, Key_Shared).

A bounded min-heap of (deliver-at, position). It lives in memory only: after a restart the cursor
re-reads everything after its mark-delete position, so the index is rebuilt by reading, as Pulsar's
in-memory tracker is. When it is full the dispatcher stops reading until some entries fall due.
"""

from __future__ import annotations

import heapq

from magnetar.core.clock import Clock
from magnetar.ledger.api import Position

DELAYED_INDEX_MAX = 100_000


class DelayedDeliveryTracker:
    def __init__(self, clock: Clock, *, entries_max: int = DELAYED_INDEX_MAX) -> None:
        self._clock = clock
        self._entries_max = entries_max
        self._heap: list[tuple[int, Position]] = []
        self._positions: set[Position] = set()

    def __len__(self) -> int:
        return len(self._positions)

    @property
    def full(self) -> bool:
        return len(self._positions) >= self._entries_max

    def is_due(self, deliver_at_ms: int) -> bool:
        return deliver_at_ms <= self._clock.now_ms()

    def add(self, position: Position, deliver_at_ms: int) -> bool:
        """Hold ``position`` until ``deliver_at_ms``; False (nothing held) when the index is full."""
        if position in self._positions:
            return True
        if self.full:
            return False
        heapq.heappush(self._heap, (deliver_at_ms, position))
        self._positions.add(position)
        return True

    def pop_due(self, limit: int) -> list[Position]:
        now = self._clock.now_ms()
        due: list[Position] = []
        while self._heap and self._heap[0][0] <= now and len(due) < limit:
            _, position = heapq.heappop(self._heap)
            if position in self._positions:
                self._positions.discard(position)
                due.append(position)
        return due

    def next_deliver_at_ms(self) -> int | None:
        while self._heap and self._heap[0][1] not in self._positions:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def discard(self, position: Position) -> None:
        self._positions.discard(position)

    def clear(self) -> None:
        self._heap.clear()
        self._positions.clear()
