"""CI's fixed seed set for the replicated-subscriptions simulator (``tests/sim/repl_sub_world.py``; soaks:
``.venv/bin/python -m tests.sim.repl_sub_world --seeds 10000``)."""

from __future__ import annotations

import pytest

from magnetar.broker.replication.subscriptions import rounds
from magnetar.ledger.api import Position
from tests.sim.repl_sub_world import run_seed

CI_SEEDS = range(200)
CI_OPS = 400


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seed_never_moves_a_subscription_past_an_unacknowledged_message(seed: int) -> None:
    assert run_seed(seed, CI_OPS).stats.ops == CI_OPS


def test_the_ci_seeds_exercise_snapshots_updates_timeouts_and_crashes() -> None:
    worlds = [run_seed(seed, CI_OPS) for seed in range(20)]
    assert sum(w.totals.completed for w in worlds) > 20
    assert sum(w.totals.timedout for w in worlds) > 0
    assert sum(w.stats.updates_applied for w in worlds) > 5
    assert sum(w.stats.crashes for w in worlds) > 0 and sum(w.stats.failovers for w in worlds) > 0
    assert any(len(w.names) == 3 and w.totals.completed for w in worlds)


def test_the_simulator_catches_a_one_round_snapshot_with_three_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the second round a remote's answer can count another remote's messages that have not
    reached us yet: the simulator must find a seed where that skips an unacknowledged message."""
    real = rounds.PendingSnapshot.receive

    def one_round(self: rounds.PendingSnapshot, cluster: str, remote: Position, local: Position) -> rounds.Step:
        step = real(self, cluster, remote, local)
        if step is rounds.Step.SECOND_ROUND:
            self.awaiting, self.local = set(), local
            return rounds.Step.COMPLETE
        return step

    monkeypatch.setattr(rounds.PendingSnapshot, "receive", one_round)
    with pytest.raises(AssertionError, match="never acknowledged"):
        for seed in range(300):
            run_seed(seed, CI_OPS)
