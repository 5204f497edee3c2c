"""Thread-safe counters and latency histograms for one measured flow (publish, consume, end-to-end).

Client callbacks record into the current interval under a short lock; once a second the runner takes the
interval (``tick``) and folds it into the total, so the progress line and the final summary come from the
same numbers and a callback never walks a histogram. Knows nothing of clients or output formats.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from magnetar.perf._histogram import Histogram, LatencySummary


@dataclass(frozen=True, slots=True)
class Interval:
    """What one flow did during one period."""

    name: str
    elapsed_s: float
    messages: int
    bytes: int
    errors: int
    latency: LatencySummary

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.elapsed_s / 1e6 if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "messages": self.messages, "bytes": self.bytes, "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 6), "msg_per_s": round(self.msg_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3), "latency_ms": self.latency.as_dict(),
        }


class Recorder:
    """Counts messages, bytes and errors of one flow and the latency of each message."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._interval = Histogram()
        self._interval_messages = 0
        self._interval_bytes = 0
        self._interval_errors = 0
        self.total = Histogram()
        self.messages = 0
        self.bytes = 0
        self.errors = 0

    def record(self, size_bytes: int, latency_us: int) -> None:
        with self._lock:
            self._interval.record(latency_us)
            self._interval_messages += 1
            self._interval_bytes += size_bytes

    def record_many(self, count: int, size_bytes: int, latencies_us: list[int]) -> None:
        """Record ``count`` messages of ``size_bytes`` total; ``latencies_us`` may be a sample of them."""
        with self._lock:
            for latency_us in latencies_us:
                self._interval.record(latency_us)
            self._interval_messages += count
            self._interval_bytes += size_bytes

    def error(self, count: int = 1) -> None:
        with self._lock:
            self._interval_errors += count

    @property
    def seen(self) -> int:
        """Messages recorded so far, including the current interval."""
        with self._lock:
            return self.messages + self._interval_messages

    def take(self) -> tuple[Histogram, int, int, int]:
        """Close the current interval: its histogram, messages, bytes and errors (not folded into totals)."""
        with self._lock:
            hist, self._interval = self._interval, Histogram()
            messages, self._interval_messages = self._interval_messages, 0
            size, self._interval_bytes = self._interval_bytes, 0
            errors, self._interval_errors = self._interval_errors, 0
        return hist, messages, size, errors

    def add(self, hist: Histogram, messages: int, size: int, errors: int) -> None:
        """Count what another recorder took (a child process's interval) into the current interval."""
        with self._lock:
            self._interval.merge(hist)
            self._interval_messages += messages
            self._interval_bytes += size
            self._interval_errors += errors

    def tick(self, elapsed_s: float) -> Interval:
        """Close the current interval: return what it saw and fold it into the totals."""
        hist, messages, size, errors = self.take()
        self.total.merge(hist)
        self.messages += messages
        self.bytes += size
        self.errors += errors
        return Interval(self.name, elapsed_s, messages, size, errors, hist.summary())

    def overall(self, elapsed_s: float) -> Interval:
        """Totals over the whole run (call after the last tick)."""
        return Interval(self.name, elapsed_s, self.messages, self.bytes, self.errors, self.total.summary())
