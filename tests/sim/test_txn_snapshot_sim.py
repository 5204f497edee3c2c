"""CI's fixed seed set for the transaction simulator with PIP-178 segmented snapshots and snapshot faults
(``tests/sim/txn_snapshot_world.py``; soaks: ``.venv/bin/python -m tests.sim.txn_snapshot_world --seeds 10000``)."""

from __future__ import annotations

import pytest

from tests.sim.txn_snapshot_world import run_snapshot_seed

CI_SEEDS = range(40)
CI_OPS = 200


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_snapshot_seed_keeps_the_aborted_index_through_cut_snapshots(seed: int) -> None:
    sim = run_snapshot_seed(seed, CI_OPS)
    assert sim.stats.ops == CI_OPS


def test_the_snapshot_ci_seeds_exercise_every_fault() -> None:
    sims = [run_snapshot_seed(seed, CI_OPS) for seed in range(8)]
    assert sum(s.snapshot_writes for s in sims) > 0
    assert sum(s.snapshot_faults for s in sims) > 0
    assert sum(s.snapshot_compactions for s in sims) > 0
    assert sum(s.stats.crashes for s in sims) > 0 and sum(s.stats.aborts for s in sims) > 0
