"""Reconnect backoff: doubling from an initial delay up to a cap, with jitter, reset on success.

Pure arithmetic (no sleeping): callers ask for the next delay and sleep themselves.
"""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    def __init__(self, initial_ms: int, max_ms: int, *, jitter: float = 0.1, rng: random.Random | None = None) -> None:
        assert 0 < initial_ms <= max_ms
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._next_ms = initial_ms

    def next_ms(self) -> float:
        """The delay before the next attempt; doubles each call until ``max_ms``."""
        base = self._next_ms
        self._next_ms = min(self._next_ms * 2, self.max_ms)
        return base * (1 - self._jitter * self._rng.random())

    def reset(self) -> None:
        self._next_ms = self.initial_ms
