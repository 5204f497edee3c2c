"""Key_Shared selection stays correct when changes are incremental and ranges are indexed."""

from __future__ import annotations

import bisect
import random

import pytest

from magnetar.broker.errors import ConsumerAssignError
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.subscription.key_shared import (
    HASH_RANGE_SIZE,
    MODE_AUTO_SPLIT,
    MODE_STICKY,
    RING_POINTS_PER_CONSUMER,
    StickyKeySelector,
    key_hash,
)
from tests.unit.broker.test_broker_access import Endpoint


def consumer(cid: int, *, ranges: tuple[tuple[int, int], ...] = (), mode: int = MODE_AUTO_SPLIT) -> Consumer:
    return Consumer(endpoint=Endpoint(), consumer_id=cid, name=f"c{cid}", topic_name="t", subscription_name="s",
                    sub_type=3, priority_level=0, partition=-1, created_ms=0, key_shared_mode=mode,
                    hash_ranges=ranges)


def test_incremental_ring_equals_a_ring_built_from_scratch() -> None:
    rng = random.Random(8)
    live: list[Consumer] = []
    changed = StickyKeySelector(MODE_AUTO_SPLIT)
    for step in range(60):
        if live and rng.random() < 0.4:
            gone = live.pop(rng.randrange(len(live)))
            changed.remove(gone)
        else:
            live.append(consumer(step))
            changed.add(live[-1])
        fresh = StickyKeySelector(MODE_AUTO_SPLIT)
        for c in live:
            fresh.add(c)
        for h in range(0, HASH_RANGE_SIZE, 97):
            assert changed.select(h) is fresh.select(h)


def test_sticky_ranges_select_and_refuse_overlaps() -> None:
    selector = StickyKeySelector(MODE_STICKY)
    a = consumer(1, ranges=((0, 99), (1000, 1999)), mode=MODE_STICKY)
    b = consumer(2, ranges=((100, 999),), mode=MODE_STICKY)
    selector.add(a)
    selector.add(b)
    assert [selector.select(h) for h in (0, 99, 100, 999, 1000, 1999, 2000)] == [a, a, b, b, a, a, None]
    for ranges in (((50, 60),), ((1999, 3000),), ((3000, 3010), (3005, 3020)), ((5, 4),), ((0, HASH_RANGE_SIZE),)):
        with pytest.raises(ConsumerAssignError):
            selector.add(consumer(3, ranges=ranges, mode=MODE_STICKY))
    selector.remove(a)
    assert selector.select(50) is None and selector.select(500) is b
    c = consumer(4, ranges=((0, 99),), mode=MODE_STICKY)
    selector.add(c)
    assert selector.select(50) is c


def test_many_sticky_ranges_are_checked_by_search() -> None:
    selector = StickyKeySelector(MODE_STICKY)
    for cid in range(64):
        ranges = tuple((cid * 1024 + i * 2, cid * 1024 + i * 2) for i in range(512))
        selector.add(consumer(cid, ranges=ranges, mode=MODE_STICKY))
    assert selector.select(63 * 1024 + 1022).consumer_id == 63  # type: ignore[union-attr]
    assert selector.select(63 * 1024 + 1023) is None


def _reference_select(live: list[tuple[int, Consumer]], hash_value: int) -> Consumer | None:
    """One sorted list of every (point, join order): the first point at or after the hash, wrapping."""
    ring = sorted((key_hash(f"{c.name}-{c.consumer_id}-{i}".encode()), order)
                  for order, c in live for i in range(RING_POINTS_PER_CONSUMER))
    if not ring:
        return None
    index = bisect.bisect_left(ring, (hash_value, -1))
    owner = ring[index % len(ring)][1]
    return next(c for order, c in live if order == owner)


def test_the_bucketed_ring_selects_as_one_sorted_ring_does() -> None:
    rng = random.Random(36)
    selector = StickyKeySelector(MODE_AUTO_SPLIT)
    live: list[tuple[int, Consumer]] = []
    for step in range(40):
        if live and rng.random() < 0.35:
            _, gone = live.pop(rng.randrange(len(live)))
            selector.remove(gone)
        else:
            live.append((step, consumer(step)))
            selector.add(live[-1][1])
        for h in [0, 1, HASH_RANGE_SIZE - 1, *(rng.randrange(HASH_RANGE_SIZE) for _ in range(50))]:
            assert selector.select(h) is _reference_select(live, h), (step, h)
