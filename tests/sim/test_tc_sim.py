"""CI's fixed seed set for the transaction coordinator simulator (tests/sim/tc_world.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.tc_world import TxnSimulation, run_txn_seed

CI_SEEDS = range(60)
CI_OPS = 300


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_txn_seed_keeps_every_invariant(seed: int) -> None:
    stats, _ = run_txn_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_a_txn_seed_replays_exactly() -> None:
    first, second = TxnSimulation(3, 200), TxnSimulation(3, 200)
    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_ci_seeds_reach_every_phase() -> None:
    """Worth running only if the fixed set commits, aborts, times out and crashes with ends under way."""
    totals = [run_txn_seed(seed, CI_OPS)[0] for seed in range(8)]
    for name in ("crashes", "restarts", "commits", "aborts", "timeouts", "ends_cut_by_crash", "faults"):
        assert sum(getattr(s, name) for s in totals) > 0, name
