"""Key_Shared consumer selection: which consumer owns a key's hash.

The hash is Pulsar's: Murmur3 x86_32 (seed 0) of the ordering key, else the partition key, else the
placeholder ``NONE_KEY``, reduced to 0..65535. AUTO_SPLIT spreads hashes over the consumers with a
consistent-hashing ring (a joining consumer takes over slices of the others); STICKY consumers declare
their own inclusive ranges, which may not overlap.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import mmh3

from magnetar import protocol as proto
from magnetar.broker.errors import ConsumerAssignError
from magnetar.broker.subscription.consumer import Consumer

HASH_RANGE_SIZE = 65536
NONE_KEY = b"NONE_KEY"
RING_POINTS_PER_CONSUMER = 100
RING_BUCKET_BITS = 8  # the ring is kept in 256 sorted buckets of 256 hash values each
RING_BUCKETS = HASH_RANGE_SIZE >> RING_BUCKET_BITS
RANGES_PER_CONSUMER_MAX = 1024  # sticky hash ranges one consumer may declare
MODE_AUTO_SPLIT = 0
MODE_STICKY = 1


def sticky_key(metadata: proto.pb.MessageMetadata) -> bytes:
    if metadata.HasField("ordering_key") and metadata.ordering_key:
        return bytes(metadata.ordering_key)
    if metadata.HasField("partition_key") and metadata.partition_key:
        key: str | bytes = metadata.partition_key  # bytes when not UTF-8 (refused at SEND; older entries)
        return key if isinstance(key, bytes) else key.encode()
    return NONE_KEY


def key_hash(key: bytes) -> int:
    return int(mmh3.hash(key, 0, signed=False)) & 0x7FFF_FFFF & (HASH_RANGE_SIZE - 1)


class StickyKeySelector:
    """Maps a hash to its consumer; one instance per Key_Shared subscription.

    Costs are bounded whatever the clients send: a consumer's ring points are hashed once when it joins
    (from its bounded name), joins and leaves change only that consumer's points (the ring is split into
    buckets by hash value, so a point goes in or out of a short sorted list: 3,000 consumers joining and
    leaving cost O(points · bucket), not O(consumers²)), and sticky ranges are kept sorted so a lookup or
    an overlap check is a binary search, not a scan of every consumer's ranges.
    """

    def __init__(self, mode: int) -> None:
        self.mode = mode
        # (point, join order) sorted, per bucket of hash values: ties go to the earlier consumer
        self._buckets: list[list[tuple[int, int]]] = [[] for _ in range(RING_BUCKETS)]
        self._points_of: dict[int, list[int]] = {}  # join order -> its ring points
        self._ranges: list[tuple[int, int, int]] = []  # sticky: (start, end, join order), sorted
        self._starts: list[int] = []
        self._by_order: dict[int, Consumer] = {}
        self._order_of: dict[int, int] = {}  # id(consumer) -> join order
        self._joined = 0

    def add(self, consumer: Consumer) -> None:
        if consumer.key_shared_mode != self.mode:
            raise ConsumerAssignError("Key_Shared mode differs from the subscription's other consumers")
        if len(consumer.hash_ranges) > RANGES_PER_CONSUMER_MAX:
            raise ConsumerAssignError(f"At most {RANGES_PER_CONSUMER_MAX} hash ranges per consumer")
        if self.mode == MODE_STICKY:
            self._check_ranges(consumer.hash_ranges)
        order = self._joined
        self._joined += 1
        self._by_order[order] = consumer
        self._order_of[id(consumer)] = order
        if self.mode == MODE_STICKY:
            for start, end in consumer.hash_ranges:
                bisect.insort(self._ranges, (start, end, order))
            self._starts = [r[0] for r in self._ranges]
            return
        points = [key_hash(f"{consumer.name}-{consumer.consumer_id}-{i}".encode())
                  for i in range(RING_POINTS_PER_CONSUMER)]
        self._points_of[order] = points
        for point in points:
            bisect.insort(self._buckets[point >> RING_BUCKET_BITS], (point, order))

    def remove(self, consumer: Consumer) -> None:
        order = self._order_of.pop(id(consumer), None)
        if order is None:
            return
        del self._by_order[order]
        if self.mode == MODE_STICKY:
            self._ranges = [r for r in self._ranges if r[2] != order]
            self._starts = [r[0] for r in self._ranges]
            return
        for point in self._points_of.pop(order, ()):
            bucket = self._buckets[point >> RING_BUCKET_BITS]
            index = bisect.bisect_left(bucket, (point, order))
            if index < len(bucket) and bucket[index] == (point, order):
                del bucket[index]

    def select(self, hash_value: int) -> Consumer | None:
        if not self._by_order:
            return None
        if self.mode == MODE_STICKY:
            index = bisect.bisect_right(self._starts, hash_value) - 1
            if index >= 0 and hash_value <= self._ranges[index][1]:
                return self._by_order[self._ranges[index][2]]
            return None
        first = hash_value >> RING_BUCKET_BITS
        bucket = self._buckets[first]
        index = bisect.bisect_left(bucket, (hash_value, -1))
        if index < len(bucket):
            return self._by_order[bucket[index][1]]
        for offset in range(1, RING_BUCKETS + 1):  # the next point clockwise, wrapping past 65535
            following = self._buckets[(first + offset) % RING_BUCKETS]
            if following:
                return self._by_order[following[0][1]]
        return None

    def ranges_of(self, consumer: Consumer) -> list[tuple[int, int]]:
        """The hash ranges a consumer owns (for stats)."""
        if self.mode == MODE_STICKY:
            return list(consumer.hash_ranges)
        order = self._order_of.get(id(consumer))
        owned: list[tuple[int, int]] = []
        ring = [entry for bucket in self._buckets for entry in bucket]
        previous = ring[-1][0] if ring else 0
        for point, owner in ring:
            if owner == order:
                owned.append((previous + 1 if previous < point else 0, point))
            previous = point
        return owned

    def _check_ranges(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Valid and disjoint from each other and from every range already taken (binary searches)."""
        mine = sorted(ranges)
        for (start, end), following in zip(mine, [*mine[1:], None], strict=True):
            if not 0 <= start <= end < HASH_RANGE_SIZE:
                raise ConsumerAssignError(f"Invalid hash range [{start}, {end}]")
            if following is not None and following[0] <= end:
                raise ConsumerAssignError(f"Range [{start}, {end}] overlaps [{following[0]}, {following[1]}]")
            index = bisect.bisect_right(self._starts, end) - 1  # the last taken range starting <= end
            if index >= 0 and self._ranges[index][1] >= start:
                o_start, o_end, owner = self._ranges[index]
                raise ConsumerAssignError(
                    f"Range [{start}, {end}] overlaps [{o_start}, {o_end}] of consumer "
                    f"{self._by_order[owner].name!r}"
                )
