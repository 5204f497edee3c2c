"""What a snapshot is and the bounded per-subscription cache of them. Pure values; no IO.

A completed snapshot says: once a subscription has acknowledged everything up to ``local`` in this
cluster, it has also seen everything up to ``clusters[x]`` in cluster ``x``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from magnetar.ledger.api import Position

PROPERTY = "pulsar.replicated.subscription"  # the cursor property that marks a replicated subscription


@dataclass(frozen=True, slots=True)
class Snapshot:
    snapshot_id: str
    local: Position
    clusters: Mapping[str, Position] = field(default_factory=dict)


class SnapshotCache:
    """A subscription's snapshots in local order, at most ``max_size``; eviction keeps the first and the
    last (the oldest still usable and the newest) and drops the middle one whose neighbours are closest, so
    the rest stay spread over the backlog."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max(2, max_size)
        self._snapshots: list[Snapshot] = []

    def __len__(self) -> int:
        return len(self._snapshots)

    def add(self, snapshot: Snapshot) -> None:
        if self._snapshots and snapshot.local <= self._snapshots[-1].local:
            return  # out of order or a repeat: the newer one already covers it
        self._snapshots.append(snapshot)
        if len(self._snapshots) > self.max_size:
            del self._snapshots[self._densest()]

    def _densest(self) -> int:
        """The index (never the first or the last) whose removal leaves the smallest gap."""
        s = self._snapshots

        def gap(i: int) -> tuple[int, int]:
            after, before = s[i + 1].local, s[i - 1].local
            return after.ledger_id - before.ledger_id, after.entry_id - before.entry_id

        return min(range(1, len(s) - 1), key=gap)

    def advanced_to(self, mark_delete: Position) -> Snapshot | None:
        """The newest snapshot at or before ``mark_delete``; it and every older one leave the cache."""
        found: Snapshot | None = None
        while self._snapshots and self._snapshots[0].local <= mark_delete:
            found = self._snapshots.pop(0)
        return found
