"""A seeded simulation of bundle ownership with data: brokers on one in-memory metadata tree (a session each)
and one in-memory bucket (an object ledger store each, ledger ids from the metadata counter), running the real
``broker/cluster`` parts (membership, leader election, the leader's assignment, bundle locks, unload and
transfer with the destination's take, split) and writing topics' managed ledgers where the ownership says,
while brokers' sessions expire, brokers pause past their session (zombies that still hold open ledgers and go
on appending), die, restart and leave gracefully.

The memory stores never suspend on I/O and every sleep of the parts is a few event-loop turns, so the seed
alone decides the interleaving: a failing seed replays exactly.

Invariants, after every settle (among the brokers that are up and not paused):

- every bundle served by a broker is one of its namespace's current bundles, and no bundle is served twice;
- a served bundle's lock is stored under the serving broker's session, and every stored lock belongs to a
  broker that serves it;
- the registered brokers are the ones up; exactly one leads;
- a lookup from any broker reaches, within three redirects, the same broker for a topic, which serves it;
- a lookup never brings a bundle back to the broker that just transferred it while the destination serves
  (checked on every lookup, until a membership change makes a return fair);

and at the end, reading every topic from the bucket: every receipted append is there exactly once, in the
order of its receipts, whatever broker (zombie or not) receipted it; nothing is there that was not appended;
each topic's ledger ids ascend across the owners it had (the metadata counter) and no ledger is in two topics.

Soak: ``.venv/bin/python -m tests.sim.ownership_world --seeds 2000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass, field

from magnetar.broker.cluster.bundle_owner import HANDED_WAIT_MS, ClusterOwnership
from magnetar.broker.cluster.bundles import BundleRange, SplitAlgorithm, topic_hash
from magnetar.broker.cluster.keys import OWNERSHIP_ROOT, bundle_of_key
from magnetar.broker.cluster.members import Members
from magnetar.broker.cluster.moves import BundleMoves
from magnetar.broker.cluster.owned import bundle_name
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.cluster.records import BrokerReport, Load
from magnetar.broker.errors import BrokerError, ServiceNotReady
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, ManagedLedgerError
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.id_counter import MetadataLedgerIdAllocator
from magnetar.metadata import MemoryMetadataStore
from magnetar.metadata.api import MetadataError
from magnetar.metadata.coordination import Ownership
from magnetar.storage.api import StorageError
from magnetar.storage.objectstore.memory import MemoryBucket, MemoryObjectClient
from magnetar.storage.objectstore.settings import ObjectLedgerSettings
from magnetar.storage.objectstore.store import ObjectLedgerStore

BROKERS = 3
NS = NamespaceName("public", "default")
TOPICS = [TopicName.parse(f"persistent://public/default/t{i}") for i in range(10)]
BUNDLES_MAX = 12
REDIRECTS_MAX = 3  # the leader, the broker it chose, the destination that broker handed the bundle to
SETTLE_ROUNDS_MAX = 100
IDLE_TIMEOUT_S = 30.0
LEDGER_CONFIG = ManagedLedgerConfig(max_entries_per_ledger=7)


async def turns(delay_s: float = 0.0) -> None:
    """The simulation's sleep: a few loop turns, whatever the delay (no real time passes)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def turns_ms(delay_ms: float) -> None:
    await turns()


@dataclass
class Stats:
    ops: int = 0
    appends: int = 0
    fenced: int = 0
    zombie_appends: int = 0
    zombie_refused: int = 0
    unloads: int = 0
    splits: int = 0
    expiries: int = 0
    pauses: int = 0
    deaths: int = 0
    leaves: int = 0
    lookups_refused: int = 0
    handed_followed: int = 0  # lookups of a bundle handed away that reached a broker other than its source
    ledgers_per_topic_max: int = 0  # the most ledgers a topic was read back from (owners it had, roughly)


@dataclass
class SimBroker:
    name: str
    store: MemoryMetadataStore
    objects: ObjectLedgerStore
    ledgers: LedgerFactory
    members: Members
    ownership: ClusterOwnership
    moves: BundleMoves
    open: dict[str, ManagedLedger] = field(default_factory=dict)
    up: bool = True
    paused: bool = False

    @property
    def url(self) -> str:
        return f"pulsar://{self.name}:6650"

    async def ledger(self, topic: TopicName) -> ManagedLedger:
        found = self.open.get(str(topic))
        if found is None:
            found = await self.ledgers.open(topic.managed_ledger_name, LEDGER_CONFIG)
            self.open[str(topic)] = found
        return found

    async def close_topic(self, name: str) -> None:
        ledger = self.open.pop(name, None)
        if ledger is not None:
            with contextlib.suppress(ManagedLedgerError, StorageError, MetadataError):
                await ledger.close()


class Handoff:
    def __init__(self, world: World) -> None:
        self.world = world

    async def prepare(self, destination: BrokerReport, ns: NamespaceName, bundle: BundleRange) -> None:
        target = self.world.brokers.get(destination.broker_id.partition(":")[0])
        if target is None or not target.up or target.paused:
            raise ConnectionError(f"{destination.broker_id} does not answer")
        target.moves.take(ns, bundle)


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.root = MemoryMetadataStore(clock=self.clock)
        self.bucket = MemoryBucket()
        self.brokers: dict[str, SimBroker] = {}
        self.receipts: dict[str, list[bytes]] = {str(t): [] for t in TOPICS}
        self.attempted: set[bytes] = set()
        self.stats = Stats()
        self._seq = 0
        # bundle -> (source broker name, destination broker id, when): a transfer not followed by a lookup yet
        self.handed: dict[str, tuple[str, str, int]] = {}

    async def start_broker(self, name: str) -> SimBroker:
        store = self.root.another_session()
        objects = await ObjectLedgerStore.open(
            MemoryObjectClient(self.bucket), allocator=MetadataLedgerIdAllocator(store), clock=self.clock,
            settings=ObjectLedgerSettings(flush_max_delay_ms=0), sleep_ms=turns_ms, probe=False,
        )
        ledgers = LedgerFactory(objects, store, config=LEDGER_CONFIG, clock=self.clock, sleep_ms=turns_ms)
        members = Members(store, self.clock, report_interval_s=3600, sleep_s=turns)
        ownership = ClusterOwnership(store, members, self.clock)
        moves = BundleMoves(ownership, Handoff(self), take_wait_s=IDLE_TIMEOUT_S)
        broker = SimBroker(name, store, objects, ledgers, members, ownership, moves)
        members.load = lambda: Load(bundles=ownership.serving_names())

        async def close_bundle(ns: NamespaceName, bundle: BundleRange, assigned: BrokerUrls | None) -> None:
            for topic in [t for t in list(broker.open) if bundle.contains(topic_hash(t))]:
                await broker.close_topic(topic)

        ownership.close_bundle = close_bundle
        me = BrokerReport(f"{name}:8080", BrokerUrls(broker.url, None, f"http://{name}:8080", None),
                          start_ms=self.clock.now_ms())
        await members.start(me)
        self.brokers[name] = broker
        return broker

    def serving(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.up and not b.paused]

    def by_url(self, url: str) -> SimBroker | None:
        return next((b for b in self.serving() if b.url == url), None)

    # ---- operations ----------------------------------------------------------------------------------

    async def lookup(self, topic: TopicName, via: SimBroker) -> SimBroker | None:
        node: SimBroker | None = via
        authoritative = False
        for _ in range(REDIRECTS_MAX + 1):
            if node is None:
                return None
            placement = await node.ownership.find(topic, None, authoritative)
            assert placement.urls is not None and placement.urls.pulsar is not None
            if not placement.redirect:
                found = self.by_url(placement.urls.pulsar)
                if found is not None:
                    await self._check_not_back(topic, found)
                return found
            node, authoritative = self.by_url(placement.urls.pulsar), placement.authoritative
        raise AssertionError(f"{topic}: more than {REDIRECTS_MAX} redirects")

    async def _check_not_back(self, topic: TopicName, found: SimBroker) -> None:
        """A bundle transferred away never comes back to its source while its destination is serving (and
        the source's hand-over stands); membership changes in between clear the record (a return is fair)."""
        name = bundle_name(topic.namespace_name, await found.ownership.bundle_of(topic))
        record = self.handed.get(name)
        if record is None:
            return
        source, destination_id, at_ms = record
        destination = next((b for b in self.serving() if b.members.started and b.members.registered
                            and b.members.broker_id == destination_id), None)
        if found.name != source:
            del self.handed[name]
            self.stats.handed_followed += 1
        elif destination is not None and self.clock.now_ms() - at_ms <= HANDED_WAIT_MS:
            raise AssertionError(f"{name} went back to its source {source}, not to {destination_id}")

    async def produce(self, broker: SimBroker) -> None:
        topic = self.rng.choice(TOPICS)
        self._seq += 1
        payload = f"{topic.local_name}:{self._seq}".encode()
        zombie = broker.paused
        if zombie:  # a paused broker's ledgers stay open: appends it had queued go on when it runs again
            if str(topic) not in broker.open:
                return
            target: SimBroker | None = broker
        else:
            try:
                target = await self.lookup(topic, broker)
                if target is None:
                    return
                await target.ownership.check_owned(topic)
            except ServiceNotReady:
                self.stats.lookups_refused += 1
                return
        try:
            ledger = await target.ledger(topic)
            self.attempted.add(payload)
            await ledger.add_entry(payload)
        except (ManagedLedgerError, StorageError, MetadataError):
            self.stats.fenced += 1
            self.stats.zombie_refused += zombie
            await target.close_topic(str(topic))
            return
        self.receipts[str(topic)].append(payload)
        self.stats.appends += 1
        self.stats.zombie_appends += zombie

    async def unload(self, broker: SimBroker) -> None:
        owned = [o for o in broker.ownership.owned() if o.serving]
        if not owned:
            return
        chosen = self.rng.choice(owned)
        others = [b.members.broker_id for b in self.serving() if b is not broker and b.members.registered]
        destination = self.rng.choice([None, *others])
        with contextlib.suppress(BrokerError):
            moved_to = await broker.moves.unload(chosen.ns, chosen.range, destination=destination,
                                                 transfer=self.rng.random() < 0.8)
            self.stats.unloads += 1
            self.handed.pop(chosen.name, None)
            if moved_to is not None:
                self.handed[chosen.name] = (broker.name, moved_to, self.clock.now_ms())

    async def split(self, broker: SimBroker) -> None:
        owned = [o for o in broker.ownership.owned() if o.serving and o.range.upper - o.range.lower > 2]
        if not owned or len(await broker.ownership.bundles(NS, fresh=True)) >= BUNDLES_MAX:
            return
        chosen = self.rng.choice(owned)
        with contextlib.suppress(BrokerError):
            await broker.moves.split(chosen.ns, chosen.range, SplitAlgorithm.RANGE_EQUALLY_DIVIDE,
                                     unload=self.rng.random() < 0.3)
            self.stats.splits += 1

    async def step(self) -> None:
        self.stats.ops += 1
        self.clock.advance(self.rng.randrange(0, 500))
        serving = self.serving()
        op = self.rng.choices(
            ["produce", "zombie", "unload", "split", "expire", "pause", "resume", "die", "restart", "leave", "advance"],
            weights=[45, 6, 8, 3, 4, 3, 4, 2, 4, 2, 19])[0]
        paused = [b for b in self.brokers.values() if b.up and b.paused]
        down = [b for b in self.brokers.values() if not b.up]
        if op in ("expire", "pause", "resume", "die", "restart", "leave"):
            self.handed.clear()  # who may own what changes: a bundle may then fairly return to its source
        if op == "produce" and serving:
            await self.produce(self.rng.choice(serving))
        elif op == "zombie" and paused:
            await self.produce(self.rng.choice(paused))
        elif op == "unload" and serving:
            await self.unload(self.rng.choice(serving))
        elif op == "split" and serving:
            await self.split(self.rng.choice(serving))
        elif op == "expire" and serving:
            self.stats.expiries += 1
            await self.rng.choice(serving).store.expire_session()
        elif op == "pause" and len(serving) > 1:
            self.stats.pauses += 1
            broker = self.rng.choice(serving)
            broker.paused = True
            broker.store.suspend()
        elif op == "resume" and paused:
            broker = self.rng.choice(paused)
            broker.paused = False
            broker.store.resume()
        elif op == "die" and len(serving) > 1:
            self.stats.deaths += 1
            broker = self.rng.choice(serving)
            broker.up = False
            broker.store.suspend()  # its session ends; it never runs again
        elif op == "restart" and down:
            await self.start_broker(self.rng.choice(down).name)
        elif op == "leave" and len(serving) > 1:
            self.stats.leaves += 1
            await self._leave(self.rng.choice(serving))
        for _ in range(self.rng.randrange(6) if op == "advance" else 0):
            await asyncio.sleep(0)

    async def _leave(self, broker: SimBroker) -> None:
        await broker.members.unregister()
        await broker.moves.unload_all()
        await self._close(broker)
        broker.up = False

    async def _close(self, broker: SimBroker) -> None:
        for name in list(broker.open):
            await broker.close_topic(name)
        await broker.ownership.close()
        await broker.members.close()
        with contextlib.suppress(StorageError):
            await broker.objects.close()
        await broker.store.close()

    # ---- invariants ----------------------------------------------------------------------------------

    async def settle(self) -> None:
        for _ in range(SETTLE_ROUNDS_MAX):
            for b in self.serving():
                await b.ownership.idle(IDLE_TIMEOUT_S)
            for _ in range(10):
                await asyncio.sleep(0)
            busy = [b for b in self.serving() if b.members.report_pending or b.ownership.incoming
                    or (b.members.election is not None and b.members.election._task is not None
                        and not b.members.election._task.done())]
            if not busy:
                return
        raise AssertionError("background work did not settle")

    async def check(self) -> None:
        await self.settle()
        serving = self.serving()
        bundles = await self.root_bundles()
        believers: dict[str, SimBroker] = {}
        for b in serving:
            for owned in b.ownership.owned():
                if not owned.serving:
                    continue
                assert bundles.has(owned.range), f"{b.name} serves {owned.name}, not a bundle any more"
                assert owned.name not in believers, f"{owned.name}: {believers[owned.name].name} and {b.name}"
                believers[owned.name] = b
                assert owned.lock is not None
                found = await b.store.get_owned(owned.lock.key)
                assert found is not None and found[1] is Ownership.THIS_SESSION, f"{b.name}: {owned.name} unlocked"
        for key in await self._lock_keys():
            parsed = bundle_of_key(key)
            assert parsed is not None
            holder = believers.get(bundle_name(*parsed))
            assert holder is not None, f"{key} is locked, yet no broker serves it"
        registered = sorted(await self.root.children("/loadbalance/brokers"))
        assert registered == sorted(b.members.broker_id for b in serving), registered
        leaders = [b for b in serving if b.members.leading]
        assert len(leaders) == (1 if serving else 0), f"leaders: {[b.name for b in leaders]}"
        for topic in self.rng.sample(TOPICS, 3):
            answers = set()
            for b in serving:
                try:
                    found = await self.lookup(topic, b)
                except ServiceNotReady:
                    continue
                answers.add(found.name if found is not None else None)
            assert len(answers) <= 1, f"{topic}: lookups disagree: {answers}"
        await self.settle()

    async def root_bundles(self):  # type: ignore[no-untyped-def]
        from magnetar.broker.cluster.keys import ClusterKeys

        return (await ClusterKeys(self.root, 4).bundles(NS)).bundles

    async def _lock_keys(self) -> list[str]:
        base = f"{OWNERSHIP_ROOT}/{NS.tenant}/{NS.namespace}"
        return [f"{base}/{name}" for name in await self.root.children(base) if await self.root.exists(f"{base}/{name}")]

    async def check_data(self) -> None:
        """Every topic read from the bucket by a fresh reader: the receipted appends, once, in receipt order."""
        objects = await ObjectLedgerStore.open(MemoryObjectClient(self.bucket), clock=self.clock, probe=False,
                                               allocator=MetadataLedgerIdAllocator(self.root))
        factory = LedgerFactory(objects, self.root, config=LEDGER_CONFIG, clock=self.clock)
        ledger_topics: dict[int, TopicName] = {}
        for topic in TOPICS:
            if not await factory.exists(topic.managed_ledger_name):
                assert not self.receipts[str(topic)], f"{topic}: receipted appends, no ledger"
                continue
            ledger = await factory.open(topic.managed_ledger_name, LEDGER_CONFIG)
            ids = [summary.ledger_id for summary in ledger.ledgers()]
            self.stats.ledgers_per_topic_max = max(self.stats.ledgers_per_topic_max, len(ids))
            assert ids == sorted(set(ids)), f"{topic}: its ledger ids do not ascend across owners: {ids}"
            for ledger_id in ids:
                assert ledger_topics.setdefault(ledger_id, topic) == topic, f"ledger {ledger_id} in two topics"
            cursor = ledger.new_non_durable_cursor(ledger.first_position(), "check")
            stored: list[bytes] = []
            for _ in range(100_000):
                entries = await cursor.read_entries(100)
                if not entries:
                    break
                stored += [bytes(e.data) for e in entries]
            await ledger.close()
            assert len(stored) == len(set(stored)), f"{topic}: an entry is stored twice"
            assert set(stored) <= self.attempted, f"{topic}: stored entries nobody appended"
            receipted = self.receipts[str(topic)]
            kept = [p for p in stored if p in set(receipted)]
            assert kept == receipted, f"{topic}: receipted {receipted} but the topic holds {stored}"
        await factory.close()
        await objects.close()


async def _run(seed: int, ops: int) -> World:
    world = World(seed)
    for i in range(BROKERS):
        await world.start_broker(f"b{i}")
    for _ in range(ops):
        await world.step()
        if world.rng.random() < 0.1:
            await world.check()
    for broker in world.brokers.values():  # everyone back: the zombies find out and let go
        if broker.up and broker.paused:
            broker.paused = False
            broker.store.resume()
    await world.check()
    for broker in list(world.brokers.values()):
        if broker.up:
            await world._close(broker)
    await world.check_data()
    return world


def run_seed(seed: int, ops: int) -> World:
    return asyncio.run(_run(seed, ops))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument("--ops", type=int, default=300)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    for seed in range(args.start, args.start + args.seeds):
        try:
            run_seed(seed, args.ops)
        except AssertionError:
            print(f"seed {seed} failed: replay with --start {seed} --seeds 1 --ops {args.ops}")
            raise
    print(f"{args.seeds} seeds passed")


if __name__ == "__main__":
    main()
