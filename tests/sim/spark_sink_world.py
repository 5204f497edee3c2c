"""A seeded simulation of the Spark exactly-once sink (``magnetar.spark.exactly_once``) across killed tasks and
killed drivers: the sink's real code (tasks' ``write_in_txn``, the driver's ``commit_stream`` / ``abort_txns``, the
intents and open-transaction records of ``sink_state`` on a real temporary directory) against an in-memory broker
(a coordinator that forgets ended transactions, one output partition whose readers stop before the first entry
of the oldest open transaction) and a model of Spark's micro-batch loop (an offset log written before a batch
runs, one writer per batch planned, task attempts retried up to four times, a commit log written after the
sink's commit, a restart resuming at the first uncommitted batch).

Every simulated process (a task attempt, a driver run) may die after a number of steps drawn from the seed: a
step is a broker request, a hook point of the sink (``test_hooks``), a sink file written or removed. A dead process
does nothing more (its exception handlers reach no broker), like SIGKILL. A task's death fails the attempt; it may
take its driver with it. The seed's last driver run has no deaths and must finish.

Invariants: what readers see never holds a row twice and never loses a row it showed; no transaction an intent
names is ever aborted; and once the clean run ends, every input row is visible exactly once, no record is left
and no transaction that wrote an entry is open, with no transaction timeout having fired (the coordinator's clock
never reaches one: issue 38 is that nothing may wait for it). Only a transaction whose task died between opening it
and recording it stays open (until its timeout): it has no entry, so it holds nothing back.

    .venv/bin/python -m tests.sim.spark_sink_world --seeds 2000      # soak
    .venv/bin/python -m tests.sim.spark_sink_world --seed 17          # replay one seed, with its trace
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from magnetar.client.errors import InvalidTxnStatus, TransactionNotFound
from magnetar.spark import exactly_once, runtime, test_hooks
from magnetar.spark.options import EXACTLY_ONCE, parse_sink
from magnetar.spark.sink_state import OpenRecord, SinkFiles, TxnRef

ATTEMPTS_MAX = 4
RUNS_MAX = 8
OPEN, COMMITTED, ABORTED = "open", "committed", "aborted"


class Killed(BaseException):
    """The simulated process died: nothing after this point runs (handlers that reach the broker fail too)."""


class InvariantViolation(AssertionError):
    pass


@dataclass
class Proc:
    """A task attempt or a driver run: dies when ``steps_left`` reaches 0 (None: never)."""

    name: str
    steps_left: int | None
    dead: bool = False

    def step(self, what: str, trace: list[str]) -> None:
        if self.dead:
            raise Killed(self.name)
        if self.steps_left is not None:
            self.steps_left -= 1
            if self.steps_left <= 0:
                self.dead = True
                trace.append(f"  {self.name} killed at {what}")
                raise Killed(self.name)


@dataclass
class Broker:
    """The coordinator and the one output partition."""

    trace: list[str]
    txns: dict[tuple[int, int], str] = field(default_factory=dict)  # live ones only: ended ones are forgotten
    outcome: dict[tuple[int, int], str] = field(default_factory=dict)  # every txn's last state, for the checks
    entries: list[tuple[str, tuple[int, int] | None]] = field(default_factory=list)
    next_txn: int = 0
    proc: Proc | None = None

    def step(self, what: str) -> None:
        assert self.proc is not None
        self.proc.step(what, self.trace)

    def end(self, txn_id: tuple[int, int], state: str) -> None:
        self.step(f"end {txn_id} {state}")
        if self.txns.get(txn_id) != OPEN:
            raise TransactionNotFound(f"transaction {txn_id} not found")
        del self.txns[txn_id]
        self.outcome[txn_id] = state
        self.trace.append(f"  {self.proc.name if self.proc else '?'}: {state} {txn_id}")

    def visible(self) -> list[str]:
        """What a reader sees: entries before the first entry of an open txn, committed or plain."""
        out = []
        for value, txn in self.entries:
            if txn is not None and self.txns.get(txn) == OPEN:
                break
            if txn is None or self.outcome.get(txn) == COMMITTED:
                out.append(value)
        return out


class FakeTxn:
    def __init__(self, broker: Broker, txn_id: tuple[int, int]) -> None:
        self.broker, self.txn_id = broker, txn_id

    async def register_partition(self, topic: str) -> None:
        self.broker.step("register")

    async def commit(self) -> None:
        self.broker.end(self.txn_id, COMMITTED)

    async def abort(self) -> None:
        self.broker.end(self.txn_id, ABORTED)


class FakeProducer:
    def __init__(self, broker: Broker, topic: str) -> None:
        self.broker, self.topic = broker, topic

    def send_nowait(self, data: bytes, *, txn: FakeTxn | None = None, **_: Any) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            self.broker.step("send")
            if txn is not None and self.broker.txns.get(txn.txn_id) != OPEN:
                raise InvalidTxnStatus(f"transaction {txn.txn_id} is not open")
            self.broker.entries.append((data.decode(), None if txn is None else txn.txn_id))
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)
        return future

    async def flush(self) -> None:
        self.broker.step("flush")


class FakeClient:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def new_transaction(self, timeout_ms: int) -> FakeTxn:
        self.broker.step("new txn")
        txn_id = (0, self.broker.next_txn)
        self.broker.next_txn += 1
        self.broker.txns[txn_id] = OPEN
        self.broker.outcome[txn_id] = OPEN
        return FakeTxn(self.broker, txn_id)

    async def transaction_of(self, txn_id: tuple[int, int], timeout_ms: int = 0) -> FakeTxn:
        return FakeTxn(self.broker, txn_id)

    async def create_producer(self, topic: str, **_: Any) -> FakeProducer:
        self.broker.step("producer")
        return FakeProducer(self.broker, topic)


class SimFiles(SinkFiles):
    """The real files, with a step (a chance to die) before and after every write."""

    broker: Broker

    def record_open(self, record: OpenRecord) -> None:
        self.broker.step("before record")
        super().record_open(record)
        self.broker.step("after record")

    def forget(self, txn: tuple[int, int]) -> None:
        self.broker.step("before forget")
        super().forget(txn)

    def save_intent(self, batch_id: int, txns: list[TxnRef], *, done: bool) -> None:
        self.broker.step(f"before intent {batch_id} done={done}")
        super().save_intent(batch_id, txns, done=done)
        SpySink.intents.update((most, least) for most, least, _ in txns)
        self.broker.step("after intent")


class SpySink:
    intents: set[tuple[int, int]] = set()  # every txn any intent ever named (pruned intents too)


@contextlib.contextmanager
def _patched(broker: Broker) -> Iterator[None]:
    client = FakeClient(broker)
    SimFiles.broker = broker
    saved = (runtime.client_for, test_hooks.reached, exactly_once.SinkFiles)
    runtime.client_for = lambda *_a, **_k: client  # type: ignore[assignment]
    test_hooks.reached = lambda point: broker.step(f"hook {point}")  # type: ignore[assignment]
    exactly_once.SinkFiles = SimFiles  # type: ignore[misc]
    try:
        yield
    finally:
        runtime.client_for, test_hooks.reached, exactly_once.SinkFiles = saved  # type: ignore[misc]


@dataclass
class SinkStats:
    runs: int = 0
    driver_deaths: int = 0
    task_deaths: int = 0
    failed_batches: int = 0
    batches: int = 0
    aborted: int = 0
    left_empty: int = 0  # txns opened by a task killed before recording them: they hold nothing


class SinkSimulation:
    def __init__(self, seed: int, work: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.trace: list[str] = [f"seed {seed}"]
        self.broker = Broker(self.trace)
        self.rows = self.rng.randint(10, 90)
        self.per_batch = self.rng.randint(3, 30)
        self.tasks = self.rng.randint(1, 3)
        self.death_chance = self.rng.choice((0.1, 0.3, 0.6))
        self.opts = parse_sink({"service.url": "pulsar://sim:6650", "topic": "out", "checkpointLocation": str(work),
                                "deliveryGuarantee": EXACTLY_ONCE, "sinkId": "sim"})
        self.offsets: dict[int, tuple[int, int]] = {}
        self.commits: set[int] = set()
        self.shown: list[str] = []
        self.stats = SinkStats()
        self.writers = 0
        SpySink.intents = set()

    def _proc(self, name: str, clean: bool) -> Proc:
        dies = not clean and self.rng.random() < self.death_chance
        return Proc(name, self.rng.randint(1, 14) if dies else None)

    def _batch(self, start: int, end: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array([f"r{i}".encode() for i in range(start, end)], pa.binary())], names=["value"])

    def _run_task(self, batch: int, chunk: tuple[int, int], writer: str, part: int, clean: bool,
                  driver: Proc) -> exactly_once.TxnCommit | None:
        for attempt in range(ATTEMPTS_MAX):  # bounded
            proc = self.broker.proc = self._proc(f"task b{batch} p{part} a{attempt}", clean)
            runtime.process_cache().clear()  # a new Python worker: no producers cached
            try:
                return exactly_once.write_in_txn(self.opts, iter([self._batch(*chunk)]), writer)
            except Killed:
                self.stats.task_deaths += 1
                if not clean and self.rng.random() < 0.3:
                    driver.dead = True  # the driver went down with its executor
                    self.trace.append(f"  driver dies with {proc.name}")
                    raise
            except Exception as exc:  # e.g. its txn was aborted under it: Spark retries
                self.trace.append(f"  {proc.name} failed: {exc}")
            finally:
                self.broker.proc = driver
        return None

    def _driver_run(self, clean: bool) -> bool:
        """One run of the query until it ends (True) or dies or fails (False)."""
        self.stats.runs += 1
        driver = self.broker.proc = self._proc(f"driver {self.stats.runs}", clean)
        batch = max(self.commits, default=-1) + 1
        while True:  # bounded: each pass commits a batch of at least one row, or returns
            if batch not in self.offsets:
                start = self.offsets[batch - 1][1] if batch else 0
                if start >= self.rows:
                    return True
                self.offsets[batch] = (start, min(self.rows, start + self.per_batch))
            start, end = self.offsets[batch]
            self.writers += 1
            writer = f"writer-{self.writers}"
            self.trace.append(f"batch {batch} [{start}, {end}) by {writer}")
            bounds = [start + (end - start) * i // self.tasks for i in range(self.tasks + 1)]
            messages: list[Any] = []
            try:
                exactly_once.prepare_stream(self.opts)  # Spark builds the batch's writer on the driver
                for part in range(self.tasks):
                    driver.step(f"schedule p{part}", self.trace)
                    messages.append(self._run_task(batch, (bounds[part], bounds[part + 1]), writer, part, clean,
                                                   driver))
                if any(m is None for m in messages):
                    self.stats.failed_batches += 1
                    exactly_once.abort_txns(self.opts, messages, batch)
                    return False
                exactly_once.commit_stream(self.opts, messages, batch)
                driver.step("before spark commit log", self.trace)
            except Killed:
                self.stats.driver_deaths += 1
                return False
            self.commits.add(batch)
            self.stats.batches += 1
            self._check_visible()
            batch += 1

    def _check_visible(self) -> None:
        seen = self.broker.visible()
        if len(seen) != len(set(seen)):
            raise InvariantViolation(f"seed {self.seed}: a row visible twice: {sorted(seen)}")
        if seen[:len(self.shown)] != self.shown:
            raise InvariantViolation(f"seed {self.seed}: rows once visible went away: {self.shown} -> {seen}")
        self.shown = seen
        wrongly = {t for t, s in self.broker.outcome.items() if s == ABORTED} & SpySink.intents
        if wrongly:
            raise InvariantViolation(f"seed {self.seed}: transactions named by an intent were aborted: {wrongly}")

    def run(self) -> SinkStats:
        with _patched(self.broker):
            for _ in range(RUNS_MAX):  # bounded
                self._driver_run(clean=False)
                self._check_visible()
            if not self._driver_run(clean=True):
                raise InvariantViolation(f"seed {self.seed}: the clean run did not finish")
        self._check_visible()
        self._check_done()
        self.stats.aborted = sum(1 for s in self.broker.outcome.values() if s == ABORTED)
        return self.stats

    def _check_done(self) -> None:
        expected = sorted(f"r{i}" for i in range(self.rows))
        if sorted(self.shown) != expected:
            missing = sorted(set(expected) - set(self.shown))
            raise InvariantViolation(f"seed {self.seed}: after the clean run, missing {missing}; open "
                                     f"{sorted(self.broker.txns)}")
        holding = {txn for _, txn in self.broker.entries if txn in self.broker.txns}
        if holding:
            raise InvariantViolation(f"seed {self.seed}: transactions with entries left open: {sorted(holding)}")
        self.stats.left_empty = len(self.broker.txns)  # opened, killed before their record: no entry, no hold
        left = SinkFiles(self.opts.checkpoint_location or "", self.opts.sink_id).open_records()
        if left:
            raise InvariantViolation(f"seed {self.seed}: records left: {left}")

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()[:16]


def run_sink_seed(seed: int) -> tuple[SinkStats, SinkSimulation]:
    with tempfile.TemporaryDirectory(prefix="sink-sim-") as work:
        sim = SinkSimulation(seed, Path(work))
        return sim.run(), sim


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="the Spark exactly-once sink simulator: seeds and replays")
    parser.add_argument("--seed", type=int, help="replay one seed (prints its trace)")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds from --start")
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args()
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="sink-sim-") as work:
            sim = SinkSimulation(seed, Path(work))
            try:
                stats = sim.run()
            except InvariantViolation as exc:
                print("\n".join(sim.trace))
                print(exc)
                print(f"replay: .venv/bin/python -m tests.sim.spark_sink_world --seed {seed}")
                sys.exit(1)
            if args.seed is not None:
                print("\n".join(sim.trace))
                print(stats)
    print(f"{len(seeds)} seeds ok")


if __name__ == "__main__":
    main()
