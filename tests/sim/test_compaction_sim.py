"""CI's fixed seed set for the compaction simulator (``tests/sim/compaction_world.py``; soaks and replays:
``.venv/bin/python -m tests.sim.compaction_world --seeds 10000 --ops 200``)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.compaction_world import CompactionSimulation, run_compaction_seed

CI_SEEDS = range(40)
CI_OPS = 150


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_compaction_seed_keeps_a_whole_view(seed: int) -> None:
    stats, _ = run_compaction_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_a_compaction_seed_replays_exactly() -> None:
    first, second = CompactionSimulation(7, 120), CompactionSimulation(7, 120)
    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_compaction_ci_seeds_exercise_every_path() -> None:
    totals = [run_compaction_seed(seed, CI_OPS)[0] for seed in range(10)]
    for name in ("crashes", "restarts", "compactions", "interrupted", "reruns"):
        assert sum(getattr(s, name) for s in totals) > 0, name
