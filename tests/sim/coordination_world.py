"""A seeded simulation of coordination: several brokers on one in-memory metadata tree, each with a session
of its own, a ``LockManager`` over bundle locks and a ``LeaderElection``, while sessions expire, brokers die
and restart, locks are taken, updated and released, and keys are deleted behind the holders' backs.

The memory store's operations never suspend, so the only interleaving is between the brokers' background
tasks (revalidations, elections) and the operations; the seed decides which run before which (``advance``
lets a random number of loop turns pass). No threads, no sockets: a failing seed replays exactly.

Invariants, checked once every broker's background work is done (``settle``):

- a lock key that is stored belongs to an alive broker's current session, and that broker believes it holds
  it with the stored value; no other broker believes it holds that key;
- a broker that believes it holds a lock finds its key stored under its own session;
- with at least one alive candidate, exactly one broker leads, and the leader key names it; every other
  alive candidate follows it;
- a lock reported lost was taken by another session (or went with an expired one) after it was acquired.

Soak: ``.venv/bin/python -m tests.sim.coordination_world --seeds 10000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
from dataclasses import dataclass, field

from magnetar.metadata import MemoryMetadataStore
from magnetar.metadata.coordination import Ownership
from magnetar.metadata.election import ElectionState, LeaderElection
from magnetar.metadata.locks import LockBusy, LockManager, ResourceLock

BROKERS = 3
BUNDLES = 4
SETTLE_TIMEOUT_S = 10.0
SETTLE_ROUNDS_MAX = 50


@dataclass
class Stats:
    ops: int = 0
    acquired: int = 0
    busy: int = 0
    lost: int = 0
    expiries: int = 0
    deaths: int = 0
    leader_changes: int = 0


@dataclass
class Broker:
    name: str
    store: MemoryMetadataStore
    locks: LockManager
    election: LeaderElection
    lost: list[ResourceLock] = field(default_factory=list)
    alive: bool = True


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.root = MemoryMetadataStore()
        self.brokers: dict[str, Broker] = {}
        self.stats = Stats()

    async def start_broker(self, name: str) -> None:
        store = self.root.another_session()
        lost: list[ResourceLock] = []
        election = LeaderElection(store, name.encode(), on_change=self._leader_change)
        broker = Broker(name, store, LockManager(store, "/namespace", on_lost=lost.append), election, lost)
        self.brokers[name] = broker
        await election.start()

    def _leader_change(self, state: ElectionState) -> None:
        if state is ElectionState.LEADING:
            self.stats.leader_changes += 1

    def alive(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b.alive]

    async def step(self) -> None:
        self.stats.ops += 1
        brokers = self.alive()
        op = self.rng.choices(["acquire", "release", "update", "expire", "die", "restart", "delete", "advance"],
                              weights=[30, 10, 8, 8, 4, 4, 4, 20])[0]
        broker = self.rng.choice(brokers) if brokers else None
        key = f"/namespace/public/default/0x{self.rng.randrange(BUNDLES):08x}"
        if op == "restart" or broker is None:
            dead = [b for b in self.brokers.values() if not b.alive]
            if dead:
                await self.start_broker(self.rng.choice(dead).name)
        elif op == "acquire":
            try:
                await broker.locks.acquire(key, f"{broker.name}:{self.stats.ops}".encode())
                self.stats.acquired += 1
            except LockBusy:
                self.stats.busy += 1
        elif op == "release":
            held = broker.locks.locks
            if held:
                await held[self.rng.choice(sorted(held))].release()
        elif op == "update":
            held = broker.locks.locks
            if held:
                lock = held[self.rng.choice(sorted(held))]
                with contextlib.suppress(LockBusy):
                    await lock.update_value(f"{broker.name}:{self.stats.ops}".encode())
        elif op == "expire":
            self.stats.expiries += 1
            await broker.store.expire_session()
        elif op == "die":
            self.stats.deaths += 1
            broker.alive = False
            await broker.election.close()
            await broker.locks.close()
            await broker.store.close()
        elif op == "delete":  # an operator (or a bug) deletes a key behind its holder's back
            record = await self.root.get(key)
            if record is not None:
                await self.root.delete(key)
        for _ in range(self.rng.randrange(4) if op == "advance" else 0):
            await asyncio.sleep(0)  # a few loop turns: some background tasks run before the next operation

    async def settle(self) -> None:
        """Until no broker has background work left (bounded)."""
        for _ in range(SETTLE_ROUNDS_MAX):
            pending = [t for b in self.alive() for t in (b.election._task,) if t is not None and not t.done()]
            for b in self.alive():
                await b.locks.revalidations_done(SETTLE_TIMEOUT_S)
            if pending:
                await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), SETTLE_TIMEOUT_S)
            if not any(t is not None and not t.done() for b in self.alive() for t in (b.election._task,)) and all(
                    not [lk for lk in b.locks.locks.values() if lk._task is not None and not lk._task.done()]
                    for b in self.alive()):
                return
        raise AssertionError("background work did not settle")

    async def check(self) -> None:
        await self.settle()
        alive = self.alive()
        for bundle in range(BUNDLES):
            key = f"/namespace/public/default/0x{bundle:08x}"
            believers = [b for b in alive if key in b.locks.locks]
            found = await self.root.get_owned(key)
            assert len(believers) <= 1, f"{key}: {[b.name for b in believers]} all believe they hold it"
            if found is not None:
                record, _ = found
                owners = [b for b in alive if (await b.store.get_owned(key)) == (record, Ownership.THIS_SESSION)]
                assert len(owners) == 1, f"{key} is stored under no alive broker's session"
                assert believers == owners, f"{key}: held by {owners[0].name}, believed by {believers}"
                assert owners[0].locks.locks[key].value == record.value
            else:
                assert not believers, f"{key} is not stored, yet {believers[0].name} believes it holds it"
        leaders = [b for b in alive if b.election.state is ElectionState.LEADING]
        if alive:
            assert len(leaders) == 1, f"leaders: {[b.name for b in leaders]}"
            stored = await self.root.get("/loadbalance/leader")
            assert stored is not None and stored.value == leaders[0].name.encode()
            for b in alive:
                if b is not leaders[0]:
                    assert b.election.state is ElectionState.FOLLOWING and b.election.leader == stored.value


async def _run(seed: int, ops: int) -> World:
    world = World(seed)
    for i in range(BROKERS):
        await world.start_broker(f"broker-{i}")
    for _ in range(ops):
        await world.step()
        if world.rng.random() < 0.2:
            await world.check()
    await world.check()
    world.stats.lost = sum(len(b.lost) for b in world.brokers.values())
    for b in world.alive():
        await b.election.close()
        await b.locks.close()
        await b.store.close()
    return world


def run_seed(seed: int, ops: int) -> World:
    return asyncio.run(_run(seed, ops))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=300)
    args = parser.parse_args()
    for seed in range(args.start, args.start + args.seeds):
        try:
            run_seed(seed, args.ops)
        except AssertionError:
            print(f"seed {seed} failed: replay with --start {seed} --seeds 1 --ops {args.ops}")
            raise
    print(f"{args.seeds} seeds passed")


if __name__ == "__main__":
    main()
