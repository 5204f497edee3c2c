"""The replicated-subscriptions (PIP-33) simulator: the real snapshot controller of each cluster
(``broker/replicated_subscriptions``) driven over in-memory clusters by seeded random steps.

Each cluster has a durable log and a subscription cursor; each ordered pair of clusters has a replication
link (a FIFO of entries not yet copied, as the replicator's cursor holds them). One step does one of:
publish a message in a cluster; copy one entry over one link (links advance independently, so entries from
different clusters interleave in every order and any link can lag arbitrarily: delays and reordering);
tick a cluster's snapshot timer (the clock moves, so snapshots also time out); the consumer acknowledges
(cumulatively, or individually with holes) in the cluster it is attached to; the consumer fails over to
another cluster; a cluster crashes (its controller's memory is lost, its links stop, everything it stored
stays) or comes back.

Invariant, after every step: in every cluster, the subscription's mark-delete position never passes a
data message the consumer has not acknowledged (in any cluster), and never moves back.

Run it: ``.venv/bin/python -m tests.sim.repl_sub_world --seeds 1000 --ops 400`` (``--seed N --trace``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.replication.replicator import replicated_entry, should_replicate
from magnetar.broker.replication.subscriptions.controller import TopicController, Totals
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import InitialPosition, Position

SUB = "s"
LEDGER = 1


class SimCursor:
    """A cursor over a cluster's log: individually acked positions and the contiguous mark-delete."""

    def __init__(self, log: list[Entry]) -> None:
        self._log = log
        self.acked: set[int] = set()
        self.mark_delete = -1
        self.properties: dict[str, int] = {}

    @property
    def mark_delete_position(self) -> Position:
        return Position(LEDGER, self.mark_delete)

    def _advance(self) -> None:
        while self.mark_delete + 1 < len(self._log) and (
                self.mark_delete + 1 in self.acked or self._log[self.mark_delete + 1].marker):
            self.mark_delete += 1  # markers are acknowledged by the dispatcher as it skips them

    def acknowledge(self, index: int) -> None:
        self.acked.add(index)
        self._advance()

    def is_acknowledged(self, position: Position) -> bool:
        return position.entry_id <= self.mark_delete or position.entry_id in self.acked

    def acknowledge_cumulative(self, position: Position) -> None:
        assert position.entry_id >= self.mark_delete, "a mark-delete never moves back"
        self.mark_delete = position.entry_id
        self._advance()

    async def set_properties(self, updates: Mapping[str, int]) -> None:
        self.properties.update(updates)


class SimSubscription:
    def __init__(self, name: str, cursor: SimCursor) -> None:
        self.name, self.cursor = name, cursor
        self.durable, self.replicated = True, False
        self.on_mark_delete: Any = None

    def new_entries(self) -> None:
        pass


@dataclass
class Entry:
    data: bytes
    metadata: proto.pb.MessageMetadata
    message: str | None  # the data message's global name; None for a marker

    @property
    def marker(self) -> bool:
        return self.message is None


@dataclass
class Replicator:
    connected: bool = True


class SimLedger:
    def __init__(self, log: list[Entry]) -> None:
        self._log = log

    @property
    def last_confirmed(self) -> Position:
        return Position(LEDGER, len(self._log) - 1)

    async def open_cursor(self, name: str, initial: InitialPosition) -> SimCursor:
        return SimCursor(self._log)


class Cluster:
    """A topic in one cluster: what the controller sees of a PersistentTopic."""

    def __init__(self, name: str, world: World) -> None:
        self.name, self.world = name, world
        self.log: list[Entry] = []
        self.ledger = SimLedger(self.log)
        self.subscriptions: dict[str, SimSubscription] = {}
        self.replicators: dict[str, Replicator] = {}
        self.msg_in_counter = 0
        self.up = True
        self.closed = False
        self.controller = self._new_controller()

    def _new_controller(self) -> TopicController:
        return TopicController(self, local_cluster=self.name, publish=self.world.publish,  # type: ignore[arg-type]
                               clock=self.world.clock, totals=self.world.totals, timeout_s=5.0, max_cached=4)

    def add_durable_subscription(self, name: str, cursor: SimCursor) -> SimSubscription:
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = SimSubscription(name, cursor)
        return sub

    def append(self, entry: Entry) -> Position:
        self.log.append(entry)
        return Position(LEDGER, len(self.log) - 1)

    def restart(self) -> None:
        """The controller's memory is gone; the log and the cursor (with its property) stay."""
        self.controller = self._new_controller()
        sub = self.subscriptions.get(SUB)
        if sub is not None and sub.cursor.properties.get("pulsar.replicated.subscription"):
            self.controller.attach(sub)  # type: ignore[arg-type]


@dataclass
class SimStats:
    ops: int = 0
    published: int = 0
    copied: int = 0
    acks: int = 0
    failovers: int = 0
    crashes: int = 0
    updates_applied: int = 0


@dataclass
class World:
    seed: int
    names: tuple[str, ...]
    clock: ManualClock = field(default_factory=ManualClock)
    totals: Totals = field(default_factory=Totals)
    stats: SimStats = field(default_factory=SimStats)
    trace: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.clusters = {n: Cluster(n, self) for n in self.names}
        self.links: dict[tuple[str, str], deque[Entry]] = {
            (x, y): deque() for x in self.names for y in self.names if x != y}
        for c in self.clusters.values():
            c.replicators = {y: Replicator() for y in self.names if y != c.name}
        self.consumer_at = self.names[0]
        self.acked: set[str] = set()  # data messages the consumer acknowledged, anywhere
        self.mark_deletes = {n: -1 for n in self.names}
        self._counter = 0

    # ---- the plumbing the controller writes through --------------------------------------------------

    async def publish(self, topic: Cluster, data: bytes) -> Position:
        assert topic.up, "a crashed cluster writes nothing"
        metadata = proto.parse_entry_metadata(data)
        return self._store(topic, Entry(data, metadata, None))

    def _store(self, cluster: Cluster, entry: Entry) -> Position:
        position = cluster.append(entry)
        if not entry.metadata.replicated_from:
            for y in self.names:
                if y != cluster.name and should_replicate(entry.metadata, y):
                    self.links[(cluster.name, y)].append(entry)
        return position

    async def settle(self) -> None:
        for _ in range(100):  # marker writes spawn further writes; bounded
            tasks = [t for c in self.clusters.values() for t in c.controller._tasks]
            if not tasks:
                return
            await asyncio.gather(*tasks)
        raise AssertionError("marker writes never settled")

    # ---- steps ---------------------------------------------------------------------------------------

    def _up(self) -> list[Cluster]:
        return [c for c in self.clusters.values() if c.up]

    def step_publish(self) -> None:
        cluster = self.rng.choice(self._up())
        self._counter += 1
        name = f"{cluster.name}{self._counter}"
        metadata = proto.pb.MessageMetadata(producer_name="p", sequence_id=self._counter,
                                            publish_time=self.clock.now_ms())
        self._store(cluster, Entry(proto.make_entry(metadata, name.encode()), metadata, name))
        cluster.msg_in_counter += 1
        self.stats.published += 1
        self.trace.append(f"publish {name}")

    def step_copy(self) -> None:
        ready = [k for k, q in self.links.items() if q and self.clusters[k[0]].up and self.clusters[k[1]].up]
        if not ready:
            return
        x, y = self.rng.choice(ready)
        entry = self.links[(x, y)].popleft()
        copy = replicated_entry(entry.data, entry.metadata, x)
        metadata = proto.parse_entry_metadata(copy)
        target = self.clusters[y]
        position = target.append(Entry(copy, metadata, entry.message))
        target.msg_in_counter += 1
        if metadata.HasField("marker_type"):
            target.controller.marker_stored(position, metadata, copy)
        self.stats.copied += 1
        self.trace.append(f"copy {x}->{y} {entry.message or metadata.marker_type}")

    def step_tick(self) -> None:
        self.clock.advance(self.rng.choice((10, 100, 1000)))
        cluster = self.rng.choice(self._up())
        for y, replicator in cluster.replicators.items():
            replicator.connected = self.clusters[y].up
        cluster.controller.tick()
        self.trace.append(f"tick {cluster.name}")

    async def step_ack(self) -> None:
        cluster = self.clusters[self.consumer_at]
        sub = cluster.subscriptions.get(SUB)
        if sub is None or not cluster.up:
            return
        cursor = sub.cursor
        unacked = [i for i in range(cursor.mark_delete + 1, len(cluster.log))
                   if not cluster.log[i].marker and i not in cursor.acked][:8]
        if not unacked:
            return
        if self.rng.random() < 0.5:  # cumulative up to one of the next messages
            chosen = unacked[: self.rng.randint(1, len(unacked))]
        else:  # individual acks: holes
            chosen = [i for i in unacked if self.rng.random() < 0.5]
        before = cursor.mark_delete
        for i in chosen:
            message = cluster.log[i].message
            assert message is not None
            self.acked.add(message)
            cursor.acknowledge(i)
        self.stats.acks += len(chosen)
        if cursor.mark_delete != before and sub.on_mark_delete is not None:
            sub.on_mark_delete(sub)
        self.trace.append(f"ack in {cluster.name} {chosen}")

    async def subscribe(self, cluster: Cluster) -> None:
        sub = cluster.subscriptions.get(SUB)
        if sub is None:
            sub = SimSubscription(SUB, await cluster.ledger.open_cursor(SUB, InitialPosition.EARLIEST))
            cluster.subscriptions[SUB] = sub
        if not sub.replicated:
            await sub.cursor.set_properties({"pulsar.replicated.subscription": 1})
            cluster.controller.attach(sub)  # type: ignore[arg-type]

    async def step_failover(self) -> None:
        target = self.rng.choice([c for c in self._up() if c.name != self.consumer_at] or self._up())
        self.consumer_at = target.name
        await self.subscribe(target)
        self.stats.failovers += 1
        self.trace.append(f"failover to {target.name}")

    def step_crash_or_restart(self) -> None:
        down = [c for c in self.clusters.values() if not c.up]
        if down and self.rng.random() < 0.7:
            cluster = self.rng.choice(down)
            cluster.up = True
            cluster.restart()
            self.trace.append(f"restart {cluster.name}")
        elif len(self._up()) > 1:
            cluster = self.rng.choice([c for c in self._up() if c.name != self.consumer_at])
            cluster.up = False
            self.stats.crashes += 1
            self.trace.append(f"crash {cluster.name}")

    # ---- invariants ----------------------------------------------------------------------------------

    def check(self) -> None:
        for cluster in self.clusters.values():
            sub = cluster.subscriptions.get(SUB)
            if sub is None:
                continue
            md = sub.cursor.mark_delete
            assert md >= self.mark_deletes[cluster.name], f"{cluster.name}: mark-delete moved back"
            if md > self.mark_deletes[cluster.name] and self.consumer_at != cluster.name:
                self.stats.updates_applied += 1
            self.mark_deletes[cluster.name] = md
            for entry in cluster.log[: md + 1]:
                assert entry.marker or entry.message in self.acked, (
                    f"seed {self.seed}: {cluster.name}'s subscription passed {entry.message}, never acknowledged")

    async def run(self, ops: int) -> None:
        await self.subscribe(self.clusters[self.consumer_at])
        steps = (
            (20, self.step_publish), (60, self.step_copy), (10, self.step_tick), (12, self.step_ack),
            (2, self.step_failover), (2, self.step_crash_or_restart),
        )
        weights = [w for w, _ in steps]
        for _ in range(ops):
            _, step = self.rng.choices(steps, weights)[0]
            result = step()
            if asyncio.iscoroutine(result):
                await result
            await self.settle()
            self.check()
            self.stats.ops += 1


def run_seed(seed: int, ops: int) -> World:
    rng = random.Random(seed)
    world = World(seed, ("a", "b", "c")[: rng.choice((2, 3, 3))])
    asyncio.run(world.run(ops))
    return world


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.seeds)
    for seed in seeds:
        world = run_seed(seed, args.ops)
        if args.trace:
            print("\n".join(world.trace))
    print(f"{len(seeds)} seeds, {args.ops} ops each: every invariant held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
