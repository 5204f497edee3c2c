"""PIP-186's settings (Pulsar's proposed ``broker.conf`` keys; magnetar turns two phases on by default)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionConfig:
    enabled: bool = True  # topicTwoPhaseDeletionEnabled
    parallelism: int = 4  # twoPhaseDeletionLedgerDeletionParallelism
    reconsume_later_s: float = 600.0  # twoPhaseDeletionReconsumeLaterInSeconds
    max_retry_count: int = 10  # twoPhaseDeletionMaxRetryDeleteCount
