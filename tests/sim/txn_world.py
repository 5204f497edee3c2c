"""The seeded simulator, transactions at a topic: its transaction buffer and pending-ack stores over the
crashable storage of ``world.py`` (unsynced writes vanish at a crash), with time on a manual clock.

The simulation plays the coordinator: it opens transactions, sends transactional and plain messages
(several in flight), acks in transactions on two subscriptions, decides commit or abort and ends the
transaction on the partition and its subscriptions (an end may be cut by a crash, then it is driven again
after recovery, as the coordinator's log makes it), advances time (snapshot and cursor timers), restarts
gracefully and crashes. After every restart and crash, and at the end once every transaction is ended:

* isolation: what a consumer can read (up to ``maxReadPosition``, without markers and aborted entries) holds
  no entry of an open or aborted transaction;
* atomicity and no lost commit: every receipted entry of a committed transaction (whose end returned) and
  every receipted plain entry, up to ``maxReadPosition``, is readable; at the end, with nothing open, all are;
* pending acks: an ack of an open transaction is pending again after recovery; a committed one is on the
  cursor (a commit writes no cursor record: the pending-ack log keeps it until the cursor's next write, and
  replay applies it again); an aborted one is not; no ack appears that no committed transaction made;
* at the end, once time passed the cursors' persist interval, the pending-ack logs hold no record of an
  ended transaction (every one was released).

The pending-ack logs are written through PIP-160's buffered writer, batching or not as the seed draws, and
the seed flips the switch at runtime (``BatchedLogSwitch``): the running stores follow at their next write,
so a crash finds any mix of plain and batched entries.

Run it: ``.venv/bin/python -m tests.sim.txn_world --seeds 1000 --ops 300`` (``--seed N --trace`` replays).
"""

from __future__ import annotations

import asyncio
import random
import sys
from dataclasses import dataclass, field

from magnetar import protocol as proto
from magnetar.broker.dispatcher import GATE_DROP
from magnetar.broker.names import TopicName
from magnetar.broker.subscription import Subscription
from magnetar.broker.transactions.api import TransactionConflict, TxnAction, TxnId
from magnetar.broker.transactions.batching import BatchedLogSwitch, LogFamily
from magnetar.broker.transactions.buffered_writer import BatchingConfig
from magnetar.broker.transactions.pending_ack_log import WHOLE, AckedId, ManagedLedgerAckLog
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore, SnapshotStore
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import InitialPosition, ManagedLedger, ManagedLedgerConfig, ManagedLedgerError, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.faulty import CrashableLedgerStore, SimDisk
from tests.sim.world import SeedTrace, Timers, let_turns_pass, seed_main

TOPIC = TopicName.parse("persistent://sim/ns/txn")
SUBSCRIPTIONS = ("a", "b")
OPEN_TXNS_MAX = 4
SETTLE_TURNS = 40
READ_BATCH = 128


@dataclass
class TxnModel:
    txn: TxnId
    decision: TxnAction | None = None
    ended_on_topic: bool = False
    ended_on: set[str] = field(default_factory=set)  # subscriptions whose end returned
    sending: int = 0
    acks: dict[str, set[Position]] = field(default_factory=dict)  # acks that were answered OK


class FakeTopic:
    """What TopicTransactions needs of a topic (``TxnTopic``)."""

    def __init__(self, ledger: ManagedLedger, clock: ManualClock) -> None:
        self.name = TOPIC
        self.ledger = ledger
        self.clock = clock
        self.subscriptions: dict[str, Subscription] = {}

    async def append_internal(self, entry: bytes) -> Position:
        return await self.ledger.add_entry(entry)

    def wake_subscriptions(self) -> None:
        pass


@dataclass
class TxnStats:
    ops: int = 0
    crashes: int = 0
    restarts: int = 0
    commits: int = 0
    aborts: int = 0
    conflicts: int = 0
    redriven: int = 0


class TxnSimulation(SeedTrace):
    FAIL_LABEL = "txn seed"

    def __init__(self, seed: int, ops: int) -> None:
        self.seed, self.ops_total = seed, ops
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.disk = SimDisk(random.Random(self.rng.getrandbits(64)))
        self.metadata = MemoryMetadataStore(clock=self.clock)
        self.config = ManagedLedgerConfig(max_entries_per_ledger=self.rng.choice([3, 8, 50]))
        self.snapshot_interval_ms = self.rng.choice([0, 50, 1000])
        self.batching = BatchingConfig(enabled=self.rng.random() < 0.5, max_records=self.rng.choice([10, 30]),
                                       max_bytes=128 * 1024, max_delay_ms=self.rng.choice([1, 20]))
        self.txns: dict[TxnId, TxnModel] = {}
        self.next_txn = 0
        self.next_seq = 0
        self.entry_txn: dict[int, TxnId | None] = {}  # every seq sent -> its txn
        self.receipted: dict[int, Position] = {}
        self.committed_acks: dict[str, set[Position]] = {s: set() for s in SUBSCRIPTIONS}
        self.inflight: set[asyncio.Task[None]] = set()
        self.stats = TxnStats()
        self.trace: list[str] = []
        self.step = 0
        self.world = 0

    # ---- worlds --------------------------------------------------------------------------------------------

    async def boot(self) -> None:
        self.world += 1
        self.timers = Timers(self.clock)
        self.store = CrashableLedgerStore(self.disk, clock=self.clock)
        self.factory = LedgerFactory(self.store, self.metadata,
                                     config=self.config, clock=self.clock, sleep_ms=self.timers.sleep_ms)
        ledger = await self.factory.open(TOPIC.managed_ledger_name)
        self.topic = FakeTopic(ledger, self.clock)
        for name in SUBSCRIPTIONS:
            cursor = await ledger.open_cursor(name, InitialPosition.EARLIEST)
            self.topic.subscriptions[name] = Subscription(
                name, ledger, cursor, self.clock, durable=True, read_batch_max=10, read_bytes_max=1 << 20
            )
            self.topic.subscriptions[name].sub_type = 1  # Shared
        self.switch = BatchedLogSwitch(BatchingConfig(), self.batching, self.metadata, sleep_ms=self.timers.sleep_ms)
        await self.switch.load()
        switch = self.switch
        self.tt = TopicTransactions(self.topic, ledgers=self.factory, snapshots=await self.snapshot_store(),
                                    ledger_config=self.config, snapshot_min_interval_ms=self.snapshot_interval_ms,
                                    sleep_ms=self.timers.sleep_ms,
                                    new_writer=lambda ledger: switch.new_writer(LogFamily.PENDING_ACK, ledger))
        await self.tt.recover()

    async def snapshot_store(self) -> SnapshotStore:
        """Where this world's buffer keeps its snapshots (``txn_snapshot_world`` puts PIP-178's segments here)."""
        return MetadataSnapshotStore(self.metadata)

    async def run(self) -> TxnStats:
        await self.boot()
        operations = [
            (10, self.op_open), (30, self.op_send), (15, self.op_ack), (12, self.op_end), (10, self.op_advance),
            (2, self.op_restart), (4, self.op_crash), (3, self.op_switch),
        ]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.stats.ops += 1
            await let_turns_pass(self.rng.randint(0, 3))
        self.step += 1
        await self.finish()
        self.timers.cancel_all()
        return self.stats

    # ---- operations ----------------------------------------------------------------------------------------

    def open_txns(self) -> list[TxnModel]:
        return [m for m in self.txns.values() if m.decision is None]

    async def op_open(self) -> None:
        if len(self.open_txns()) >= OPEN_TXNS_MAX:
            return
        txn = TxnId(0, self.next_txn)
        self.next_txn += 1
        self.txns[txn] = TxnModel(txn)
        self.note(f"open {txn}")

    def spawn(self, work: asyncio.Future[None] | asyncio.Task[None]) -> None:
        task = asyncio.ensure_future(work)
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)

    async def op_send(self) -> None:
        candidates = self.open_txns()
        model = self.rng.choice(candidates) if candidates and self.rng.random() < 0.7 else None
        for _ in range(self.rng.randint(1, 4)):
            seq = self.next_seq
            self.next_seq += 1
            meta = proto.pb.MessageMetadata(producer_name="sim", sequence_id=seq, publish_time=self.clock.now_ms())
            if model is not None:
                meta.txnid_most_bits, meta.txnid_least_bits = model.txn.most, model.txn.least
                model.sending += 1
            self.entry_txn[seq] = model.txn if model is not None else None
            started = self.tt.send_started(meta)
            future = self.topic.ledger.add_entry_future(proto.make_entry(meta, b"%d" % seq))
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a crashed world's failures
            if started is not None:
                self.tt.watch_send(started, future)
            self.spawn(self.receipt(seq, model, future, self.world))
        self.note(f"send {model.txn if model else 'plain'} up to seq {self.next_seq - 1}")

    async def receipt(self, seq: int, model: TxnModel | None, future: asyncio.Future[Position], world: int) -> None:
        try:
            position = await future
        except (ManagedLedgerError, asyncio.CancelledError):
            return
        finally:
            if model is not None and world == self.world:
                model.sending -= 1
        if world == self.world:
            self.receipted[seq] = position

    async def op_ack(self) -> None:
        candidates = self.open_txns()
        visible = await self.visible()
        if not candidates or not visible:
            return
        model, sub = self.rng.choice(candidates), self.rng.choice(SUBSCRIPTIONS)
        position = self.rng.choice(sorted(visible.values()))
        taken = position in self.committed_acks[sub] or any(
            position in m.acks.get(sub, set()) for m in self.txns.values()
            if m.txn != model.txn and sub not in m.ended_on
        )
        try:
            await self.tt.acknowledge(self.topic.subscriptions[sub], model.txn, False, [AckedId(position, WHOLE, 0)])
        except TransactionConflict:
            if not taken:
                raise self.fail(f"{model.txn} ack of {position} on {sub} refused without a conflict") from None
            self.stats.conflicts += 1
            self.note(f"ack {model.txn} {sub} {position}: conflict")
            return
        if taken:
            raise self.fail(f"{model.txn} ack of {position} on {sub} accepted over another's ack")
        model.acks.setdefault(sub, set()).add(position)
        self.note(f"ack {model.txn} {sub} {position}")

    async def op_end(self) -> None:
        candidates = [m for m in self.open_txns() if m.sending == 0]
        if not candidates:
            return
        model = self.rng.choice(candidates)
        model.decision = self.rng.choice([TxnAction.COMMIT, TxnAction.ABORT])  # the coordinator logged it
        self.note(f"end {model.txn} {model.decision.name}")
        self.spawn(self.drive_end(model, self.world))

    async def drive_end(self, model: TxnModel, world: int) -> None:
        assert model.decision is not None
        if not model.ended_on_topic:
            await self.tt.end_on_partition(model.txn, model.decision)
            if world != self.world:
                return
            model.ended_on_topic = True
        for sub in sorted(model.acks):
            if sub in model.ended_on:
                continue
            await self.tt.end_on_subscription(sub, model.txn, model.decision)
            if world != self.world:
                return
            model.ended_on.add(sub)
            if model.decision is TxnAction.COMMIT:
                self.committed_acks[sub] |= model.acks[sub]
        if model.decision is TxnAction.COMMIT:
            self.stats.commits += 1
        else:
            self.stats.aborts += 1

    async def op_advance(self) -> None:
        await let_turns_pass(SETTLE_TURNS)
        self.clock.advance(self.rng.choice([10, 60, 200, 1500]))
        self.timers.fire_due()
        await let_turns_pass(SETTLE_TURNS)
        self.note("advance")

    async def op_switch(self) -> None:
        """PIP-160's runtime switch on the pending-ack logs: the running stores follow at their next write."""
        enabled = self.rng.random() < 0.5
        await self.switch.update(LogFamily.PENDING_ACK, enabled=enabled)
        self.note(f"pending-ack batching {enabled}")

    async def op_restart(self) -> None:
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        await self.tt.close()
        await self.factory.close()
        self.timers.cancel_all()
        self.stats.restarts += 1
        self.note("restart")
        await self.recovered()

    async def op_crash(self) -> None:
        self.disk.crash(keep_unsynced_probability=0.5)
        self.timers.cancel_all()
        for task in list(self.inflight):
            task.cancel()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        for model in self.txns.values():
            model.sending = 0
        self.stats.crashes += 1
        self.note("crash")
        await self.recovered()

    async def recovered(self) -> None:
        await self.boot()
        await self.check()
        for model in self.txns.values():  # the coordinator's recovery drives ending transactions to the end
            if model.decision is not None and (not model.ended_on_topic or set(model.acks) - model.ended_on):
                self.stats.redriven += 1
                await self.drive_end(model, self.world)
        await self.check()

    async def finish(self) -> None:
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        for model in self.txns.values():
            if model.decision is None:
                model.decision = TxnAction.ABORT
            await self.drive_end(model, self.world)
        await self.check()
        await self.check_logs_released()
        if self.tt.buffer.max_read_position() is not None:
            raise self.fail(f"nothing is open, yet maxReadPosition is {self.tt.buffer.max_read_position()}")
        visible = set((await self.visible()).values())
        expected = {p for seq, p in self.receipted.items() if self.fate(seq) is TxnAction.COMMIT}
        if missing := expected - visible:
            raise self.fail(f"receipted committed or plain entries never became readable: {sorted(missing)}")

    # ---- invariants ----------------------------------------------------------------------------------------

    def fate(self, seq: int) -> TxnAction | None:
        txn = self.entry_txn[seq]
        return TxnAction.COMMIT if txn is None else self.txns[txn].decision

    async def visible(self) -> dict[int, Position]:
        """seq -> position of what a consumer can read now."""
        ledger = self.topic.ledger
        limit = self.tt.buffer.max_read_position() or ledger.last_confirmed
        gate = self.tt.gate(SUBSCRIPTIONS[0])
        cursor = ledger.new_non_durable_cursor(ledger.next_valid_position(ledger.first_position()), "sim-view")
        out: dict[int, Position] = {}
        while entries := await cursor.read_entries(READ_BATCH, max_position=limit):  # bounded by the ledger
            for entry in entries:
                meta = proto.parse_entry_metadata(entry.data)
                if meta.HasField("marker_type") or gate.verdict(entry.position, meta) == GATE_DROP:
                    continue
                out[int(proto.entry_payload(entry.data))] = entry.position
        await cursor.close()
        return out

    async def check(self) -> None:
        visible = await self.visible()
        limit = self.tt.buffer.max_read_position()
        for seq, position in visible.items():
            txn = self.entry_txn.get(seq, -1)
            if txn == -1:
                raise self.fail(f"an entry nobody sent is readable: {seq}")
            if txn is not None and self.txns[txn].decision is not TxnAction.COMMIT:  # open or aborted
                raise self.fail(f"isolation: {seq} of {txn} ({self.txns[txn].decision}) is readable at {position}")
        for seq, position in self.receipted.items():
            txn = self.entry_txn[seq]
            due = txn is None or (self.txns[txn].decision is TxnAction.COMMIT and self.txns[txn].ended_on_topic)
            if due and (limit is None or position <= limit) and seq not in visible:
                raise self.fail(f"lost: receipted {seq} ({txn}) at {position} is not readable (limit {limit})")
        for model in self.txns.values():
            if model.ended_on_topic and model.txn in self.tt.buffer.ongoing():
                raise self.fail(f"{model.txn} ended on the topic but is open again after recovery")
        self.check_acks()

    async def check_logs_released(self) -> None:
        """Every transaction has ended: once the persist interval passed, no pending-ack record is left."""
        await let_turns_pass(SETTLE_TURNS)
        self.clock.advance(self.config.cursor_persist_interval_ms)
        self.timers.fire_due()
        for store in self.tt.stores.values():
            await store.committed_released()
            ack_log = store.log
            assert isinstance(ack_log, ManagedLedgerAckLog)
            left = await ack_log.replay()
            if left:
                raise self.fail(f"{store.sub.name}: records of ended transactions left in the log: {left[:5]}")

    def check_acks(self) -> None:
        for sub in SUBSCRIPTIONS:
            cursor = self.topic.subscriptions[sub].cursor
            store = self.tt.stores.get(sub)
            for model in self.txns.values():
                for position in model.acks.get(sub, set()):
                    settled = sub in model.ended_on
                    held = store.in_progress().get(model.txn) if store is not None else None
                    pending = held is not None and position in held.individual
                    if model.decision is None and not pending:  # open: only its end may settle it
                        raise self.fail(f"ack of {position} by open {model.txn} on {sub} is no longer pending")
                    committed = model.decision is TxnAction.COMMIT
                    if committed and not pending and not cursor.is_acknowledged(position):
                        raise self.fail(f"committed ack of {position} by {model.txn} on {sub} lost")
                    if settled and pending:
                        raise self.fail(f"ack of {position} by {model.txn} on {sub} pending after its end")
            for position in self.receipted.values():
                if cursor.is_acknowledged(position) and position not in self.committed_acks[sub]:
                    owners = [m for m in self.txns.values() if position in m.acks.get(sub, set())
                              and m.decision is TxnAction.COMMIT]
                    if not owners:
                        raise self.fail(f"{position} is acknowledged on {sub} though no committed txn acked it")


def run_txn_seed(seed: int, ops: int) -> tuple[TxnStats, str]:
    sim = TxnSimulation(seed, ops)
    stats = asyncio.run(sim.run())
    return stats, sim.digest()


def main(argv: list[str] | None = None, simulation: type[TxnSimulation] = TxnSimulation,
         module: str = "tests.sim.txn_world") -> int:
    return seed_main(argv, simulation, module=module, default_ops=300, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
