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
  ended transaction (every one was released);
* dispatch: a Shared consumer on subscription ``a`` (a new one in every world, given permits a few at a time,
  so the dispatcher lags behind acks and aborts) is never handed an entry of an open or aborted transaction,
  and is handed an entry a second time only after an aborted transaction's ack gave it back (an abort of an
  entry not yet handed out must not deliver it twice: once from the replay set and once read, which a
  recovered pending ack ahead of the fresh read position did); at the end it was handed every readable entry
  not acknowledged on ``a``.

The pending-ack logs are written through PIP-160's buffered writer, batching or not as the seed draws, and
the seed flips the switch at runtime (``BatchedLogSwitch``): the running stores follow at their next write,
so a crash finds any mix of plain and batched entries.

Run it: ``.venv/bin/python -m tests.sim.txn_world --seeds 1000 --ops 300`` (``--seed N --trace`` replays).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from magnetar import protocol as proto
from magnetar.broker.names import TopicName
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.subscription.dispatcher import GATE_DROP
from magnetar.broker.subscription.subscription import Subscription
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
from tests.sim.world import InvariantViolation, SeedTrace, Timers, let_turns_pass, seed_main

TOPIC = TopicName.parse("persistent://sim/ns/txn")
SUBSCRIPTIONS = ("a", "b")
DISPATCHED = "a"  # the subscription a Shared consumer reads in every world
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


class RecordingEndpoint:
    """A consumer's connection that always has room: hands the stored bytes of every entry sent through it to
    ``on_entry`` until its world ends."""

    remote_address = "sim"
    client_version = "sim"
    protocol_version = 20
    connected_since_ms = 0

    def __init__(self, on_entry: Callable[[bytes], None]) -> None:
        self.is_open = True
        self._on_entry = on_entry

    def send_frame(self, frame: bytes) -> None:
        pass

    def send_frame_parts(self, head: bytes, payload: bytes) -> None:
        if self.is_open:
            self._on_entry(payload)

    def forget_producer(self, producer_id: int) -> None:
        pass

    def forget_consumer(self, consumer_id: int) -> None:
        pass

    async def drain(self) -> None:
        pass

    def has_output_room(self) -> bool:
        return True

    def output_turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def output_turn_if_free(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return contextlib.nullcontext(True)


@dataclass
class TxnStats:
    ops: int = 0
    crashes: int = 0
    restarts: int = 0
    commits: int = 0
    aborts: int = 0
    conflicts: int = 0
    redriven: int = 0
    delivered: int = 0
    redelivered: int = 0  # handed out again after an aborted transaction's ack gave it back


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
        self.endpoint: RecordingEndpoint | None = None
        self.delivered: dict[int, int] = {}  # seq -> times handed to this world's consumer
        self.given_back: dict[int, int] = {}  # seq -> deliveries an abort allowed beyond the first
        self.dispatch_violation: InvariantViolation | None = None  # seen in the dispatcher's task, raised here

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
        await self.attach_consumer()

    async def attach_consumer(self) -> None:
        """This world's Shared consumer on DISPATCHED (the subscriptions are opened before the recovery, as a
        topic's are at load; the consumer comes after it, as a client's SUBSCRIBE does)."""
        sub = self.topic.subscriptions[DISPATCHED]
        sub.gate = self.tt.gate(DISPATCHED)
        self.endpoint = RecordingEndpoint(self.handed_out)
        self.delivered, self.given_back = {}, {}
        self.consumer = Consumer(self.endpoint, consumer_id=self.world, name="sim", topic_name=str(TOPIC),
                                 subscription_name=DISPATCHED, sub_type=SubType.SHARED, priority_level=0,
                                 partition=-1, created_ms=0)
        sub.add_consumer(self.consumer)

    async def detach_consumer(self) -> None:
        """The world ends: its consumer hears nothing more and its dispatcher stops (no write: after a crash
        nothing of the old world may touch the store)."""
        if self.endpoint is not None:
            self.endpoint.is_open = False
        dispatcher = self.topic.subscriptions[DISPATCHED].dispatcher
        if dispatcher is not None:
            await dispatcher.close()

    def handed_out(self, data: bytes) -> None:
        """Called in the dispatcher's task, which would catch an exception and retry: a violation is kept for
        the simulation's own steps to raise (``raise_dispatch_violation``)."""
        seq = int(proto.entry_payload(data))
        txn = self.entry_txn[seq]
        times = self.delivered.get(seq, 0) + 1
        if txn is not None and self.txns[txn].decision is not TxnAction.COMMIT:
            self.dispatch_violated(f"dispatch isolation: {seq} of {txn} ({self.txns[txn].decision}) handed out")
        elif times > 1 + self.given_back.get(seq, 0):
            self.dispatch_violated(f"{seq} handed to the consumer {times} times, given back "
                                   f"{self.given_back.get(seq, 0)} times")
        self.delivered[seq] = times
        self.stats.delivered += 1
        self.stats.redelivered += times > 1

    async def snapshot_store(self) -> SnapshotStore:
        """Where this world's buffer keeps its snapshots (``txn_snapshot_world`` puts PIP-178's segments here)."""
        return MetadataSnapshotStore(self.metadata)

    async def run(self) -> TxnStats:
        await self.boot()
        operations = [
            (10, self.op_open), (30, self.op_send), (15, self.op_ack), (12, self.op_end), (10, self.op_advance),
            (2, self.op_restart), (4, self.op_crash), (3, self.op_switch), (8, self.op_flow),
        ]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.raise_dispatch_violation()
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
            if sub == DISPATCHED and model.decision is TxnAction.ABORT:
                await self.give_back(model.acks[sub])
                if world != self.world:
                    return
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

    async def give_back(self, positions: set[Position]) -> None:
        """An abort is about to release these acks: what the consumer was handed already may come again once
        (what it was not handed yet comes once, from wherever dispatch finds it). The entry names its seq: a
        crash may have kept an entry whose receipt it cut."""
        for position in sorted(positions):
            try:
                entry = await self.topic.ledger.read_entry(position)
            except ManagedLedgerError:
                return  # this world crashed meanwhile: its consumer is gone, and the end is not driven here
            seq = int(proto.entry_payload(entry.data))
            if seq in self.delivered:
                self.given_back[seq] = self.given_back.get(seq, 0) + 1

    async def op_advance(self) -> None:
        await let_turns_pass(SETTLE_TURNS)
        self.clock.advance(self.rng.choice([10, 60, 200, 1500]))
        self.timers.fire_due()
        await let_turns_pass(SETTLE_TURNS)
        self.note("advance")

    def dispatch_violated(self, what: str) -> None:
        if self.dispatch_violation is None:
            self.dispatch_violation = self.fail(what)

    def raise_dispatch_violation(self) -> None:
        if self.dispatch_violation is not None:
            raise self.dispatch_violation

    async def op_flow(self) -> None:
        """The consumer asks for a few more messages (few at a time: dispatch lags behind acks and ends)."""
        permits = self.rng.choice([1, 3, 10])
        self.topic.subscriptions[DISPATCHED].flow(self.consumer, permits)
        self.note(f"flow {permits}")

    async def op_switch(self) -> None:
        """PIP-160's runtime switch on the pending-ack logs: the running stores follow at their next write."""
        enabled = self.rng.random() < 0.5
        await self.switch.update(LogFamily.PENDING_ACK, enabled=enabled)
        self.note(f"pending-ack batching {enabled}")

    async def op_restart(self) -> None:
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        await self.detach_consumer()
        await self.tt.close()
        await self.factory.close()
        self.timers.cancel_all()
        self.stats.restarts += 1
        self.note("restart")
        await self.recovered()

    async def op_crash(self) -> None:
        self.disk.crash(keep_unsynced_probability=0.5)
        self.timers.cancel_all()
        await self.detach_consumer()
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
        visible = await self.visible()
        expected = {p for seq, p in self.receipted.items() if self.fate(seq) is TxnAction.COMMIT}
        if missing := expected - set(visible.values()):
            raise self.fail(f"receipted committed or plain entries never became readable: {sorted(missing)}")
        await self.check_all_handed_out(visible)
        await self.detach_consumer()

    async def check_all_handed_out(self, visible: dict[int, Position]) -> None:
        """Nothing is open: with permits enough, the consumer is handed every readable entry not acked on
        DISPATCHED (bounded: each flow hands out what is readable, or nothing is left)."""
        cursor = self.topic.subscriptions[DISPATCHED].cursor
        for _ in range(len(visible) + 1):
            owed = sorted(seq for seq, p in visible.items()
                          if seq not in self.delivered and not cursor.is_acknowledged(p))
            if not owed:
                return
            self.topic.subscriptions[DISPATCHED].flow(self.consumer, len(owed))
            await let_turns_pass(SETTLE_TURNS)
            self.raise_dispatch_violation()
        raise self.fail(f"readable and not acknowledged on {DISPATCHED}, never handed to its consumer: {owed[:10]}")

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
        self.raise_dispatch_violation()
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
            for seq, position in self.receipted.items():
                if sub == DISPATCHED and self.fate(seq) is TxnAction.ABORT:
                    continue  # dispatch acknowledges an aborted transaction's entries as it skips them
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
