"""Rate pacing and payload stamping shared by the client drivers.

A ``Pacer`` spaces sends to a target rate (0 means as fast as possible) by telling the caller how long to
wait before the next one; waiting is the caller's business (a thread sleeps, a coroutine awaits), so the
same logic serves both drivers. A stamped payload carries its send time (wall clock, nanoseconds) after
a magic prefix, so a consumer in another process measures end-to-end latency to the microsecond.
"""

from __future__ import annotations

import struct
import time

STAMP_MAGIC = b"MGPF"
_STAMP = struct.Struct("<4sq")
STAMP_BYTES = _STAMP.size
PACING_SLICE_S = 0.001  # below this, a wait is not worth a sleep: send a little burst instead


class Pacer:
    """Tells how long to wait before message ``n`` to keep ``rate_per_s`` (shared by nothing)."""

    def __init__(self, rate_per_s: float, start_s: float) -> None:
        self.interval_s = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
        self.start_s = start_s
        self.sent = 0

    def wait_s(self, now_s: float) -> float:
        """Seconds to wait before the next send (0 when it may go now); counts the send."""
        if self.interval_s == 0.0:
            self.sent += 1
            return 0.0
        due_s = self.start_s + self.sent * self.interval_s
        self.sent += 1
        ahead_s = due_s - now_s
        return ahead_s if ahead_s >= PACING_SLICE_S else 0.0


def filler(size_bytes: int) -> bytes:
    """The payload body: ``size_bytes`` of a fixed pattern (compressible, like pulsar-perf's default)."""
    pattern = b"magnetar-perf-0123456789abcdefghijklmnopqrstuvwxyz"
    return (pattern * (size_bytes // len(pattern) + 1))[:size_bytes]


def stamped(body: bytes, now_ns: int | None = None) -> bytes:
    """``body`` with its head replaced by the magic and the current wall-clock time (if it has room)."""
    if len(body) < STAMP_BYTES:
        return body
    return _STAMP.pack(STAMP_MAGIC, time.time_ns() if now_ns is None else now_ns) + body[STAMP_BYTES:]


def stamp_of(payload: bytes | memoryview) -> int | None:
    """The send time (ns) a stamped payload carries, or None."""
    if len(payload) < STAMP_BYTES:
        return None
    magic, sent_ns = _STAMP.unpack_from(payload)
    return int(sent_ns) if magic == STAMP_MAGIC else None


def latency_us(payload: bytes | memoryview, publish_time_ms: int, now_ns: int) -> int:
    """End-to-end latency of a received message: from its stamp, else from its publish time (ms)."""
    sent_ns = stamp_of(payload)
    if sent_ns is None:
        sent_ns = publish_time_ms * 1_000_000
    return max(0, (now_ns - sent_ns) // 1000)
