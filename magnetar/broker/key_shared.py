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
from magnetar.broker.consumer import Consumer
from magnetar.broker.errors import ConsumerAssignError

HASH_RANGE_SIZE = 65536
NONE_KEY = b"NONE_KEY"
RING_POINTS_PER_CONSUMER = 100
MODE_AUTO_SPLIT = 0
MODE_STICKY = 1


def sticky_key(metadata: proto.pb.MessageMetadata) -> bytes:
    if metadata.HasField("ordering_key") and metadata.ordering_key:
        return bytes(metadata.ordering_key)
    if metadata.HasField("partition_key") and metadata.partition_key:
        return metadata.partition_key.encode()
    return NONE_KEY


def key_hash(key: bytes) -> int:
    return int(mmh3.hash(key, 0, signed=False)) & 0x7FFF_FFFF & (HASH_RANGE_SIZE - 1)


class StickyKeySelector:
    """Maps a hash to its consumer; one instance per Key_Shared subscription."""

    def __init__(self, mode: int) -> None:
        self.mode = mode
        self._ring: list[tuple[int, int]] = []  # (point, index into _consumers)
        self._points: list[int] = []
        self._consumers: list[Consumer] = []

    def add(self, consumer: Consumer) -> None:
        if consumer.key_shared_mode != self.mode:
            raise ConsumerAssignError("Key_Shared mode differs from the subscription's other consumers")
        if self.mode == MODE_STICKY:
            self._check_ranges(consumer.hash_ranges)
        self._consumers.append(consumer)
        self._rebuild()

    def remove(self, consumer: Consumer) -> None:
        if consumer in self._consumers:
            self._consumers.remove(consumer)
            self._rebuild()

    def select(self, hash_value: int) -> Consumer | None:
        if not self._consumers:
            return None
        if self.mode == MODE_STICKY:
            for consumer in self._consumers:
                if any(start <= hash_value <= end for start, end in consumer.hash_ranges):
                    return consumer
            return None
        index = bisect.bisect_left(self._points, hash_value)
        if index == len(self._points):
            index = 0
        return self._consumers[self._ring[index][1]]

    def ranges_of(self, consumer: Consumer) -> list[tuple[int, int]]:
        """The hash ranges a consumer owns (for stats)."""
        if self.mode == MODE_STICKY:
            return list(consumer.hash_ranges)
        owned: list[tuple[int, int]] = []
        previous = self._points[-1] if self._points else 0
        for point, index in self._ring:
            if self._consumers[index] is consumer:
                owned.append((previous + 1 if previous < point else 0, point))
            previous = point
        return owned

    def _check_ranges(self, ranges: Sequence[tuple[int, int]]) -> None:
        for start, end in ranges:
            if not 0 <= start <= end < HASH_RANGE_SIZE:
                raise ConsumerAssignError(f"Invalid hash range [{start}, {end}]")
            for other in self._consumers:
                for o_start, o_end in other.hash_ranges:
                    if start <= o_end and o_start <= end:
                        raise ConsumerAssignError(
                            f"Range [{start}, {end}] overlaps [{o_start}, {o_end}] of consumer {other.name!r}"
                        )

    def _rebuild(self) -> None:
        if self.mode == MODE_STICKY:
            return
        ring: list[tuple[int, int]] = []
        for index, consumer in enumerate(self._consumers):
            for i in range(RING_POINTS_PER_CONSUMER):
                point = key_hash(f"{consumer.name}-{consumer.consumer_id}-{i}".encode())
                ring.append((point, index))
        ring.sort()
        self._ring = ring
        self._points = [p for p, _ in ring]
