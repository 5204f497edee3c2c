"""CI's fixed seed set for the coordination simulator (``tests/sim/coordination_world.py``; soaks:
``.venv/bin/python -m tests.sim.coordination_world --seeds 10000``)."""

from __future__ import annotations

import logging

import pytest

from magnetar.metadata.coordination import Ownership
from magnetar.metadata.locks import LockManager, ResourceLock
from tests.sim.coordination_world import run_seed

CI_SEEDS = range(150)
CI_OPS = 300


@pytest.fixture(autouse=True)
def quiet() -> None:
    logging.getLogger("magnetar.metadata").setLevel(logging.ERROR)


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seed_keeps_one_believer_per_lock_and_one_leader(seed: int) -> None:
    assert run_seed(seed, CI_OPS).stats.ops == CI_OPS


def test_the_ci_seeds_exercise_expiries_deaths_losses_and_failovers() -> None:
    worlds = [run_seed(seed, CI_OPS) for seed in range(20)]
    assert sum(w.stats.expiries for w in worlds) > 20 and sum(w.stats.deaths for w in worlds) > 5
    assert sum(w.stats.lost for w in worlds) > 5, "locks are lost to other sessions"
    assert sum(w.stats.busy for w in worlds) > 20
    assert sum(w.stats.leader_changes for w in worlds) > 40


def test_the_simulator_catches_a_lock_that_ignores_another_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A revalidation that keeps a lock whose key another session holds must be found."""
    real = LockManager._judge

    async def keeps_believing(self: LockManager, lock: ResourceLock) -> bool:
        found = await self.store.get_owned(lock.key)
        if found is not None and found[1] is Ownership.OTHER_SESSION and found[0].value != lock.value:
            return True
        return await real(self, lock)

    monkeypatch.setattr(LockManager, "_judge", keeps_believing)
    with pytest.raises(AssertionError, match="believe"):
        for seed in range(300):
            run_seed(seed, CI_OPS)
