"""CI's fixed seed set for the transaction simulator (``tests/sim/txn_world.py``; soaks and replays:
``.venv/bin/python -m tests.sim.txn_world --seeds 10000 --ops 300``)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.txn_world import TxnSimulation, run_txn_seed

CI_SEEDS = range(60)
CI_OPS = 200


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_txn_seed_keeps_isolation_atomicity_and_commits(seed: int) -> None:
    stats, _ = run_txn_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_a_txn_seed_replays_exactly() -> None:
    first, second = TxnSimulation(11, 150), TxnSimulation(11, 150)
    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_txn_ci_seeds_exercise_every_path() -> None:
    totals = [run_txn_seed(seed, CI_OPS)[0] for seed in range(10)]
    for name in ("crashes", "restarts", "commits", "aborts", "conflicts", "redriven", "delivered", "redelivered"):
        assert sum(getattr(s, name) for s in totals) > 0, name
