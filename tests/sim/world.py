"""The seeded durability simulator (tigerbeetle's VOPR idea, at magnetar's storage stack).

One seed drives everything: the operation sequence, the fault plans, how long each append waits for its
sync, which unsynced writes a crash keeps. The world is the managed-ledger stack the broker runs on
(``LedgerFactory`` + managed ledgers + durable cursors) over a :class:`CrashableLedgerStore` (a disk
whose unsynced writes a crash drops) wrapped in :class:`FaultyLedgerStore`, and an in-memory metadata store
(every completed write survives, as SQLite's do under SIGKILL) wrapped in :class:`FaultyMetadataStore`.
Time is a :class:`ManualClock`; cursor-persistence timers fire only when the simulator advances it. No
threads and no sockets, so a seed replays exactly (the trace digest proves it).

Operations: produce (several adds in flight at once), consume, ack (individual, cumulative, batch-index),
flush, advance time, trim (with a random retention), arm/disarm storage or metadata faults (fail after N
operations, fail at random), open a cursor, graceful restart, crash (at any moment: adds may be in
flight). After every restart and crash the invariants are checked (:meth:`Simulation.check_recovered`):

* every receipted entry is readable exactly once, at its receipted position, in send order, unless it was
  trimmed after every cursor acknowledged it; a failed add never appears; nothing unknown appears;
* every ledger the managed-ledger record references exists in storage, unless its local copy was released
  after a complete offload; every complete offloaded copy verifies (offload/release run in the background
  over an in-memory object store with its own faults, so crashes cut them anywhere);
* a consumer read of an offloaded ledger that the object store fails (read faults while consuming) moves
  nothing: the cursor's read position stays, so after the store heals the same entries are read, in order;
  the failure shows in the managed ledger's read health, and a good read from the store clears it;
* each recovered cursor equals its durable record; that record acknowledges nothing the simulation did
  not acknowledge (no phantom ack: that would lose data), and holds every ack older than the persistence
  window (``cursor_persist_interval_ms``) unless a metadata fault happened since, and every ack a
  successful ``flush`` covered. After a graceful restart a cursor must come back exactly as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import heapq
import itertools
import logging
import random
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.broker.compaction.state import referenced_ledgers
from magnetar.broker.deletion.audit import audit
from magnetar.broker.deletion.config import DeletionConfig
from magnetar.broker.deletion.service import LedgerDeletionService, OffloadStoreDeleter
from magnetar.core.clock import ManualClock
from magnetar.core.faults import FaultPlan as BlobFaultPlan
from magnetar.ledger.api import (
    Entry,
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    OffloadReadError,
    Position,
    RetentionPolicy,
)
from magnetar.ledger.cursor import ManagedCursor
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.formats import CursorRecord, cursor_key, decode_cursor, decode_ledger, ledger_key
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.ledger.states import LedgerState
from magnetar.metadata.faulty import FaultyMetadataStore, MetadataFaultPlan
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import LedgerStore, StorageError
from magnetar.storage.faulty import CrashableLedgerStore, FaultPlan, FaultyLedgerStore, SimDisk
from magnetar.storage.offload import BlockOffloadStore, OffloadSettings
from magnetar.storage.offload import memory as blob_memory

log = logging.getLogger("magnetar.sim")

TOPICS = ("sim/ns/persistent/t0", "sim/ns/persistent/t1")
CURSOR_NAMES = ("s0", "s1")
BATCH_SIZE = 4  # every entry is treated as a batch of this many messages for batch-index acks
PERSIST_INTERVAL_MS = 100
SETTLE_TURNS = 40  # event-loop turns after a time advance: enough for timers' writes to finish
OPEN_ATTEMPTS_WITH_FAULTS = 3
SCAN_ROUNDS_MAX = 100_000
ALL_BITS = (1 << BATCH_SIZE) - 1
BEFORE_ALL = Position(-1, -1)

Op = Callable[[], Coroutine[Any, Any, None]]



async def let_turns_pass(turns: int) -> None:
    """Give the event loop ``turns`` turns. Part of the simulated schedule (which interleavings happen
    is drawn from the seed), not a wait for a condition: no time passes, the manual clock stands still."""
    for _ in range(turns):  # bounded by the caller's small count
        await asyncio.sleep(0)

class InvariantViolation(AssertionError):
    """A durability invariant failed; the message names the seed, the step and what broke."""


class SeedTrace:
    """What every simulator shares: ``note`` one trace line per step, ``fail`` naming the seed and the last
    steps, ``digest`` of the whole trace (a replay must give the same)."""

    FAIL_LABEL = "seed"
    FAIL_TAIL_STEPS = 25
    seed: int
    step: int
    trace: list[str]
    clock: ManualClock

    def note(self, text: str) -> None:
        self.trace.append(f"{self.step}@{self.clock.now_ms()}: {text}")

    def fail(self, what: str) -> InvariantViolation:
        tail = "\n".join(self.trace[-self.FAIL_TAIL_STEPS:])
        return InvariantViolation(f"{self.FAIL_LABEL} {self.seed}, step {self.step}: {what}\nlast steps:\n{tail}")

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()[:16]


class SeededRun(Protocol):
    trace: list[str]

    async def run(self) -> object: ...

    def digest(self) -> str: ...


def seed_main(argv: list[str] | None, make: Callable[[int, int], SeededRun], *, module: str, default_ops: int,
              doc: str | None) -> int:
    """A simulator's command line: run seeds until one breaks an invariant (then print how to replay it)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=default_ops)
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    for seed in seeds:  # bounded by --seeds
        sim = make(seed, args.ops)
        try:
            stats = asyncio.run(sim.run())
        except InvariantViolation as exc:
            print(exc)
            print(f"replay: .venv/bin/python -m {module} --seed {seed} --ops {args.ops} --trace")
            return 1
        finally:
            if args.trace:
                print("\n".join(sim.trace))
        if args.seed is not None:
            print(f"seed {seed}: ok, digest {sim.digest()}, {stats}")
    print(f"{len(seeds)} seeds ok")
    return 0


class Timers:
    """``sleep_ms`` on the manual clock: sleepers wake when the simulator advances time past their deadline."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()
        self._dead = False

    async def sleep_ms(self, delay_ms: int) -> None:
        if self._dead:  # a task of a crashed process: it never runs again
            raise asyncio.CancelledError
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._clock.monotonic_ms() + delay_ms, next(self._counter), future))
        await future

    def fire_due(self) -> None:
        now = self._clock.monotonic_ms()
        while self._sleepers and self._sleepers[0][0] <= now:  # bounded: each turn pops one
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def cancel_all(self) -> None:
        """The process died (or stopped): its sleeping tasks never wake, and none sleeps again."""
        self._dead = True
        for _, _, future in self._sleepers:
            future.cancel()
        self._sleepers.clear()


@dataclass
class CursorModel:
    """What the simulation did to one cursor since it was (re)loaded."""

    cumulative: Position = BEFORE_ALL
    individual: set[Position] = field(default_factory=set)
    partial: dict[Position, int] = field(default_factory=dict)  # position -> bits still unacked
    ack_log: list[tuple[int, Position]] = field(default_factory=list)  # (time_ms, position fully acked)
    flushed_upto: int = 0  # ack_log[:flushed_upto] is covered by a successful flush
    delivered: list[Position] = field(default_factory=list)

    def acked(self, position: Position) -> bool:
        return position <= self.cumulative or position in self.individual


@dataclass
class TopicModel:
    name: str
    index: int
    next_seq: int = 0
    receipted: dict[int, Position] = field(default_factory=dict)  # seq -> position
    maybe: set[int] = field(default_factory=set)  # in flight at a crash: stored at most once
    failed: set[int] = field(default_factory=set)  # failed in a live world: never stored
    trimmed_ledgers: set[int] = field(default_factory=set)
    cursors: dict[str, CursorModel] = field(default_factory=dict)

    def payload(self, seq: int) -> bytes:
        return f"{self.index}:{seq}".encode()


@dataclass
class Stats:
    ops: int = 0
    crashes: int = 0
    restarts: int = 0
    adds_receipted: int = 0
    adds_failed: int = 0
    acks: int = 0
    trimmed_ledgers: int = 0
    storage_faults: int = 0
    metadata_faults: int = 0
    dropped_unsynced: int = 0
    orphan_ledgers: int = 0
    audited_orphans: int = 0  # orphans the audit found (one-phase seeds; two-phase seeds fail on any)
    offloads: int = 0
    releases: int = 0
    offload_faults: int = 0
    offload_reads: int = 0  # consumer reads served by the object store (released ledgers)
    offload_read_faults: int = 0  # consumer reads of offloaded ledgers the object store failed
    failed_syncs: int = 0  # EIO on fsync: the unsynced writes cut off, the ledger closed to appends


class Simulation(SeedTrace):
    def __init__(self, seed: int, ops: int) -> None:
        self.seed = seed
        self.ops_total = ops
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.timers = Timers(self.clock)
        self.disk = SimDisk(random.Random(self.rng.getrandbits(64)))
        self.meta_inner = MemoryMetadataStore(clock=self.clock)
        self.storage_plan = FaultPlan(random.Random(self.rng.getrandbits(64)))
        self.meta_plan = MetadataFaultPlan(random.Random(self.rng.getrandbits(64)))
        self.config = ManagedLedgerConfig(
            max_entries_per_ledger=self.rng.choice([2, 3, 5, 8, 50]),
            max_ledger_rollover_time_ms=self.rng.choice([300, 1000, 60_000]),
            cursor_persist_interval_ms=PERSIST_INTERVAL_MS,
        )
        self.topics = [TopicModel(name, i) for i, name in enumerate(TOPICS)]
        self.stats = Stats()
        self.trace: list[str] = []
        self.step = 0
        self.world = 0
        self.last_meta_fault_ms = -(10**12)
        self.inflight: set[asyncio.Task[None]] = set()
        self.store: FaultyLedgerStore | None = None
        self.meta: FaultyMetadataStore | None = None
        self.factory: LedgerFactory | None = None
        self.ledgers: dict[str, ManagedLedgerImpl] = {}
        self.crash_records: dict[tuple[str, str], CursorRecord] = {}
        # tiered storage: an object store that outlives every crash, with its own faults
        self.offload_plan = BlobFaultPlan(random.Random(self.rng.getrandbits(64)), ops=blob_memory.OPS)
        self.blobs = blob_memory.MemoryBlobStore(self.offload_plan)
        uuids = random.Random(self.rng.getrandbits(64))
        self.new_uuid = lambda: str(uuid.UUID(int=uuids.getrandbits(128), version=4))
        # PIP-186: half the seeds drop ledgers in two phases (the rest keep the one-phase path and count orphans)
        self.two_phase = random.Random(seed ^ 0x186).random() < 0.5
        self.deletion: LedgerDeletionService | None = None
        self.offload_settings = OffloadSettings(
            driver="memory", max_block_size_bytes=self.rng.choice([64, 200, 4096]),
            read_buffer_size_bytes=self.rng.choice([16, 1024]), read_cache_size_bytes=self.rng.choice([0, 2048]),
        )

    # ---- driver ------------------------------------------------------------------------------------------------

    async def run(self) -> Stats:
        await self.boot(check=False)
        operations: list[tuple[int, Op]] = [
            (25, self.op_produce), (20, self.op_consume), (25, self.op_ack), (12, self.op_advance),
            (3, self.op_flush), (5, self.op_trim), (4, self.op_faults), (1, self.op_open_cursor),
            (1, self.op_restart), (2, self.op_crash), (3, self.op_offload), (2, self.op_release),
        ]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.stats.ops += 1
            self.count_faults()
            await let_turns_pass(self.rng.randint(0, 3))
        self.step += 1
        await self.op_crash()
        self.timers.cancel_all()
        return self.stats

    def count_faults(self) -> None:
        meta = self.meta_plan.injected
        if meta > self.stats.metadata_faults:
            self.last_meta_fault_ms = self.clock.now_ms()
        self.stats.metadata_faults = meta
        self.stats.storage_faults = self.storage_plan.injected
        self.stats.failed_syncs = self.disk.failed_syncs
        self.stats.offload_faults = self.offload_plan.injected

    # ---- worlds (one per process lifetime) -------------------------------------------------------------------

    async def boot(self, *, check: bool) -> None:
        self.world += 1
        self.timers = Timers(self.clock)
        self.store = FaultyLedgerStore(await self.open_store(), self.storage_plan)
        self.meta = FaultyMetadataStore(self.meta_inner, self.meta_plan)
        self.offload_store = BlockOffloadStore(self.blobs, self.offload_settings, new_uuid=self.new_uuid)  # cold
        self.factory = LedgerFactory(
            self.store, self.meta, config=self.config, clock=self.clock, sleep_ms=self.timers.sleep_ms,
            offload_store=self.offload_store,
        )
        self.ledgers = {}
        if self.two_phase:
            await self.start_deletion()
        for topic in self.topics:
            self.ledgers[topic.name] = await self.open_ledger(topic.name)
        self.count_faults()
        self.storage_plan.disarm()  # the disk has room again, the metadata store answers
        self.meta_plan.disarm()
        self.offload_plan.disarm()
        if self.deletion is not None:
            await self.deletion.reclaim_orphans(self.meta_inner)  # what a crash left created but unrecorded
        if check:
            await self.check_recovered()
        for topic in self.topics:
            for name in CURSOR_NAMES:
                await self.ensure_cursor(topic, name)

    async def open_store(self) -> LedgerStore:
        """This process's ledger store, on what outlives it (a subclass puts ledgers in an object store)."""
        return CrashableLedgerStore(self.disk, clock=self.clock, sync_faults=self.storage_plan)

    def add_surely_failed(self, exc: ManagedLedgerError) -> bool:
        """A failed add that never lands (a store may say it does not know: then at most once)."""
        return True

    async def start_deletion(self) -> None:
        """PIP-186's service on this world's factory (its time, sleeps and retries follow the manual clock)."""
        assert self.factory is not None and self.store is not None
        config = DeletionConfig(parallelism=2, reconsume_later_s=0.05, max_retry_count=1_000_000)
        self.deletion = LedgerDeletionService(self.factory, self.store, self.clock, config,
                                              OffloadStoreDeleter(self.offload_store), references=(referenced_ledgers,),
                                              sleep_ms=self.timers.sleep_ms, idle_poll_ms=None)
        for _ in range(OPEN_ATTEMPTS_WITH_FAULTS):
            try:
                await self.deletion.start()
                return
            except (ManagedLedgerError, StorageError) as exc:
                self.note(f"deletion service start failed under faults: {exc}")
                self.count_faults()
        self.storage_plan.disarm()
        self.meta_plan.disarm()
        await self.deletion.start()

    def stop_deletion_tasks(self) -> None:
        """The process dies: its deletion consumers stop wherever they are."""
        if self.deletion is not None:
            for task in self.deletion._tasks:
                task.cancel()
        if self.factory is not None:
            self.factory.cancel_background()

    async def open_ledger(self, name: str) -> ManagedLedgerImpl:
        assert self.factory is not None
        for _ in range(OPEN_ATTEMPTS_WITH_FAULTS):
            try:
                return await self.factory.open(name)
            except ManagedLedgerError as exc:
                self.note(f"open {name} failed under faults: {exc}")
                self.count_faults()
        self.storage_plan.disarm()
        self.meta_plan.disarm()
        try:
            return await self.factory.open(name)
        except ManagedLedgerError as exc:
            raise self.fail(f"{name} does not open once the faults are gone: {exc!r}") from exc

    async def ensure_cursor(self, topic: TopicModel, name: str) -> None:
        ledger = self.ledgers[topic.name]
        if name in ledger.cursors:
            return
        try:
            await ledger.open_cursor(name, InitialPosition.EARLIEST)
        except ManagedLedgerFenced as exc:
            raise self.fail(f"fenced with a single owner: {exc}") from exc
        except ManagedLedgerError as exc:
            self.note(f"open cursor {topic.name}/{name} failed: {exc}")
            return
        topic.cursors[name] = CursorModel()
        self.note(f"cursor {topic.index}/{name} opened")

    def cursor(self, topic: TopicModel, name: str) -> ManagedCursor | None:
        return self.ledgers[topic.name].cursors.get(name)

    # ---- operations ------------------------------------------------------------------------------------------

    async def op_produce(self) -> None:
        topic = self.rng.choice(self.topics)
        count = self.rng.randint(1, 8)
        for _ in range(count):
            seq = topic.next_seq
            topic.next_seq += 1
            task = asyncio.get_running_loop().create_task(self.add(topic, seq))
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)
        self.note(f"produce {topic.index} x{count}")

    async def add(self, topic: TopicModel, seq: int) -> None:
        world, ledger = self.world, self.ledgers[topic.name]
        try:
            position = await ledger.add_entry(topic.payload(seq))
        except ManagedLedgerFenced as exc:
            if world == self.world:
                raise self.fail(f"fenced with a single owner: {exc}") from exc
            topic.maybe.add(seq)
            return
        except ManagedLedgerError as exc:
            if world == self.world and self.add_surely_failed(exc):
                topic.failed.add(seq)
                self.stats.adds_failed += 1
            else:
                topic.maybe.add(seq)
            if ledger.writes_paused:
                ledger.resume_writes()  # as the broker's topic does once its failed adds have settled
            return
        if world != self.world:  # completed after the process died: no receipt was ever sent
            topic.maybe.add(seq)
            return
        topic.receipted[seq] = position
        self.stats.adds_receipted += 1

    async def op_consume(self) -> None:
        topic, name = self.rng.choice(self.topics), self.rng.choice(CURSOR_NAMES)
        cursor, model = self.cursor(topic, name), topic.cursors.get(name)
        if cursor is None or model is None:
            return
        if self.rng.random() < 0.1:
            cursor.rewind()
        before = cursor.read_position
        try:
            entries = await cursor.read_entries(self.rng.randint(1, 10))
        except OffloadReadError as exc:  # the object store failed a read of an offloaded ledger
            self.check_offload_read_fault(topic, cursor, before, exc)
            return
        except ManagedLedgerError as exc:
            self.note(f"consume {topic.index}/{name} failed: {exc}")
            return
        self.check_offload_reads(topic, entries)
        for entry in entries:
            if model.acked(entry.position):
                raise self.fail(f"{topic.name}/{name} read {entry.position}, which it acknowledged")
            self.check_payload(topic, entry.position, entry.data)
            model.delivered.append(entry.position)
        self.note(f"consume {topic.index}/{name}: {[str(e.position) for e in entries]}")

    def check_offload_read_fault(self, topic: TopicModel, cursor: ManagedCursor, before: Position,
                                 exc: OffloadReadError) -> None:
        """A failed read of an offloaded ledger skips nothing (the read position stays, so the same entries
        are read again once the store heals) and shows in the managed ledger's read health."""
        self.stats.offload_read_faults += 1
        if cursor.read_position != before:
            raise self.fail(f"{topic.name}: a failed offload read moved {cursor.name} from {before} to "
                            f"{cursor.read_position}: entries would be skipped")
        reads = self.ledgers[topic.name].offload_reads
        if reads.failing_ledger != exc.ledger_id or not reads.last_error:
            raise self.fail(f"{topic.name}: the failed read of ledger {exc.ledger_id} is not in the read health")
        self.note(f"consume {topic.index}/{cursor.name}: offload read fault on ledger {exc.ledger_id}")

    def check_offload_reads(self, topic: TopicModel, entries: list[Entry]) -> None:
        """A good read of a released ledger (served by the store) clears that ledger's read error."""
        ledger = self.ledgers[topic.name]
        released = {x.ledger_id for x in ledger.ledgers() if x.offload is not None and x.offload.local_deleted}
        served = {e.position.ledger_id for e in entries} & released
        self.stats.offload_reads += bool(served)
        if ledger.offload_reads.failing_ledger in served:
            raise self.fail(f"{topic.name}: ledger {ledger.offload_reads.failing_ledger} was read from the store "
                            "but its read error stays")

    def check_payload(self, topic: TopicModel, position: Position, data: bytes) -> None:
        index, _, seq_text = data.decode().partition(":")
        seq = int(seq_text)
        if int(index) != topic.index:
            raise self.fail(f"{topic.name}: {position} holds another topic's entry {data!r}")
        expected = topic.receipted.get(seq)
        if expected is not None and expected != position:
            raise self.fail(f"{topic.name}: seq {seq} receipted at {expected} but read at {position}")

    async def op_ack(self) -> None:
        topic, name = self.rng.choice(self.topics), self.rng.choice(CURSOR_NAMES)
        cursor, model = self.cursor(topic, name), topic.cursors.get(name)
        if cursor is None or model is None:
            return
        for _ in range(self.rng.randint(1, 4)):
            candidates = [p for p in model.delivered if not model.acked(p)]
            if not candidates:
                return
            self.ack_one(topic, name, cursor, model, self.rng.choice(candidates))

    def ack_one(
        self, topic: TopicModel, name: str, cursor: ManagedCursor, model: CursorModel, position: Position
    ) -> None:
        kind = self.rng.choices(["individual", "cumulative", "batch"], [6, 2, 3])[0]
        now = self.clock.now_ms()
        if kind == "cumulative":
            cursor.acknowledge_cumulative(position)
            model.cumulative = max(model.cumulative, position)
            model.ack_log.append((now, position))
        elif kind == "individual":
            cursor.acknowledge([position])
            model.individual.add(position)
            model.partial.pop(position, None)
            model.ack_log.append((now, position))
        else:
            bits = model.partial.get(position, ALL_BITS) & ~(1 << self.rng.randrange(BATCH_SIZE))
            cursor.acknowledge_batch_indexes(position, [bits], BATCH_SIZE)
            if bits == 0:
                model.individual.add(position)
                model.partial.pop(position, None)
                model.ack_log.append((now, position))
            else:
                model.partial[position] = bits
        self.stats.acks += 1
        self.note(f"ack {kind} {topic.index}/{name} {position}")

    async def op_flush(self) -> None:
        topic, name = self.rng.choice(self.topics), self.rng.choice(CURSOR_NAMES)
        cursor, model = self.cursor(topic, name), topic.cursors.get(name)
        if cursor is None or model is None:
            return
        upto = len(model.ack_log)
        try:
            await cursor.flush()
        except ManagedLedgerFenced as exc:
            raise self.fail(f"fenced with a single owner: {exc}") from exc
        except ManagedLedgerError as exc:
            self.note(f"flush {topic.index}/{name} failed: {exc}")
            return
        model.flushed_upto = max(model.flushed_upto, upto)
        self.note(f"flush {topic.index}/{name}")

    async def op_advance(self) -> None:
        delta = self.rng.choice([1, 10, 50, 99, 100, 101, 150, 400])
        await let_turns_pass(SETTLE_TURNS)  # tasks created just now start their timers before time moves
        self.clock.advance(delta)
        self.timers.fire_due()
        if self.deletion is not None:
            self.deletion.poke()  # retries may be due now
        await let_turns_pass(SETTLE_TURNS)
        self.note(f"advance {delta} ms")

    async def op_trim(self) -> None:
        topic = self.rng.choice(self.topics)
        ledger = self.ledgers[topic.name]
        policy = RetentionPolicy(
            time_ms=self.rng.choice([0, 200, 1000, -1]), size_bytes=self.rng.choice([0, 20, 1000, -1])
        )
        try:
            result = await ledger.trim(policy)
        except ManagedLedgerFenced as exc:
            raise self.fail(f"fenced with a single owner: {exc}") from exc
        except ManagedLedgerError as exc:
            self.note(f"trim {topic.index} failed: {exc}")
            return
        for summary in result.trimmed:
            for entry_id in range(summary.entries):
                position = Position(summary.ledger_id, entry_id)
                for name, model in topic.cursors.items():
                    if not model.acked(position):
                        raise self.fail(f"{topic.name}: trimmed {position}, which {name} has not acknowledged")
            topic.trimmed_ledgers.add(summary.ledger_id)
        self.stats.trimmed_ledgers += len(result.trimmed)
        self.note(f"trim {topic.index} {policy}: {[x.ledger_id for x in result.trimmed]}")

    async def op_faults(self) -> None:
        choice = self.rng.randrange(7)
        if choice == 0:
            self.storage_plan.arm(fail_after_ops=self.rng.randint(0, 6))
        elif choice == 1:
            self.storage_plan.arm(fail_probability=0.2)
        elif choice == 2:
            self.meta_plan.arm(fail_after_ops=self.rng.randint(0, 6))
        elif choice == 3:
            self.meta_plan.arm(fail_probability=0.2)
        elif choice == 4:
            self.offload_plan.arm(**self.rng.choice([{"fail_after_ops": self.rng.randint(0, 6)},
                                                     {"fail_probability": 0.3}]))
        else:
            self.storage_plan.disarm()
            self.meta_plan.disarm()
            self.offload_plan.disarm()
        self.note(f"faults {choice}")

    async def op_offload(self) -> None:
        """Offload a sealed ledger in the background: a crash may cut it anywhere."""
        topic = self.rng.choice(self.topics)
        sealed = [x for x in self.ledgers[topic.name].ledgers()[:-1] if x.entries and not x.offloaded]
        if sealed:
            self.background(topic, "offload", self.rng.choice(sealed).ledger_id)

    async def op_release(self) -> None:
        topic = self.rng.choice(self.topics)
        done = [x for x in self.ledgers[topic.name].ledgers()[:-1]
                if x.offload is not None and x.offload.complete and not x.offload.local_deleted]
        if done:
            self.background(topic, "release", self.rng.choice(done).ledger_id)

    def background(self, topic: TopicModel, what: str, ledger_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self.offload_op(topic, what, ledger_id))
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)
        self.note(f"{what} {topic.index} ledger {ledger_id}")

    async def offload_op(self, topic: TopicModel, what: str, ledger_id: int) -> None:
        world, ledger = self.world, self.ledgers[topic.name]
        try:
            if what == "offload":
                await ledger.offload_ledger(ledger_id)
                self.stats.offloads += world == self.world
            else:
                await ledger.release_local(ledger_id)
                self.stats.releases += world == self.world
        except ManagedLedgerFenced as exc:
            if world == self.world:
                raise self.fail(f"fenced with a single owner: {exc}") from exc
        except ManagedLedgerError as exc:  # a fault, a trim that took the ledger, a closed ledger
            if world == self.world:
                self.note(f"{what} {topic.index} ledger {ledger_id} failed: {exc}")

    async def op_open_cursor(self) -> None:
        topic, name = self.rng.choice(self.topics), self.rng.choice(CURSOR_NAMES)
        await self.ensure_cursor(topic, name)

    async def op_restart(self) -> None:
        """Graceful: in-flight adds finish, cursors flush; every ack must come back exactly."""
        assert self.factory is not None and self.store is not None and self.meta is not None
        self.storage_plan.disarm()
        self.meta_plan.disarm()
        self.offload_plan.disarm()
        if self.deletion is not None:
            await self.deletion.close()
        await self.factory.close()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        expected = {
            (t.name, name): self.acked_view(t, cursor) for t in self.topics for name, cursor in self.live_cursors(t)
        }
        await self.store.close()
        await self.meta.close()
        self.timers.cancel_all()
        self.stats.restarts += 1
        self.note("restart")
        await self.boot(check=True)
        for (topic_name, name), view in expected.items():
            topic = next(t for t in self.topics if t.name == topic_name)
            cursor = self.cursor(topic, name)
            # over the positions known before: a survivor of an add whose outcome was unknown joins them after
            if cursor is None or self.acked_view(topic, cursor, [p for p, _, _ in view]) != view:
                raise self.fail(f"{topic_name}/{name} changed across a graceful restart")

    def live_cursors(self, topic: TopicModel) -> list[tuple[str, ManagedCursor]]:
        return sorted(self.ledgers[topic.name].cursors.items())

    def acked_view(self, topic: TopicModel, cursor: ManagedCursor,
                   positions: list[Position] | None = None) -> tuple[tuple[Position, bool, Any], ...]:
        """The cursor's acks of ``positions`` (every receipted one by default)."""
        at = sorted(topic.receipted.values()) if positions is None else positions
        return tuple((p, cursor.is_acknowledged(p), cursor.batch_ack_set(p)) for p in at)

    async def op_crash(self) -> None:
        """SIGKILL at this very moment: unsynced writes may vanish, nothing of the process runs again."""
        assert self.meta is not None
        durable = await self.durable_cursor_records()
        self.stats.dropped_unsynced += self.disk.crash(keep_unsynced_probability=0.5)
        self.meta.kill()
        self.timers.cancel_all()
        self.stop_deletion_tasks()
        world = self.world
        for task in list(self.inflight):
            task.cancel()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        for topic in self.topics:  # adds cancelled with their process: stored at most once
            pending = set(range(topic.next_seq)) - set(topic.receipted) - topic.failed
            topic.maybe |= pending
        self.stats.crashes += 1
        self.note(f"crash (world {world})")
        self.crash_records = durable
        await self.boot(check=True)

    async def durable_cursor_records(self) -> dict[tuple[str, str], CursorRecord]:
        records: dict[tuple[str, str], CursorRecord] = {}
        for topic in self.topics:
            for name in CURSOR_NAMES:
                stored = await self.meta_inner.get(cursor_key(topic.name, name))
                if stored is not None:
                    records[(topic.name, name)] = decode_cursor(stored.value, "sim")
        return records

    # ---- invariants ------------------------------------------------------------------------------------------

    async def check_recovered(self) -> None:
        for topic in self.topics:
            ledger = self.ledgers[topic.name]
            if ledger.state is not LedgerState.OPEN:
                raise self.fail(f"{topic.name} is {ledger.state.value} after recovery")
            await self.check_ledgers_exist(topic)
            present = await self.scan(topic)
            self.check_entries(topic, present)
            self.check_cursors(topic, present)
        self.crash_records = {}
        await self.check_audit()

    async def check_audit(self) -> None:
        """No record names a ledger storage lacks; with two phases, every unreferenced ledger is pending."""
        assert self.factory is not None and self.store is not None
        report = await audit(self.meta_inner, self.store, self.factory, live=True, offload=self.offload_store,
                             references=(referenced_ledgers,))
        released = set()
        for topic in self.topics:
            stored = await self.meta_inner.get(ledger_key(topic.name))
            if stored is not None:
                released |= {x.ledger_id for x in decode_ledger(stored.value, "sim").ledgers
                              if x.offload is not None and x.offload.local_deleted}
        dangling = [(name, i) for name, i in report.dangling if i not in released]
        if dangling:
            raise self.fail(f"the audit finds ledgers referenced but missing: {dangling}")
        if self.two_phase and report.orphans:
            raise self.fail(f"two-phase deletion left orphans: {[o.ledger_id for o in report.orphans]}")
        if self.two_phase and report.offload_orphans:
            raise self.fail(f"two-phase deletion left offloaded orphans: {report.offload_orphans}")
        self.stats.audited_orphans = max(self.stats.audited_orphans, len(report.orphans))

    async def check_ledgers_exist(self, topic: TopicModel) -> None:
        stored = await self.meta_inner.get(ledger_key(topic.name))
        if stored is None:
            raise self.fail(f"{topic.name}: no managed-ledger record after recovery")
        summaries = decode_ledger(stored.value, "sim").ledgers
        referenced = {x.ledger_id for x in summaries}
        released = {x.ledger_id for x in summaries if x.offload is not None and x.offload.local_deleted}
        missing = sorted(referenced - released - set(self.disk.ledgers))
        if missing:
            raise self.fail(f"{topic.name}: the record references ledgers missing from storage: {missing}")
        checker = BlockOffloadStore(self.blobs, self.offload_settings)
        for summary in summaries:
            offload = summary.offload
            if offload is None or not offload.complete:
                if offload is not None and offload.local_deleted:
                    raise self.fail(f"{topic.name}: ledger {summary.ledger_id} released before its copy completed")
                continue
            try:  # a complete copy is whole and checks out, whether or not the local copy is still there
                await checker.verify(offload.context, summary.entries)
            except StorageError as exc:
                what = f"complete offload of {summary.ledger_id} is not readable"
                raise self.fail(f"{topic.name}: {what}: {exc}") from exc
        owned = {
            i for i, x in self.disk.ledgers.items() if x.custom_metadata.get("pulsar/managed-ledger") == topic.name
        }
        self.stats.orphan_ledgers = max(self.stats.orphan_ledgers, len(owned - referenced))

    async def scan(self, topic: TopicModel) -> dict[Position, int]:
        ledger = self.ledgers[topic.name]
        reader = ledger.new_non_durable_cursor(ledger.first_position(), "sim-scan")
        present: dict[Position, int] = {}
        for _ in range(SCAN_ROUNDS_MAX):
            entries = await reader.read_entries(100)
            if not entries:
                break
            for entry in entries:
                self.check_payload(topic, entry.position, entry.data)
                present[entry.position] = int(entry.data.decode().partition(":")[2])
        await reader.close()
        return present

    def check_entries(self, topic: TopicModel, present: dict[Position, int]) -> None:
        seqs = list(present.values())
        if len(seqs) != len(set(seqs)):
            raise self.fail(f"{topic.name}: an entry is stored twice: {sorted(seqs)}")
        if seqs != sorted(seqs):
            raise self.fail(f"{topic.name}: entries out of send order: {seqs}")
        found = set(seqs)
        for seq in sorted(found - set(topic.receipted)):
            if seq in topic.failed or seq not in topic.maybe:
                raise self.fail(f"{topic.name}: seq {seq} is stored but its add failed or never happened")
        for seq, position in sorted(topic.receipted.items()):
            if seq not in found and position.ledger_id not in topic.trimmed_ledgers:
                raise self.fail(f"{topic.name}: receipted seq {seq} at {position} is lost")
            if seq in found and position.ledger_id in topic.trimmed_ledgers:
                raise self.fail(f"{topic.name}: seq {seq} at {position} is still readable after its trim")
        for position, seq in present.items():  # an unreceipted survivor keeps its place from now on
            topic.receipted.setdefault(seq, position)
        topic.failed |= topic.maybe - found  # lost with the crash: must never come back
        topic.maybe.clear()

    def check_cursors(self, topic: TopicModel, present: dict[Position, int]) -> None:
        records = self.crash_records
        for name, cursor in self.live_cursors(topic):
            model = topic.cursors.get(name)
            record = records.get((topic.name, name))
            if model is not None and record is not None:
                self.check_cursor_record(topic, name, model, record, cursor, present)
            topic.cursors[name] = self.model_of(cursor, present)

    def check_cursor_record(
        self,
        topic: TopicModel,
        name: str,
        model: CursorModel,
        record: CursorRecord,
        cursor: ManagedCursor,
        present: dict[Position, int],
    ) -> None:
        what = f"{topic.name}/{name}"
        batches = {p: words for p, words in record.batches}
        for position in sorted(present):
            durable = position <= record.mark_delete or any(f <= position <= la for f, la in record.ranges)
            if cursor.is_acknowledged(position) != durable:
                raise self.fail(f"{what}: recovered ack of {position} is not the durable one ({durable})")
            if durable and not model.acked(position):
                raise self.fail(f"{what}: {position} is acknowledged but the simulation never acked it")
            words = batches.get(position)
            if not durable and words is not None:
                bits = words[0] if words else 0
                sim_bits = 0 if model.acked(position) else model.partial.get(position, ALL_BITS)
                if bits & sim_bits != sim_bits:
                    raise self.fail(f"{what}: batch indexes of {position} acked that the simulation did not ack")
                if cursor.batch_ack_set(position) != list(words):
                    raise self.fail(f"{what}: recovered batch acks of {position} differ from the durable ones")
        window_start = max(self.last_meta_fault_ms, 0)
        for i, (time_ms, position) in enumerate(model.ack_log):
            due = i < model.flushed_upto or max(time_ms, window_start) + PERSIST_INTERVAL_MS < self.clock.now_ms()
            if due and position in present and not cursor.is_acknowledged(position):
                raise self.fail(f"{what}: ack of {position} at {time_ms} ms was lost beyond the persistence window")

    def model_of(self, cursor: ManagedCursor, present: dict[Position, int]) -> CursorModel:
        model = CursorModel(cumulative=cursor.mark_delete_position)
        for position in present:
            if cursor.is_acknowledged(position) and position > model.cumulative:
                model.individual.add(position)
            words = cursor.batch_ack_set(position)
            if words is not None and not cursor.is_acknowledged(position):
                model.partial[position] = words[0] if words else 0
        return model


def run_seed(seed: int, ops: int) -> tuple[Stats, str]:
    """Run one seed to the end (raises InvariantViolation); returns the stats and the trace digest."""
    sim = Simulation(seed, ops)
    stats = asyncio.run(sim.run())
    return stats, sim.digest()
