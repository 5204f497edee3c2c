"""Injected time: logic takes a Clock, tests use a manual one instead of sleeping.

It sits in `magnetar.core`, below every layer, and imports nothing else from magnetar.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (publish times, ledger ages)."""
        ...

    def monotonic_ms(self) -> float:
        """Monotonic milliseconds for intervals and deadlines."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic_ns() / 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._wall_ms = start_ms
        self._mono_ms = 0.0

    def now_ms(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> float:
        return self._mono_ms

    def advance(self, ms: int) -> None:
        assert ms >= 0, "time only moves forward"
        self._wall_ms += ms
        self._mono_ms += ms
