"""CI's fixed seed set for the Spark exactly-once sink simulator (tests/sim/spark_sink_world.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.sim.spark_sink_world import SinkSimulation, run_sink_seed

CI_SEEDS = range(60)


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_sink_seed_keeps_every_invariant(seed: int) -> None:
    stats, _ = run_sink_seed(seed)
    assert stats.runs >= 1


def test_a_sink_seed_replays_exactly() -> None:
    digests = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as work:
            sim = SinkSimulation(11, Path(work))
            sim.run()
            digests.append(sim.digest())
    assert digests[0] == digests[1]


def test_the_ci_seeds_reach_every_phase() -> None:
    """Worth running only if the fixed set kills drivers and tasks, fails batches and reaps orphans."""
    totals = [run_sink_seed(seed)[0] for seed in range(12)]
    for name in ("driver_deaths", "task_deaths", "failed_batches", "aborted", "batches"):
        assert sum(getattr(s, name) for s in totals) > 0, name
