"""CI's fixed seed set for the durability simulator with ledgers in an object store
(tests/sim/objectstore_ledger_world.py)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.objectstore_ledger_world import ObjectLedgerSimulation, run_objectstore_ledger_seed

CI_SEEDS = range(40)
CI_OPS = 300


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_objectstore_ledger_seed_keeps_every_invariant(seed: int) -> None:
    stats, _ = run_objectstore_ledger_seed(seed, CI_OPS)
    assert stats.ops == CI_OPS


def test_an_objectstore_ledger_seed_replays_exactly() -> None:
    first, second = ObjectLedgerSimulation(4, 200), ObjectLedgerSimulation(4, 200)
    asyncio.run(first.run())
    asyncio.run(second.run())
    assert first.trace == second.trace


def test_the_ci_seeds_crash_restart_fail_and_offload() -> None:
    totals = [run_objectstore_ledger_seed(seed, CI_OPS)[0] for seed in range(8)]
    for name in ("crashes", "restarts", "adds_receipted", "adds_failed", "storage_faults", "trimmed_ledgers",
                 "offloads", "releases", "acks"):
        assert sum(getattr(s, name) for s in totals) > 0, name
