"""Fixed-bucket histograms for the per-topic distributions Pulsar exports: storage write latency and
entry size (``pulsar_storage_write_latency_le_*``, ``pulsar_entry_size_le_*``). Counts per bucket (not
cumulative, as Pulsar prints them), plus count and sum. Constant memory per topic."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# (upper bound, label suffix) in Pulsar's bucket names
WRITE_LATENCY_MS_BUCKETS = ((0.5, "0_5"), (1, "1"), (5, "5"), (10, "10"), (20, "20"), (50, "50"),
                            (100, "100"), (200, "200"), (1000, "1000"))
ENTRY_SIZE_BYTES_BUCKETS = ((128, "128"), (512, "512"), (1024, "1_kb"), (2048, "2_kb"), (4096, "4_kb"),
                            (16384, "16_kb"), (102400, "100_kb"), (1048576, "1_mb"))


@dataclass(slots=True)
class Buckets:
    bounds: tuple[tuple[float, str], ...]
    counts: list[int] = field(default_factory=list)
    uppers: list[float] = field(default_factory=list)
    count: int = 0
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is the overflow bucket
        self.uppers = [b for b, _ in self.bounds]

    def record(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.uppers, value)] += 1
        self.count += 1
        self.total += value

    def labelled(self) -> list[tuple[str, int]]:
        """(suffix, count) for every bucket: ``le_<bound>`` then ``overflow``."""
        names = [f"le_{label}" for _, label in self.bounds] + ["overflow"]
        return list(zip(names, self.counts, strict=True))


def write_latency_buckets() -> Buckets:
    return Buckets(WRITE_LATENCY_MS_BUCKETS)


def entry_size_buckets() -> Buckets:
    return Buckets(ENTRY_SIZE_BYTES_BUCKETS)
