"""One snapshot in progress at its originating cluster: the REQUEST/RESPONSE rounds. Pure logic, no IO,
so the seeded simulator drives the same code the broker does.

Two clusters take one round. With three or more a second REQUEST (same id) goes out once every remote
answered the first: a remote's first answer may count messages another remote had replicated to it but
not yet to us, and the second round's answers land here after those. The snapshot then pairs the remote
positions of round 1 with the local position of the last round-2 answer. A snapshot missing any remote
is never used.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from magnetar.broker.replication.subscriptions.cache import Snapshot
from magnetar.ledger.api import Position


class Step(enum.Enum):
    WAIT = "wait"  # more answers are due
    SECOND_ROUND = "second_round"  # write the REQUEST again
    COMPLETE = "complete"  # write the SNAPSHOT


@dataclass(slots=True)
class PendingSnapshot:
    snapshot_id: str
    remotes: frozenset[str]
    started_ms: float
    round: int = 1
    remote_positions: dict[str, Position] = field(default_factory=dict)
    awaiting: set[str] = field(default_factory=set)
    local: Position | None = None
    data_mark: int = 0  # the topic's data count when it started (the nothing-new rule)

    def __post_init__(self) -> None:
        assert self.remotes, "a snapshot needs at least one remote cluster"
        self.awaiting = set(self.remotes)

    def receive(self, cluster: str, remote_position: Position, local_position: Position) -> Step:
        """A RESPONSE from ``cluster`` (its last position there) landed here at ``local_position``."""
        if cluster not in self.awaiting:
            return Step.WAIT  # a stranger or a repeat
        self.awaiting.discard(cluster)
        if self.round == 1:
            self.remote_positions[cluster] = remote_position
        self.local = local_position if self.local is None else max(self.local, local_position)
        if self.awaiting:
            return Step.WAIT
        if self.round == 1 and len(self.remotes) >= 2:
            self.round = 2
            self.awaiting = set(self.remotes)
            self.local = None  # the local position comes from round 2 only
            return Step.SECOND_ROUND
        return Step.COMPLETE

    def snapshot(self) -> Snapshot:
        assert not self.awaiting and self.local is not None, "a partial snapshot is never used"
        return Snapshot(self.snapshot_id, self.local, dict(self.remote_positions))
