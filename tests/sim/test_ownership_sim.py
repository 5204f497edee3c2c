"""CI's fixed seed set for the ownership simulator (``tests/sim/ownership_world.py``; soaks:
``.venv/bin/python -m tests.sim.ownership_world --seeds 2000``)."""

from __future__ import annotations

import logging

import pytest

from magnetar.broker.cluster.bundle_owner import ClusterOwnership
from magnetar.broker.cluster.bundles import BundleRange
from magnetar.broker.cluster.records import BrokerReport
from magnetar.broker.names import NamespaceName
from tests.sim.ownership_world import run_seed

CI_SEEDS = range(60)
CI_OPS = 300


@pytest.fixture(autouse=True)
def quiet() -> None:
    for name in ("magnetar.metadata", "magnetar.cluster", "magnetar.ledger", "magnetar.storage"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seed_keeps_one_owner_per_bundle_agreeing_lookups_and_every_receipt(seed: int) -> None:
    assert run_seed(seed, CI_OPS).stats.ops == CI_OPS


def test_the_ci_seeds_exercise_moves_failures_and_zombies() -> None:
    worlds = [run_seed(seed, CI_OPS) for seed in range(20)]
    total = {name: sum(getattr(w.stats, name) for w in worlds) for name in vars(worlds[0].stats)}
    assert total["appends"] > 1000 and total["unloads"] > 100 and total["splits"] > 50
    assert total["expiries"] > 50 and total["pauses"] > 30 and total["deaths"] > 10 and total["leaves"] > 10
    assert total["zombie_refused"] > 5, "paused owners' appends after a takeover are refused by the fence"
    assert total["zombie_appends"] > 0, "a paused owner's append before any takeover stands"
    assert max(w.stats.ledgers_per_topic_max for w in worlds) >= 3, "topics moved: ledger ids ascend across owners"
    assert total["handed_followed"] > 20, "lookups after transfers reached the destination, not the source"


def test_the_simulator_catches_an_owner_that_keeps_a_bundle_a_split_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    async def keeps_it(self: ClusterOwnership, namespaces: set[NamespaceName]) -> None:
        return None

    monkeypatch.setattr(ClusterOwnership, "_drop_replaced", keeps_it)
    with pytest.raises(AssertionError, match=r"not a bundle any more|lookups disagree|serves it"):
        for seed in range(100):
            run_seed(seed, CI_OPS)


def test_the_simulator_catches_a_transferred_bundle_going_back_to_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    def forgets(self: ClusterOwnership, ns: NamespaceName, bundle: BundleRange, destination: BrokerReport) -> None:
        return None

    monkeypatch.setattr(ClusterOwnership, "hand_over", forgets)
    with pytest.raises(AssertionError, match="went back to its source"):
        for seed in range(100):
            run_seed(seed, CI_OPS)
