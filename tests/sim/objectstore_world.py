"""The seeded simulator for ledgers in an object store: racing writers and sealers, a bucket that fails.

One seed drives several broker processes, each an :class:`ObjectLedgerStore` on its own connection
(:class:`MemoryObjectClient`) to one shared in-memory bucket that outlives them all, as S3 outlives brokers.
Each connection has its own latency (event-loop turns) and fault plan: requests refused before the bucket
sees them (a 5xx, a refused connection), and lost answers (the request times out, yet its create lands, at
once or a few turns later, racing whatever the writer does next). Time is a manual clock: back-offs and
flush windows sleep on it, so a seed replays exactly.

Operations: create a ledger; append batches (several in flight); seal, by the ledger's writer or by another
process taking it over while the writer keeps appending (the zombie); delete a ledger (anyone); read ranges
from any process; arm and disarm faults, change latency; advance time; crash a process (SIGKILL: its
requests fail from then on, its timers never fire, creates it sent may still land) and start a new one in
its place. At the end the faults stop, time runs until nothing is in flight, and a fresh process seals and
reads every ledger.

Invariants:

* **no receipt without an object**: when an append completes, the bucket holds a data chunk of that ledger
  with that entry at that id; acknowledged ids of a ledger are 0, 1, 2, ... in call order;
* **one winner per seq**: every key was created exactly once; a ledger's keys are seqs 0..n with no gap
  among them, data chunks first, then seals only (the lowest is the ledger's seal);
* **nothing acknowledged lost**: every seal, by anyone, counts every acknowledged entry; nothing is
  acknowledged after a seal beyond its count, or after a delete; a read returns exactly the payloads
  appended at those ids; after the writer's own seal, a failed append is never readable;
* a deleted ledger keeps no data chunk and is listed by no process.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from magnetar.core.clock import ManualClock
from magnetar.core.faults import FaultPlan
from magnetar.storage.api import LedgerFenced, LedgerInfo, StorageError
from magnetar.storage.objectstore import ObjectLedgerSettings, ObjectLedgerStore
from magnetar.storage.objectstore._chunks import DATA, SEAL, SEALS, decode_data, decode_header
from magnetar.storage.objectstore.memory import OPS, MemoryBucket, MemoryObjectClient
from tests.sim.world import SeedTrace, Timers, let_turns_pass, seed_main

PROCESSES = 3
PREFIX = "sim/"
SETTLE_ROUNDS_MAX = 400
Op = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class LedgerModel:
    ledger_id: int
    writer: int  # the process generation that created it (only it appends)
    issued: list[bytes] = field(default_factory=list)  # payloads in call order: entry id = index
    acked: set[int] = field(default_factory=set)
    failed_from: int | None = None  # the first entry id whose append failed
    sealed_entries: int | None = None
    delete_requested: bool = False  # from then on its data may go
    deleted_at: int | None = None  # the bucket's create count when its delete completed

    def payload(self) -> bytes:
        return b"%d:%d" % (self.ledger_id, len(self.issued))


@dataclass
class Process:
    slot: int
    generation: int
    client: MemoryObjectClient
    store: ObjectLedgerStore
    timers: Timers
    plan: FaultPlan
    alive: bool = True


@dataclass
class Stats:
    ops: int = 0
    ledgers: int = 0
    appends_acked: int = 0
    appends_failed: int = 0
    appends_fenced: int = 0
    seals_by_writer: int = 0
    seals_by_others: int = 0
    seal_races_lost: int = 0
    deletes: int = 0
    reads: int = 0
    crashes: int = 0
    faults: int = 0
    lost_answers: int = 0
    retries: int = 0


class ObjectStoreSimulation(SeedTrace):
    def __init__(self, seed: int, ops: int) -> None:
        self.seed = seed
        self.ops_total = ops
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.bucket = MemoryBucket()
        self.trace: list[str] = []
        self.step = 0
        self.stats = Stats()
        self.generations = 0
        self.settings = ObjectLedgerSettings(
            flush_max_delay_ms=self.rng.choice([0, 0, 5, 20]), flush_max_bytes=self.rng.choice([8, 64, 1 << 20]),
            attempts_max=self.rng.choice([1, 2, 4]), backoff_ms=10, backoff_ms_max=40,
            read_cache_bytes=self.rng.choice([0, 64, 1 << 20]), whole_chunk_bytes_max=self.rng.choice([0, 1 << 20]),
        )  # fmt: skip
        self.processes: list[Process] = []
        self.ledgers: dict[int, LedgerModel] = {}
        self.inflight: set[asyncio.Task[None]] = set()

    # ---- processes ---------------------------------------------------------------------------------------------

    async def start_process(self, slot: int) -> Process:
        self.generations += 1
        plan = FaultPlan(random.Random(self.rng.getrandbits(64)), ops=OPS)
        client = MemoryObjectClient(self.bucket, plan=plan, rng=random.Random(self.rng.getrandbits(64)),
                                    latency_turns_max=self.rng.randint(0, 4))
        timers = Timers(self.clock)
        store = await ObjectLedgerStore.open(
            client, prefix=PREFIX, settings=self.settings, clock=self.clock, sleep_ms=timers.sleep_ms,
            token=self.rng.getrandbits(128).to_bytes(16, "big"), probe=slot == 0 and self.generations == 1,
        )  # fmt: skip
        return Process(slot, self.generations, client, store, timers, plan)

    def live(self) -> list[Process]:
        return [p for p in self.processes if p.alive]

    def writer_of(self, model: LedgerModel) -> Process | None:
        return next((p for p in self.live() if p.generation == model.writer), None)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)

    # ---- driver ------------------------------------------------------------------------------------------------

    async def run(self) -> Stats:
        self.processes = [await self.start_process(slot) for slot in range(PROCESSES)]
        operations: list[tuple[int, Op]] = [
            (6, self.op_create), (30, self.op_append), (6, self.op_seal_by_writer), (6, self.op_take_over),
            (3, self.op_delete), (12, self.op_read), (6, self.op_faults), (12, self.op_advance), (2, self.op_crash),
        ]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.stats.ops += 1
            await let_turns_pass(self.rng.randint(0, 4))
        self.step += 1
        await self.settle()
        await self.check_final()
        self.count()
        return self.stats

    def count(self) -> None:
        procs = self.processes + self.dead
        self.stats.faults = sum(p.plan.injected for p in procs)
        self.stats.lost_answers = sum(p.client.lost_answers for p in procs)
        self.stats.retries = sum(p.store.requests.retries for p in procs)
        self.stats.seal_races_lost = sum(p.store.seal_races_lost for p in procs)

    dead: list[Process] = []

    async def settle(self) -> None:
        """Faults off, time runs on until nothing is in flight (a crashed process's requests never finish:
        its timers are dead, its sim tasks were cancelled)."""
        for process in self.live():
            process.plan.disarm()
        for _ in range(SETTLE_ROUNDS_MAX):  # bounded
            if not self.inflight and not any(p.client.delayed for p in self.processes + self.dead):
                return
            await self.advance(50)
        raise self.fail(f"{len(self.inflight)} operations still in flight after the faults stopped")

    async def advance(self, ms: int) -> None:
        await let_turns_pass(10)
        self.clock.advance(ms)
        for process in self.live():
            process.timers.fire_due()
        await let_turns_pass(10)

    # ---- operations ----------------------------------------------------------------------------------------------

    async def op_create(self) -> None:
        process = self.rng.choice(self.live())
        self.spawn(self.create(process))
        self.note(f"create on p{process.slot}")

    async def create(self, process: Process) -> None:
        """Every store call runs as a task: a back-off sleeps on the manual clock, which only op_advance moves."""
        try:
            info = await process.store.create_ledger({"sim": str(self.seed)})
        except StorageError as exc:
            self.note(f"create on p{process.slot} failed: {exc}")
            return
        if not process.alive:
            return
        if info.ledger_id in self.ledgers:
            raise self.fail(f"ledger id {info.ledger_id} handed out twice")
        self.ledgers[info.ledger_id] = LedgerModel(info.ledger_id, process.generation)
        self.stats.ledgers += 1
        self.note(f"create {info.ledger_id} on p{process.slot}")

    def pick(self, *, writable: bool = False, sealed: bool | None = None) -> LedgerModel | None:
        candidates = [m for m in self.ledgers.values() if m.deleted_at is None
                      and (not writable or self.writer_of(m) is not None)
                      and (sealed is None or (m.sealed_entries is not None) == sealed)]
        return self.rng.choice(candidates) if candidates else None

    async def op_append(self) -> None:
        model = self.pick(writable=True)
        process = self.writer_of(model) if model is not None else None
        if model is None or process is None:
            return
        count = self.rng.randint(1, 6)
        for _ in range(count):
            entry_id, payload = len(model.issued), model.payload()
            model.issued.append(payload)
            future = process.store.start_append(model.ledger_id, payload)
            self.spawn(self.complete_append(process, model, entry_id, future))
        self.note(f"append {model.ledger_id} x{count} from id {len(model.issued) - count}")

    async def complete_append(self, process: Process, model: LedgerModel, entry_id: int,
                              future: asyncio.Future[int]) -> None:
        try:
            got = await future
        except LedgerFenced:
            self.stats.appends_fenced += 1
            model.failed_from = min(entry_id, model.failed_from if model.failed_from is not None else entry_id)
            return
        except StorageError:
            self.stats.appends_failed += 1
            model.failed_from = min(entry_id, model.failed_from if model.failed_from is not None else entry_id)
            return
        if not process.alive:
            return  # completed inside a dead process: no receipt was ever sent
        self.check_receipt(model, entry_id, got)
        model.acked.add(got)
        self.stats.appends_acked += 1

    def check_receipt(self, model: LedgerModel, entry_id: int, got: int) -> None:
        if got != entry_id:
            raise self.fail(f"ledger {model.ledger_id}: append {entry_id} was acknowledged as entry {got}")
        if model.failed_from is not None and got > model.failed_from:
            raise self.fail(f"ledger {model.ledger_id}: entry {got} acknowledged after {model.failed_from} failed")
        if model.sealed_entries is not None and got >= model.sealed_entries:
            raise self.fail(f"ledger {model.ledger_id}: entry {got} acknowledged above the seal "
                            f"({model.sealed_entries} entries)")
        created = self.created_with(model.ledger_id, got, model.issued[got])
        if created is None:
            raise self.fail(f"ledger {model.ledger_id}: entry {got} acknowledged without an object holding it")
        if model.deleted_at is not None and created > model.deleted_at:
            raise self.fail(f"ledger {model.ledger_id}: entry {got} stored and acknowledged after its delete")

    def created_with(self, ledger_id: int, entry_id: int, payload: bytes) -> int | None:
        """When the bucket created a data chunk of this ledger holding ``payload`` as ``entry_id`` (looked up in
        the bucket's own record of creates, deleted objects included), or None if it never did."""
        prefix = f"{PREFIX}ledgers/{ledger_id:020d}/"
        for key, creates in self.bucket.history.items():
            if not key.startswith(prefix):
                continue
            for number, body in creates:
                header = decode_header(body, ledger_id, 0)
                holds = header.kind == DATA and header.first_entry <= entry_id < header.first_entry + header.count
                if holds and decode_data(body, ledger_id, 0)[1][entry_id - header.first_entry] == payload:
                    return number
        return None

    def chunk_keys(self, ledger_id: int) -> list[str]:
        prefix = f"{PREFIX}ledgers/{ledger_id:020d}/"
        return sorted(k for k in self.bucket.objects if k.startswith(prefix))

    async def op_seal_by_writer(self) -> None:
        model = self.pick(writable=True, sealed=False)
        process = self.writer_of(model) if model is not None else None
        if model is not None and process is not None:
            self.spawn(self.seal(process, model, by_writer=True))
            self.note(f"seal {model.ledger_id} by its writer p{process.slot}")

    async def op_take_over(self) -> None:
        """Another process seals the ledger, as a new owner does, while its writer may still append."""
        model = self.pick(sealed=False)
        if model is None:
            return
        others = [p for p in self.live() if p.generation != model.writer]
        if others:
            process = self.rng.choice(others)
            self.spawn(self.seal(process, model, by_writer=False))
            self.note(f"seal {model.ledger_id} by p{process.slot} (take-over)")

    async def seal(self, process: Process, model: LedgerModel, *, by_writer: bool) -> None:
        try:
            info = await process.store.seal(model.ledger_id)
        except StorageError as exc:
            self.note(f"seal {model.ledger_id} by p{process.slot} failed: {exc}")
            return
        if not process.alive:
            return
        self.check_seal(model, info, by_writer=by_writer)

    def check_seal(self, model: LedgerModel, info: LedgerInfo, *, by_writer: bool) -> None:
        if not info.sealed:
            raise self.fail(f"ledger {model.ledger_id}: seal returned an open ledger")
        self.check_layout(model.ledger_id)
        if model.delete_requested:  # a delete may have taken its data already
            return
        if model.sealed_entries is not None and info.entries != model.sealed_entries:
            raise self.fail(f"ledger {model.ledger_id}: sealed with {info.entries} entries, "
                            f"earlier with {model.sealed_entries}")
        lost = sorted(e for e in model.acked if e >= info.entries)
        if lost:
            raise self.fail(f"ledger {model.ledger_id}: the seal at {info.entries} entries loses acknowledged {lost}")
        model.sealed_entries = info.entries
        own = self.lowest_seal_kind(model.ledger_id) == SEAL
        if own and info.entries != len(model.acked) and self.writer_of(model) is not None:
            raise self.fail(f"ledger {model.ledger_id}: its writer sealed at {info.entries}, acknowledged "
                            f"{len(model.acked)}: a failed append would be readable")
        if by_writer:
            self.stats.seals_by_writer += 1
        else:
            self.stats.seals_by_others += 1

    def lowest_seal_kind(self, ledger_id: int) -> int | None:
        for seq, key in enumerate(self.chunk_keys(ledger_id)):
            kind = decode_header(self.bucket.objects[key], ledger_id, seq).kind
            if kind in SEALS:
                return kind
        return None

    def check_layout(self, ledger_id: int) -> None:
        """From seq 0 without a gap: data chunks, then seals only. Past the first gap, seals only (a sealer
        that died before fencing the seqs it jumped over), or anything once a delete was requested."""
        keys = self.chunk_keys(ledger_id)
        seqs = [int(k.rsplit("/", 1)[1]) for k in keys]
        kinds = [decode_header(self.bucket.objects[k], ledger_id, s).kind for k, s in zip(keys, seqs, strict=True)]
        run = next((i for i, seq in enumerate(seqs) if seq != i), len(seqs))
        data = kinds[:run].count(DATA)
        beyond_gap_ok = set(kinds[run:]) <= SEALS or self.ledgers[ledger_id].delete_requested
        if kinds[:data] != [DATA] * data or not set(kinds[data:run]) <= SEALS or not beyond_gap_ok:
            raise self.fail(f"ledger {ledger_id}: keys {seqs} of kinds {kinds}: not data chunks then seals")
        self.check_one_winner_per_key()

    def check_one_winner_per_key(self) -> None:
        """Each key is created once; again only after a delete took it (conditional creates refuse otherwise),
        and then only as a seal (a delete cut short and sealed again at its gap) or as a byte-identical copy
        of an earlier create (a request delayed in the network)."""
        for key, creates in self.bucket.history.items():
            if len(creates) > 1 and not key.startswith(f"{PREFIX}ledgers/"):
                raise self.fail(f"{key} created {len(creates)} times")
            for i, (_, body) in enumerate(creates[1:], start=1):
                seal = decode_header(body, 0, 0).kind in SEALS
                if not seal and all(body != earlier for _, earlier in creates[:i]):
                    raise self.fail(f"{key} created again with new data after a delete")

    async def op_delete(self) -> None:
        model = self.pick()
        if model is None:
            return
        process = self.rng.choice(self.live())
        model.delete_requested = True
        self.spawn(self.delete(process, model))
        self.note(f"delete {model.ledger_id} by p{process.slot}")

    async def delete(self, process: Process, model: LedgerModel) -> None:
        try:
            await process.store.delete(model.ledger_id)
        except StorageError as exc:
            self.note(f"delete {model.ledger_id} by p{process.slot} failed: {exc}")
            return
        if not process.alive:
            return
        model.deleted_at = self.bucket.puts
        self.stats.deletes += 1

    def check_deleted(self, model: LedgerModel) -> None:
        """No data left, but for a create delayed in the network that landed once the delete had taken the
        key: a byte-identical copy of the chunk stored there earlier (an orphan object the audit lists)."""
        assert model.deleted_at is not None
        for key in self.chunk_keys(model.ledger_id):
            body = self.bucket.objects[key]
            if decode_header(body, model.ledger_id, 0).kind != DATA:
                continue
            creates = self.bucket.history[key]
            late_copy = any(b == body for _, b in creates[:-1])
            if not late_copy:
                raise self.fail(f"ledger {model.ledger_id}: data chunk {key} left after its delete")

    async def op_read(self) -> None:
        model = self.pick()
        if model is None or not model.acked:
            return
        process = self.rng.choice(self.live())
        top = max(model.acked)
        first = self.rng.randint(0, top)
        last = self.rng.randint(first, top)
        self.spawn(self.read(process, model, first, last))

    async def read(self, process: Process, model: LedgerModel, first: int, last: int) -> None:
        try:
            got = await process.store.read(model.ledger_id, first, last)
        except StorageError as exc:
            self.note(f"read {model.ledger_id} {first}..{last} on p{process.slot} failed: {exc}")
            return
        if got != model.issued[first : last + 1]:  # wrong data never, deleted ledger or not
            raise self.fail(f"ledger {model.ledger_id}: read {first}..{last} gave {got}")
        self.stats.reads += 1

    async def op_faults(self) -> None:
        process = self.rng.choice(self.live())
        choice = self.rng.randrange(4)
        if choice == 0:
            process.plan.arm(fail_after_ops=self.rng.randint(0, 5))
        elif choice == 1:
            process.plan.arm(fail_probability=self.rng.choice([0.1, 0.3]))
        elif choice == 2:
            process.client.latency_turns_max = self.rng.randint(0, 8)
        else:
            process.plan.disarm()
        self.note(f"faults p{process.slot}: {choice}")

    async def op_advance(self) -> None:
        delta = self.rng.choice([1, 5, 10, 20, 40])
        await self.advance(delta)
        self.note(f"advance {delta} ms")

    async def op_crash(self) -> None:
        process = self.rng.choice(self.live())
        process.alive = False
        process.client.closed = True  # every request from now on fails; creates already sent may land
        process.timers.cancel_all()
        self.dead.append(process)
        self.processes[process.slot] = await self.start_process(process.slot)
        self.stats.crashes += 1
        self.note(f"crash p{process.slot} (generation {process.generation})")

    # ---- the end ---------------------------------------------------------------------------------------------

    async def check_final(self) -> None:
        """A fresh process seals and reads every ledger; nothing acknowledged is missing."""
        checker = await self.start_process(PROCESSES)
        checker.plan.disarm()
        listed = set(await checker.store.list_ledgers())
        for model in sorted(self.ledgers.values(), key=lambda m: m.ledger_id):
            if model.delete_requested and model.ledger_id in listed:  # an interrupted delete: finish it
                await checker.store.delete(model.ledger_id)
                model.deleted_at = self.bucket.puts
            if model.deleted_at is not None:
                if model.ledger_id in await checker.store.list_ledgers():
                    raise self.fail(f"ledger {model.ledger_id} is listed after its delete")
                self.check_deleted(model)
                continue
            if model.ledger_id not in listed:
                raise self.fail(f"ledger {model.ledger_id} is missing from the listing")
            info = await checker.store.seal(model.ledger_id)
            self.check_seal(model, info, by_writer=False)
            if info.entries:
                got = await checker.store.read(model.ledger_id, 0, info.entries - 1)
                if got != model.issued[: info.entries]:
                    raise self.fail(f"ledger {model.ledger_id}: stored entries differ from those appended")
        self.processes.append(checker)


def run_objectstore_seed(seed: int, ops: int) -> tuple[Stats, str]:
    sim = ObjectStoreSimulation(seed, ops)
    stats = asyncio.run(sim.run())
    return stats, sim.digest()


if __name__ == "__main__":
    raise SystemExit(seed_main(None, ObjectStoreSimulation, module="tests.sim.objectstore_world", default_ops=300,
                               doc=__doc__))
