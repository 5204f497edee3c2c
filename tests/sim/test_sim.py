"""CI's fixed seed set for the durability simulator (see tests/sim/README.md for soaks and replays)."""

from __future__ import annotations

import pytest

from tests.sim.world import Simulation, run_seed

CI_SEEDS = range(250)
CI_OPS = 500


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seed_keeps_every_invariant(seed: int) -> None:
    stats, _ = run_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_a_seed_replays_exactly() -> None:
    first = Simulation(7, 300)
    second = Simulation(7, 300)
    import asyncio

    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_ci_seeds_exercise_every_fault() -> None:
    """The fixed set is only worth running if it reaches crashes with unsynced writes, faults and trims."""
    totals = [run_seed(seed, CI_OPS)[0] for seed in range(12)]
    assert sum(s.crashes for s in totals) > 0
    assert sum(s.restarts for s in totals) > 0
    assert sum(s.dropped_unsynced for s in totals) > 0
    assert sum(s.storage_faults for s in totals) > 0
    assert sum(s.metadata_faults for s in totals) > 0
    assert sum(s.trimmed_ledgers for s in totals) > 0
    assert sum(s.adds_failed for s in totals) > 0
    assert sum(s.offloads for s in totals) > 0 and sum(s.releases for s in totals) > 0
    assert sum(s.offload_faults for s in totals) > 0
    assert sum(s.offload_reads for s in totals) > 0 and sum(s.offload_read_faults for s in totals) > 0
    assert sum(s.failed_syncs for s in totals) > 0
