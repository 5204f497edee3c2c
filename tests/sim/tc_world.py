"""The seeded simulator for the transaction coordinator (its log, recovery and ending), beside tests/sim/world.py.

One seed drives: opening transactions, registering partitions and subscriptions, committing and aborting
(also crossed, repeated and unknown ones), participants that hold their answers or fail for a while, the
manual clock (timeouts), storage and metadata faults, graceful restarts and crashes (SIGKILL: unsynced log
writes may vanish, operations in flight are cut wherever they are, participants' held calls die with the
process). The coordinator runs over the same crashable disk and faulty metadata store as the storage
simulator; the participants stand for the topics and remember every outcome (durable, as markers are).

Invariants (checked as answers arrive, after every recovery, and once the recovered coordinator settled):

* an answered commit/abort has already been applied to every partition and subscription answered as
  registered; no transaction ever reaches one participant as committed and another as aborted;
* a transaction answered as opened, never asked to end and never past its deadline, survives any crash with
  its deadline and at least its answered registrations (and nothing never asked for);
* an answered end survives: the transaction is finished after any crash;
* the role that opened a transaction (its owner, or none) is the one it has after any crash;
* once recovery settled, no transaction is left ending, and every transaction a participant heard of has
  reached all its answered registrations; no transaction id is handed out twice.

The log is written through PIP-160's buffered writer, batching or not as the seed draws, and the seed
flips the switch at runtime (``BatchedLogSwitch.update``, stored in the faulty metadata store), so logs hold
any mix of plain and batched entries when a crash comes. Invariants of the switch: once an update is
answered, the running log's writer follows it; after any crash the switch is what the last answered update
stored (an update that failed may or may not have been stored).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.errors import BrokerError, ServiceNotReady
from magnetar.broker.transactions.api import (
    CoordinatorNotFound,
    InvalidTxnStatus,
    TransactionNotFound,
    TxnAction,
    TxnId,
)
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily
from magnetar.broker.transactions.buffered_writer import BatchingConfig
from magnetar.broker.transactions.coordinator import EndPolicy, TransactionCoordinator
from magnetar.broker.transactions.coordinators import CoordinatorSettings, TransactionCoordinatorService
from magnetar.broker.transactions.states import TxnStatus
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.faulty import FaultyMetadataStore, MetadataFaultPlan
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.faulty import CrashableLedgerStore, FaultPlan, FaultyLedgerStore, SimDisk
from tests.sim.world import InvariantViolation, SeedTrace, Timers, let_turns_pass

PARTITIONS = tuple(f"persistent://sim/ns/p{i}" for i in range(4))
SUBSCRIPTIONS = tuple((p, s) for p in PARTITIONS[:2] for s in ("s0", "s1"))
SETTLE_TURNS = 60
Op = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class TxnModel:
    txn: TxnId
    deadline_ms: int
    partitions: set[str] = field(default_factory=set)  # answered registrations
    subscriptions: set[tuple[str, str]] = field(default_factory=set)
    maybe_partitions: set[str] = field(default_factory=set)  # asked for, answer unknown
    maybe_subscriptions: set[tuple[str, str]] = field(default_factory=set)
    ended: TxnAction | None = None  # answered end
    end_asked: bool = False  # some end was asked for (its answer may be unknown)
    owner: str | None = None  # the role that opened it (None: no authentication)


class SimParticipants:
    """The topics' side: remembers every outcome; can hold calls (released later) or fail the next few.
    Each coordinator process gets a ``view``; a dead process's calls never reach the topics."""

    def __init__(self) -> None:
        self.outcomes: dict[TxnId, dict[str, set[TxnAction]]] = {}
        self.holding = False
        self.fail_next = 0
        self.generation = 0
        self._held: list[asyncio.Future[None]] = []

    def view(self) -> ParticipantsView:
        return ParticipantsView(self, self.generation)

    async def call(self, generation: int, key: str, txn: TxnId, action: TxnAction) -> None:
        if generation != self.generation:
            raise asyncio.CancelledError  # the calling process is dead: it never runs again
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ServiceNotReady("participant briefly unavailable")
        if self.holding:
            gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._held.append(gate)
            await gate
            if generation != self.generation:
                raise asyncio.CancelledError
        self.outcomes.setdefault(txn, {}).setdefault(key, set()).add(action)

    def release(self) -> None:
        self.holding = False
        held, self._held = self._held, []
        for gate in held:
            if not gate.done():
                gate.set_result(None)

    def kill(self) -> None:
        """The process died: held calls never answer, and its later calls are refused."""
        self.generation += 1
        self.holding = False
        held, self._held = self._held, []
        for gate in held:
            gate.cancel()


@dataclass(frozen=True, slots=True)
class ParticipantsView:
    """What one coordinator process calls (implements TxnParticipants)."""

    shared: SimParticipants
    generation: int

    async def end_txn_on_partition(self, topic: str, txn: TxnId, action: TxnAction) -> None:
        await self.shared.call(self.generation, topic, txn, action)

    async def end_txn_on_subscription(self, topic: str, subscription: str, txn: TxnId, action: TxnAction) -> None:
        await self.shared.call(self.generation, f"{topic}/{subscription}", txn, action)


@dataclass
class TxnStats:
    ops: int = 0
    crashes: int = 0
    restarts: int = 0
    commits: int = 0
    aborts: int = 0
    timeouts: int = 0
    ends_cut_by_crash: int = 0
    faults: int = 0


class TxnSimulation(SeedTrace):
    FAIL_LABEL = "txn seed"
    FAIL_TAIL_STEPS = 30

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
        self.config = ManagedLedgerConfig(max_entries_per_ledger=self.rng.choice([3, 8, 50]))
        self.participants = SimParticipants()
        self.txns: dict[TxnId, TxnModel] = {}
        self.ids_seen: set[TxnId] = set()
        self.news_cut = 0  # NEW_TXNs in flight at a crash: their ids may exist without an answer
        self.news_inflight = 0
        self.errors: list[BaseException] = []  # raised inside operation tasks: the run fails with the first
        self.inflight: set[asyncio.Task[None]] = set()
        self.stats = TxnStats()
        self.trace: list[str] = []
        self.step = 0
        self.service: TransactionCoordinatorService | None = None
        self.switch: BatchedLogSwitch | None = None
        self.batching = BatchingConfig(enabled=self.rng.random() < 0.5, max_records=self.rng.choice([10, 30]),
                                       max_bytes=128 * 1024, max_delay_ms=self.rng.choice([1, 20]))  # broker.conf
        # what the switch may say after a restart: broker.conf's until an update is stored (several values after
        # a failed update, which may or may not have reached the store)
        self.batching_stored: set[bool] = {self.batching.enabled}
        self.factory: LedgerFactory | None = None
        self.store: FaultyLedgerStore | None = None
        self.meta: FaultyMetadataStore | None = None

    @property
    def tc(self) -> TransactionCoordinator:
        assert self.service is not None
        return self.service.coordinator(0)

    async def run(self) -> TxnStats:
        await self.boot()
        operations: list[tuple[int, Op]] = [
            (14, self.op_new), (16, self.op_add_partition), (10, self.op_add_subscription), (16, self.op_end),
            (3, self.op_bad_end), (6, self.op_participants), (8, self.op_advance), (3, self.op_faults),
            (2, self.op_restart), (4, self.op_crash), (3, self.op_switch),
        ]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.stats.ops += 1
            await let_turns_pass(self.rng.randint(0, 4))
            if self.errors:
                raise self.errors[0]
        self.step += 1
        await self.op_crash()
        await self.shutdown()
        return self.stats

    # ---- worlds ------------------------------------------------------------------------------------------

    async def boot(self) -> None:
        self.timers = Timers(self.clock)
        self.storage_plan.disarm()
        self.meta_plan.disarm()
        self.store = FaultyLedgerStore(CrashableLedgerStore(self.disk, clock=self.clock), self.storage_plan)
        self.meta = FaultyMetadataStore(self.meta_inner, self.meta_plan)
        self.factory = LedgerFactory(self.store, self.meta, config=self.config, clock=self.clock,
                                     sleep_ms=self.timers.sleep_ms)
        policy = EndPolicy(call_timeout_ms=600_000, attempts_max=3, backoff_initial_ms=0, backoff_max_ms=0)
        settings = CoordinatorSettings(count=1, default_timeout_ms=5_000, end_policy=policy)
        switch = BatchedLogSwitch(self.batching, BatchingConfig(), self.meta, sleep_ms=self.timers.sleep_ms)
        await switch.load()
        if switch.configs[LogFamily.TRANSACTION_LOG].enabled not in self.batching_stored:
            raise self.fail(f"the batching switch came back as {switch.configs[LogFamily.TRANSACTION_LOG]}, "
                            f"stored was one of {self.batching_stored}")
        self.switch = switch
        self.service = TransactionCoordinatorService(
            settings, self.factory, self.participants.view(), self.clock, ledger_config=self.config,
            new_writer=lambda ledger: switch.new_writer(LogFamily.TRANSACTION_LOG, ledger),
        )
        await self.service.start(timeout_loop=False)

    async def shutdown(self) -> None:
        if self.service is not None:
            await self.service.close()
        if self.factory is not None:
            await self.factory.close()
        self.timers.cancel_all()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self.inflight.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.inflight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.errors.append(task.exception())  # type: ignore[arg-type]

    # ---- operations --------------------------------------------------------------------------------------

    def pick(self, *, open_only: bool) -> TxnModel | None:
        choices = [m for m in self.txns.values() if not open_only or (m.ended is None and not m.end_asked)]
        return self.rng.choice(sorted(choices, key=lambda m: m.txn)) if choices else None

    async def op_new(self) -> None:
        ttl = self.rng.choice([300, 1_000, 5_000, 60_000])
        owner = self.rng.choice([None, "alice", "bob"])

        async def go() -> None:
            self.news_inflight += 1
            try:
                txn = await self.service_now().new_txn(0, ttl, owner)
            except BrokerError as exc:
                self.note(f"new failed: {exc!r}")
                return
            finally:
                self.news_inflight -= 1
            if txn in self.ids_seen:
                raise self.fail(f"transaction id {txn} handed out twice")
            self.ids_seen.add(txn)
            self.txns[txn] = TxnModel(txn, self.tc.get(txn).timeout_at_ms, owner=owner)
            self.note(f"new {txn} ttl {ttl} owner {owner}")

        self.spawn(go())

    def service_now(self) -> TransactionCoordinatorService:
        assert self.service is not None
        return self.service

    async def op_add_partition(self) -> None:
        model = self.pick(open_only=True)
        if model is None:
            return
        partition = self.rng.choice(PARTITIONS)
        model.maybe_partitions.add(partition)

        async def go() -> None:
            try:
                await self.service_now().add_partitions(model.txn, [partition])
            except BrokerError as exc:
                self.note(f"add partition {model.txn} {partition} failed: {exc!r}")
                return
            model.partitions.add(partition)
            self.note(f"added {partition} to {model.txn}")

        self.spawn(go())

    async def op_add_subscription(self) -> None:
        model = self.pick(open_only=True)
        if model is None:
            return
        sub = self.rng.choice(SUBSCRIPTIONS)
        model.maybe_subscriptions.add(sub)

        async def go() -> None:
            try:
                await self.service_now().add_subscriptions(model.txn, [sub])
            except BrokerError as exc:
                self.note(f"add subscription {model.txn} {sub} failed: {exc!r}")
                return
            model.subscriptions.add(sub)
            self.note(f"added {sub} to {model.txn}")

        self.spawn(go())

    async def op_end(self) -> None:
        model = self.pick(open_only=self.rng.random() < 0.7)
        if model is None:
            return
        action = self.rng.choice([TxnAction.COMMIT, TxnAction.ABORT])
        already = model.ended  # answered before this was asked: this one must find it finished
        model.end_asked = True

        async def go() -> None:
            try:
                await self.service_now().end_txn(model.txn, action)
            except (TransactionNotFound, InvalidTxnStatus, BrokerError) as exc:
                if already is not None and not isinstance(exc, TransactionNotFound):
                    raise self.fail(f"end of finished {model.txn} answered {exc!r}, not TransactionNotFound") from exc
                self.note(f"end {action.name} {model.txn} failed: {exc!r}")
                return
            if model.ended is not None:
                raise self.fail(f"{model.txn} ended twice (now {action.name}, before {model.ended.name})")
            model.ended = action
            self.stats.commits += action is TxnAction.COMMIT
            self.stats.aborts += action is TxnAction.ABORT
            self.note(f"ended {model.txn} {action.name}")
            self.check_applied(model, action)

        self.spawn(go())

    async def op_bad_end(self) -> None:
        service = self.service_now()
        try:
            await service.end_txn(TxnId(0, 10**12 + self.rng.randrange(1000)), TxnAction.COMMIT)
            raise self.fail("a transaction never opened was ended")
        except TransactionNotFound:
            pass
        except CoordinatorNotFound as exc:
            raise self.fail("coordinator 0 not found") from exc
        try:
            await service.end_txn(TxnId(5, 0), TxnAction.ABORT)
            raise self.fail("coordinator 5 answered")
        except CoordinatorNotFound:
            pass

    async def op_participants(self) -> None:
        choice = self.rng.randrange(3)
        if choice == 0:
            self.participants.holding = True
        elif choice == 1:
            self.participants.release()
        else:
            self.participants.fail_next = self.rng.randint(1, 4)
        self.note(f"participants {choice}")

    async def op_advance(self) -> None:
        self.clock.advance(self.rng.randint(0, 1_500))
        self.timers.fire_due()
        now = self.clock.now_ms()
        for model in self.txns.values():
            if model.ended is None and model.deadline_ms <= now:
                model.end_asked = True  # the timeout check may abort it
        service = self.service_now()

        async def go() -> None:
            self.stats.timeouts += await service.check_timeouts()

        self.spawn(go())

    async def op_faults(self) -> None:
        choice = self.rng.randrange(4)
        if choice == 0:
            self.storage_plan.arm(fail_after_ops=self.rng.randint(0, 4))
        elif choice == 1:
            self.meta_plan.arm(fail_after_ops=self.rng.randint(0, 4))
        else:
            self.storage_plan.disarm()
            self.meta_plan.disarm()
        self.stats.faults += choice < 2
        self.note(f"faults {choice}")

    async def op_switch(self) -> None:
        """PIP-160's runtime switch: flip the coordinator log's batching (stored first, then applied live), by
        the batchedLog route, by Pulsar's update-dynamic-config key, or by deleting that key (broker.conf's
        setting applies again)."""
        assert self.switch is not None
        way = self.rng.randrange(3)
        enabled = self.batching.enabled if way == 2 else self.rng.random() < 0.5
        before = set(self.batching_stored)
        self.batching_stored |= {enabled}  # in doubt until the answer: a failed put may have been stored
        try:
            if way == 0:
                await self.switch.update(LogFamily.TRANSACTION_LOG, enabled=enabled)
            elif way == 1:
                await self.switch.set_key("transactionLogBatchedWriteEnabled", "true" if enabled else "false")
            else:
                await self.switch.delete_key("transactionLogBatchedWriteEnabled")
        except BrokerError as exc:
            self.note(f"switch batching {enabled} (way {way}) failed: {exc!r}")
            return
        self.batching_stored = {enabled}
        writer = self.tc.log.writer
        if getattr(writer, "config", None) is None or writer.config.enabled is not enabled:  # type: ignore[attr-defined]
            raise self.fail(f"the running log did not switch to batching={enabled}")
        self.note(f"switched batching to {enabled} (stored before: {before})")

    async def op_restart(self) -> None:
        """Graceful: participants answer, what is in flight finishes, the service closes and reopens."""
        self.storage_plan.disarm()
        self.meta_plan.disarm()
        self.participants.release()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        await self.shutdown()
        self.participants.kill()  # nothing of the old process runs any more
        assert self.store is not None and self.meta is not None
        await self.store.close()
        await self.meta.close()
        self.stats.restarts += 1
        self.note("restart")
        await self.recover()

    async def op_crash(self) -> None:
        """SIGKILL now: unsynced writes may vanish; every operation in flight is cut where it is."""
        assert self.meta is not None
        self.stats.ends_cut_by_crash += sum(1 for m in self.txns.values() if m.end_asked and m.ended is None)
        self.news_cut += self.news_inflight  # before the cut: cancelled tasks count themselves out
        self.disk.crash(keep_unsynced_probability=0.5)
        self.meta.kill()
        self.timers.cancel_all()
        self.participants.kill()
        for task in list(self.inflight):
            task.cancel()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        self.news_inflight = 0
        self.stats.crashes += 1
        self.note("crash")
        await self.recover()

    # ---- invariants --------------------------------------------------------------------------------------

    def check_applied(self, model: TxnModel, action: TxnAction) -> None:
        outcomes = self.participants.outcomes.get(model.txn, {})
        keys = set(model.partitions) | {f"{t}/{s}" for t, s in model.subscriptions}
        for key in keys:
            if outcomes.get(key) != {action}:
                raise self.fail(f"{model.txn} answered {action.name} but {key} has {outcomes.get(key)}")

    async def recover(self) -> None:
        await self.boot()
        tc = self.tc
        known = set(self.txns)
        strangers = [t for t in tc.txns if t not in known]
        if len(strangers) > self.news_cut:
            raise self.fail(f"recovered transactions nobody opened: {strangers}")
        self.ids_seen.update(tc.txns)
        for model in self.txns.values():
            meta = tc.txns.get(model.txn)
            if model.ended is not None and meta is not None:
                raise self.fail(f"{model.txn} answered {model.ended.name} but recovered as {meta.status.name}")
            if model.ended is None and not model.end_asked and model.deadline_ms > self.clock.now_ms():
                if meta is None or meta.status is not TxnStatus.OPEN or meta.timeout_at_ms != model.deadline_ms:
                    raise self.fail(f"open {model.txn} lost or changed by recovery: {meta}")
                if meta.owner != model.owner:
                    raise self.fail(f"{model.txn} opened by {model.owner!r} recovered owned by {meta.owner!r}")
                if not model.partitions <= set(meta.partitions) <= model.partitions | model.maybe_partitions:
                    raise self.fail(f"{model.txn} partitions {set(meta.partitions)} vs answered {model.partitions}")
                subs = set(meta.subscriptions)
                if not model.subscriptions <= subs <= model.subscriptions | model.maybe_subscriptions:
                    raise self.fail(f"{model.txn} subscriptions {subs} vs answered {model.subscriptions}")
        self.participants.release()
        self.participants.fail_next = 0
        await tc.settle()
        await let_turns_pass(SETTLE_TURNS)
        self.check_settled()

    def check_settled(self) -> None:
        tc = self.tc
        for txn, meta in tc.txns.items():
            if meta.status is not TxnStatus.OPEN:
                raise self.fail(f"{txn} still {meta.status.name} after recovery settled")
        for txn, outcomes in self.participants.outcomes.items():
            actions = set().union(*outcomes.values())
            if len(actions) > 1:
                raise self.fail(f"{txn} reached participants as {sorted(a.name for a in actions)}")
            model = self.txns.get(txn)
            if model is None or txn in tc.txns:
                continue
            action = next(iter(actions))
            if model.ended is not None and model.ended is not action:
                raise self.fail(f"{txn} answered {model.ended.name} but participants got {action.name}")
            self.check_applied(model, action)


def run_txn_seed(seed: int, ops: int) -> tuple[TxnStats, str]:
    sim = TxnSimulation(seed, ops)
    stats = asyncio.run(sim.run())
    return stats, sim.digest()


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="the transaction coordinator simulator: seeds and replays")
    parser.add_argument("--seed", type=int, help="replay one seed (prints its trace)")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds from --start")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--ops", type=int, default=500)
    args = parser.parse_args()
    if args.seed is not None:
        sim = TxnSimulation(args.seed, args.ops)
        try:
            print(asyncio.run(sim.run()))
        finally:
            print("\n".join(sim.trace))
        return
    for seed in range(args.start, args.start + args.seeds):
        try:
            run_txn_seed(seed, args.ops)
        except InvariantViolation as exc:
            print(f"{exc}\nreplay: python -m tests.sim.tc_world --seed {seed} --ops {args.ops}", file=sys.stderr)
            sys.exit(1)
    print(f"{args.seeds} seeds x {args.ops} ops: every invariant held")


if __name__ == "__main__":
    main()
