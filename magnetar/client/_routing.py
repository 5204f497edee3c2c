"""Partition routing for producers.

Keyed messages always go to ``crc32c(key) % partitions``, so one key stays on one partition.
Key-less messages go round-robin (``round_robin``) or all to one partition chosen at creation
(``key_hash``, like Pulsar's single-partition mode). Pure logic.
"""

from __future__ import annotations

from magnetar.protocol import crc32c

__all__ = ["Router"]


class Router:
    def __init__(self, partitions: int, mode: str = "round_robin", *, start: int = 0) -> None:
        assert partitions > 0
        self.partitions = partitions
        self.mode = mode
        self._next = start % partitions

    def choose(self, key: str | None) -> int:
        if key is not None:
            return crc32c(key.encode()) % self.partitions
        index = self._next
        if self.mode == "round_robin":
            self._next = (self._next + 1) % self.partitions
        return index
