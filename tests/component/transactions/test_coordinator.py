"""The transaction coordinator over a real managed ledger (in-memory stores) and recording participants."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from magnetar.broker.errors import BrokerError, NotAllowed
from magnetar.broker.transactions import txn_log
from magnetar.broker.transactions.api import (
    CoordinatorNotFound,
    InvalidTxnStatus,
    TransactionNotFound,
    TxnAction,
    TxnError,
    TxnId,
)
from magnetar.broker.transactions.buffered_writer import BatchingConfig, BufferedWriter
from magnetar.broker.transactions.coordinator import EndPolicy
from magnetar.broker.transactions.coordinators import CoordinatorSettings, TransactionCoordinatorService
from magnetar.broker.transactions.states import TxnStatus
from magnetar.broker.transactions.txn_log import SEQUENCE_BLOCK, Op, decode, log_topic
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol.txn_log_batch import LogKind, decode_entry
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.transactions.fakes import FakeParticipants

T1 = "persistent://public/default/t1"
T2 = "persistent://public/default/t2-partition-0"
FAST = EndPolicy(attempts_max=3, backoff_initial_ms=0, backoff_max_ms=0)


@dataclass
class World:
    store: MemoryLedgerStore
    metadata: MemoryMetadataStore
    clock: ManualClock
    participants: FakeParticipants
    service: TransactionCoordinatorService
    factory: LedgerFactory
    batching: bool

    async def restart(self, *, clean: bool = True, count: int = 1) -> TransactionCoordinatorService:
        """A new service over the same stores; ``clean=False`` abandons the old one as a crash would."""
        if clean:
            await self.service.close()
            await self.factory.close()
        self.factory = LedgerFactory(self.store, self.metadata, clock=self.clock)
        self.service = _service(self.factory, self.participants, self.clock, count, self.batching)
        await self.service.start()
        return self.service


def _service(factory: LedgerFactory, participants: FakeParticipants, clock: ManualClock,
             count: int = 1, batching: bool = False) -> TransactionCoordinatorService:
    settings = CoordinatorSettings(count=count, default_timeout_ms=60_000, end_policy=FAST)
    config = BatchingConfig(enabled=batching, max_records=10, max_delay_ms=1)

    def writer(ledger: ManagedLedger) -> BufferedWriter:
        return BufferedWriter(ledger, LogKind.TRANSACTION, config)

    return TransactionCoordinatorService(settings, factory, participants, clock, new_writer=writer)


@pytest.fixture(params=[False, True], ids=["plain", "batched"])
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    store, metadata, clock = MemoryLedgerStore(), MemoryMetadataStore(), ManualClock()
    participants = FakeParticipants()
    factory = LedgerFactory(store, metadata, clock=clock)
    service = _service(factory, participants, clock, batching=request.param)
    await service.start()
    w = World(store, metadata, clock, participants, service, factory, request.param)
    yield w
    await w.service.close()
    await w.factory.close()


async def _records(w: World) -> list[Op]:
    ledger = await w.factory.open(log_topic(0).managed_ledger_name)
    cursor = ledger.new_non_durable_cursor(ledger.first_position(), "inspect")
    entries = await cursor.read_entries(1000)
    return [decode(r).op for e in entries for r in decode_entry(LogKind.TRANSACTION, e.data)]


async def test_commit_ends_every_partition_and_subscription_then_forgets(world: World) -> None:
    svc = world.service
    txn = await svc.new_txn(0, 10_000)
    assert txn == TxnId(0, 0)
    await svc.add_partitions(txn, [T1, "public/default/t2-partition-0", T1])
    await svc.add_subscriptions(txn, [(T1, "s1"), ("t1", "s2")])
    svc.check_produce(txn, T1)
    svc.check_produce(txn, T2)
    svc.check_ack(txn, T1, "s2")
    await svc.end_txn(txn, TxnAction.COMMIT)
    assert sorted(world.participants.partition_calls) == [(T1, txn, TxnAction.COMMIT), (T2, txn, TxnAction.COMMIT)]
    assert sorted(world.participants.subscription_calls) == [
        (T1, "s1", txn, TxnAction.COMMIT), (T1, "s2", txn, TxnAction.COMMIT),
    ]
    assert await _records(world) == [Op.NEW, Op.ADD_PARTITION, Op.ADD_SUBSCRIPTION, Op.UPDATE, Op.UPDATE]
    counters, active, appended = svc.totals()
    assert (counters.created, counters.committed, counters.aborted, active, appended) == (1, 1, 0, 0, 5)
    with pytest.raises(TransactionNotFound):
        await svc.end_txn(txn, TxnAction.COMMIT)  # finished: gone
    with pytest.raises(TransactionNotFound):
        svc.check_produce(txn, T1)


async def test_abort_and_registration_rules(world: World) -> None:
    svc = world.service
    txn = await svc.new_txn(0, 10_000)
    with pytest.raises(TxnError, match="not added"):
        svc.check_produce(txn, T1)
    with pytest.raises(TxnError, match="not added"):
        svc.check_ack(txn, T1, "s")
    await svc.add_partitions(txn, [T1])
    await svc.end_txn(txn, TxnAction.ABORT)
    assert world.participants.partition_calls == [(T1, txn, TxnAction.ABORT)]
    assert svc.totals()[0].aborted == 1
    with pytest.raises(TransactionNotFound):
        await svc.add_partitions(txn, [T2])
    with pytest.raises(TransactionNotFound):
        await svc.end_txn(TxnId(0, 999), TxnAction.COMMIT)
    with pytest.raises(CoordinatorNotFound):
        await svc.new_txn(7, 1000)
    with pytest.raises(CoordinatorNotFound):
        await svc.end_txn(TxnId(7, 0), TxnAction.ABORT)
    with pytest.raises(TransactionNotFound):
        svc.check_produce(TxnId(7, 0), T1)


async def test_wrong_end_action_while_ending_and_a_retry_finishes(world: World) -> None:
    svc = world.service
    txn = await svc.new_txn(0, 10_000)
    await svc.add_partitions(txn, [T1])
    world.participants.failing = True
    with pytest.raises(BrokerError, match="still ending"):
        await svc.end_txn(txn, TxnAction.COMMIT)
    meta = svc.coordinator(0).get(txn)
    assert meta.status is TxnStatus.COMMITTING
    with pytest.raises(InvalidTxnStatus):
        await svc.end_txn(txn, TxnAction.ABORT)
    with pytest.raises(InvalidTxnStatus):
        await svc.add_partitions(txn, [T2])
    with pytest.raises(InvalidTxnStatus):
        svc.check_produce(txn, T1)
    world.participants.failing = False
    world.participants.fail_next = 2  # transient: retried within one END_TXN
    await svc.end_txn(txn, TxnAction.COMMIT)  # the same action again is allowed and finishes it
    assert world.participants.partition_calls == [(T1, txn, TxnAction.COMMIT)]
    assert svc.totals()[0].committed == 1


async def test_timeout_aborts_and_a_late_commit_fails(world: World) -> None:
    svc = world.service
    short = await svc.new_txn(0, 1_000)
    long = await svc.new_txn(0, 5_000)
    await svc.add_partitions(short, [T1])
    world.clock.advance(999)
    assert await svc.check_timeouts() == 0
    world.clock.advance(1)
    assert await svc.check_timeouts() == 1
    assert world.participants.partition_calls == [(T1, short, TxnAction.ABORT)]
    with pytest.raises(TransactionNotFound):
        await svc.end_txn(short, TxnAction.COMMIT)
    counters, active, _ = svc.totals()
    assert (counters.timed_out, counters.aborted, active) == (1, 1, 1)
    await svc.end_txn(long, TxnAction.COMMIT)


async def test_default_timeout_when_the_client_gives_none(world: World) -> None:
    txn = await world.service.new_txn(0, 0)
    meta = world.service.coordinator(0).get(txn)
    assert meta.timeout_at_ms - meta.opened_ms == 60_000


async def test_recovery_brings_back_open_txns_with_their_deadlines(world: World) -> None:
    svc = world.service
    a = await svc.new_txn(0, 10_000)
    await svc.add_partitions(a, [T1])
    await svc.add_subscriptions(a, [(T1, "s")])
    done = await svc.new_txn(0, 10_000)
    await svc.end_txn(done, TxnAction.COMMIT)
    deadline = svc.coordinator(0).get(a).timeout_at_ms
    svc = await world.restart(clean=False)
    meta = svc.coordinator(0).get(a)
    assert (meta.status, meta.timeout_at_ms) == (TxnStatus.OPEN, deadline)
    assert list(meta.partitions) == [T1] and list(meta.subscriptions) == [(T1, "s")]
    with pytest.raises(TransactionNotFound):
        svc.coordinator(0).get(done)
    assert (await svc.new_txn(0, 100_000)).least >= 2  # ids never reused
    world.clock.advance(10_000)
    assert await svc.check_timeouts() == 1


@pytest.mark.parametrize("action", [TxnAction.COMMIT, TxnAction.ABORT])
async def test_an_ending_txn_is_driven_to_its_end_after_a_crash(world: World, action: TxnAction) -> None:
    svc = world.service
    txn = await svc.new_txn(0, 10_000)
    await svc.add_partitions(txn, [T1, T2])
    world.participants.failing = True
    with pytest.raises(BrokerError):
        await svc.end_txn(txn, action)
    world.participants.failing = False
    svc = await world.restart(clean=False)
    await svc.coordinator(0).settle()
    assert sorted(world.participants.partition_calls) == [(T1, txn, action), (T2, txn, action)]
    with pytest.raises(TransactionNotFound):
        svc.coordinator(0).get(txn)
    svc = await world.restart()  # and the final status is in the log: nothing to drive again
    await svc.coordinator(0).settle()
    assert len(world.participants.partition_calls) == 2


async def test_ids_survive_released_and_trimmed_logs(world: World) -> None:
    svc = world.service
    for _ in range(3):
        await svc.end_txn(await svc.new_txn(0, 1000), TxnAction.ABORT)
    svc = await world.restart()
    assert await svc.new_txn(0, 1000) == TxnId(0, SEQUENCE_BLOCK)  # a fresh block, past anything handed out


async def test_the_log_is_trimmed_once_finished_txns_are_released(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(txn_log, "TRIM_EVERY_RELEASES", 20)
    svc = world.service
    ledger = svc.coordinator(0).log.ledger
    first = ledger.ledgers()[0].ledger_id
    for _ in range(10):
        await svc.end_txn(await svc.new_txn(0, 1000), TxnAction.COMMIT)
    svc = await world.restart()  # a rollover: the old ledger is sealed, everything in it released
    for _ in range(20):
        await svc.end_txn(await svc.new_txn(0, 1000), TxnAction.COMMIT)
    ledgers = [x.ledger_id for x in svc.coordinator(0).log.ledger.ledgers()]
    assert first not in ledgers
    assert svc.coordinator(0).log.ledger.first_position() > Position(first, 0)


async def test_several_coordinators_number_their_txns(world: World) -> None:
    svc = await world.restart(count=3)
    assert sorted(svc.coordinators) == [0, 1, 2]
    txn = await svc.new_txn(2, 1000)
    assert txn.most == 2
    await svc.end_txn(txn, TxnAction.COMMIT)
    with pytest.raises(CoordinatorNotFound):
        svc.connect(3)


async def test_active_limit_and_timeout_cap() -> None:
    factory = LedgerFactory(MemoryLedgerStore(), MemoryMetadataStore(), clock=ManualClock())
    settings = CoordinatorSettings(max_active=2, default_timeout_ms=5_000, max_timeout_ms=10_000, end_policy=FAST)
    svc = TransactionCoordinatorService(settings, factory, FakeParticipants(), ManualClock())
    await svc.start(timeout_loop=False)
    try:
        first = await svc.new_txn(0, 3_600_000)
        meta = svc.coordinator(0).get(first)
        assert meta.timeout_at_ms - meta.opened_ms == 10_000  # cut to transactionTimeoutMaxMillis
        await svc.new_txn(0, 0)
        with pytest.raises(NotAllowed, match="maxActiveTransactionsPerCoordinator"):
            await svc.new_txn(0, 1_000)
        await svc.end_txn(first, TxnAction.ABORT)
        await svc.new_txn(0, 1_000)  # room again
    finally:
        await svc.close()
        await factory.close()
