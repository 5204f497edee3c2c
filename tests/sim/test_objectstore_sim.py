"""CI's fixed seed set for the object-store simulator (tests/sim/objectstore_world.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.objectstore_world import ObjectStoreSimulation, run_objectstore_seed

CI_SEEDS = range(150)
CI_OPS = 300


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_objectstore_seed_keeps_every_invariant(seed: int) -> None:
    stats, _ = run_objectstore_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_an_objectstore_seed_replays_exactly() -> None:
    first, second = ObjectStoreSimulation(5, 200), ObjectStoreSimulation(5, 200)
    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_ci_seeds_reach_every_race_and_fault() -> None:
    """Worth running only if the fixed set fences writers, loses seal races, loses answers and crashes."""
    totals = [run_objectstore_seed(seed, CI_OPS)[0] for seed in range(20)]
    for name in ("appends_acked", "appends_failed", "appends_fenced", "seals_by_writer", "seals_by_others",
                 "seal_races_lost", "deletes", "reads", "crashes", "faults", "lost_answers", "retries"):
        assert sum(getattr(s, name) for s in totals) > 0, name
