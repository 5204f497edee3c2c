"""A log-bucketed latency histogram in the spirit of HdrHistogram: fixed memory, ~1.6% precision.

Values are integer microseconds. Below ``EXACT_BELOW_US`` every value has its own bucket; above it each
power of two is split into ``SUB_BUCKETS`` equal buckets, so the relative error of a reported percentile
is at most 1/64. Values past ``VALUE_MAX_US`` (one hour) are clamped to it: memory never grows with the
data. Pure logic: no clock, no threads (the recorder adds the lock).
"""

from __future__ import annotations

from dataclasses import dataclass

SUB_BUCKET_BITS = 6
SUB_BUCKETS = 1 << SUB_BUCKET_BITS  # 64 buckets per power of two above the exact range
EXACT_BELOW_US = SUB_BUCKETS * 2  # 0..127 µs are kept exactly
VALUE_MAX_US = 3_600_000_000
_SHIFT_MAX = VALUE_MAX_US.bit_length() - (SUB_BUCKET_BITS + 1)
BUCKET_COUNT = EXACT_BELOW_US + _SHIFT_MAX * SUB_BUCKETS


def bucket_of(value_us: int) -> int:
    """The bucket index of a value (clamped to [0, VALUE_MAX_US])."""
    if value_us < EXACT_BELOW_US:
        return max(value_us, 0)
    value_us = min(value_us, VALUE_MAX_US)
    shift = value_us.bit_length() - (SUB_BUCKET_BITS + 1)
    return EXACT_BELOW_US + (shift - 1) * SUB_BUCKETS + ((value_us >> shift) - SUB_BUCKETS)


def bucket_value_us(index: int) -> float:
    """The value a bucket stands for: the middle of its range (exact below EXACT_BELOW_US)."""
    if index < EXACT_BELOW_US:
        return float(index)
    shift, sub = divmod(index - EXACT_BELOW_US, SUB_BUCKETS)
    shift += 1
    low = (SUB_BUCKETS + sub) << shift
    return low + ((1 << shift) - 1) / 2


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Percentiles of one histogram, in milliseconds."""

    count: int
    min_ms: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count, "min": self.min_ms, "mean": self.mean_ms, "p50": self.p50_ms,
            "p95": self.p95_ms, "p99": self.p99_ms, "p999": self.p999_ms, "max": self.max_ms,
        }


class Histogram:
    """Counts of latencies in fixed buckets, plus exact count, sum, min and max."""

    __slots__ = ("_counts", "count", "max_us", "min_us", "sum_us")

    def __init__(self) -> None:
        self._counts = [0] * BUCKET_COUNT
        self.count = 0
        self.sum_us = 0
        self.min_us = VALUE_MAX_US
        self.max_us = 0

    def record(self, value_us: int) -> None:
        value_us = min(max(value_us, 0), VALUE_MAX_US)
        self._counts[bucket_of(value_us)] += 1
        self.count += 1
        self.sum_us += value_us
        if value_us < self.min_us:
            self.min_us = value_us
        if value_us > self.max_us:
            self.max_us = value_us

    def merge(self, other: Histogram) -> None:
        """Add every count of ``other`` into this one."""
        if other.count == 0:
            return
        counts = self._counts
        for index, n in enumerate(other._counts):
            if n:
                counts[index] += n
        self.count += other.count
        self.sum_us += other.sum_us
        self.min_us = min(self.min_us, other.min_us)
        self.max_us = max(self.max_us, other.max_us)

    def percentile_us(self, quantile: float) -> float:
        """The value at ``quantile`` (0..1); 0 when empty. The top quantile reports the exact max."""
        if not 0.0 <= quantile <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {quantile}")
        if self.count == 0:
            return 0.0
        rank = max(1, min(self.count, int(quantile * self.count + 0.999999)))
        seen = 0
        for index, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                return min(max(bucket_value_us(index), float(self.min_us)), float(self.max_us))
        return float(self.max_us)  # pragma: no cover - the counts always add up to count

    def summary(self) -> LatencySummary:
        if self.count == 0:
            return LatencySummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        ms = 1000.0
        return LatencySummary(
            count=self.count,
            min_ms=self.min_us / ms,
            mean_ms=self.sum_us / self.count / ms,
            p50_ms=self.percentile_us(0.50) / ms,
            p95_ms=self.percentile_us(0.95) / ms,
            p99_ms=self.percentile_us(0.99) / ms,
            p999_ms=self.percentile_us(0.999) / ms,
            max_ms=self.max_us / ms,
        )
