"""A cluster broker's cluster parts, as the composition root built them: its membership, its ownership of
bundles and the moves of bundles (None on a standalone, which owns everything)."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.broker.cluster.bundle_owner import ClusterOwnership
from magnetar.broker.cluster.members import Members
from magnetar.broker.cluster.moves import BundleMoves


@dataclass(frozen=True, slots=True, eq=False)
class ClusterParts:
    members: Members
    ownership: ClusterOwnership
    moves: BundleMoves
