"""What Key_Shared AUTO_SPLIT joins and leaves cost as consumers grow (issue 36 item 8).

    .venv/bin/python bench/key_shared_ring.py [--consumers 300 1000 3000]

For each count N: N consumers join one subscription's ring, 10,000 hashes are selected, and all N leave
(in join order, as connections closing do). It prints the seconds each phase takes with the bucketed ring
(``StickyKeySelector``) and, side by side up to ``--compare-up-to`` consumers, with one sorted list rebuilt
per change (the ring before issue 36, which froze the broker for 120 s when 3,000 consumers left).

Measured on the shared 2-core machine (one run, load ~9): 300 consumers join 0.24 s / leave 0.11 s bucketed
against 1.44 / 1.84 s as one list; 1,000: 0.90 / 0.60 s against 20.2 / 23.1 s; 3,000 bucketed: 2.15 / 1.34 s.
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.subscription.key_shared import (
    MODE_AUTO_SPLIT,
    RING_POINTS_PER_CONSUMER,
    StickyKeySelector,
    key_hash,
)
from tests.unit.broker.test_broker_access import Endpoint

SELECTS = 10_000


class OneListRing:
    """The former ring: one sorted list, rebuilt on every leave."""

    def __init__(self) -> None:
        self.ring: list[tuple[int, int]] = []
        self.points: list[int] = []
        self.order: dict[int, int] = {}

    def add(self, c: Consumer) -> None:
        order = self.order[id(c)] = len(self.order)
        for i in range(RING_POINTS_PER_CONSUMER):
            bisect.insort(self.ring, (key_hash(f"{c.name}-{c.consumer_id}-{i}".encode()), order))
        self.points = [p for p, _ in self.ring]

    def remove(self, c: Consumer) -> None:
        order = self.order[id(c)]
        self.ring = [e for e in self.ring if e[1] != order]
        self.points = [p for p, _ in self.ring]

    def select(self, h: int) -> int | None:
        if not self.ring:
            return None
        return self.ring[bisect.bisect_left(self.points, h) % len(self.ring)][1]


def run(selector: StickyKeySelector | OneListRing, consumers: list[Consumer]) -> tuple[float, float, float]:
    start = time.perf_counter()
    for c in consumers:
        selector.add(c)
    joined = time.perf_counter()
    for h in range(SELECTS):
        selector.select(h * 6 % 65536)
    selected = time.perf_counter()
    for c in consumers:
        selector.remove(c)
    return joined - start, selected - joined, time.perf_counter() - selected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, nargs="+", default=[300, 1000, 3000])
    parser.add_argument("--compare-up-to", type=int, default=1000,
                        help="run the former ring only up to this many consumers (it is quadratic)")
    args = parser.parse_args()
    print(f"{'consumers':>9} | {'ring':<9} | {'join s':>7} | {f'{SELECTS} selects s':>16} | {'leave s':>8}")
    for n in args.consumers:
        consumers = [Consumer(endpoint=Endpoint(), consumer_id=i, name=f"consumer-{i}", topic_name="t",
                              subscription_name="s", sub_type=3, priority_level=0, partition=-1, created_ms=0,
                              key_shared_mode=MODE_AUTO_SPLIT, hash_ranges=()) for i in range(n)]
        rings: list[tuple[str, StickyKeySelector | OneListRing]] = [("bucketed", StickyKeySelector(MODE_AUTO_SPLIT))]
        if n <= args.compare_up_to:
            rings.append(("one list", OneListRing()))
        for label, selector in rings:
            join, select, leave = run(selector, consumers)
            print(f"{n:>9} | {label:<9} | {join:>7.2f} | {select:>16.3f} | {leave:>8.2f}")


if __name__ == "__main__":
    main()
