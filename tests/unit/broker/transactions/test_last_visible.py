"""GET_LAST_MESSAGE_ID's answer with transactions: the last entry a consumer can receive, walking back
over markers and aborted entries across ledger boundaries."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.names import TopicName
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.broker.transactions.snapshot import MetadataSnapshotStore
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

T1, T2 = TxnId(0, 1), TxnId(0, 2)


class Topic:
    def __init__(self, ledger: ManagedLedger) -> None:
        self.name = TopicName.parse("persistent://public/default/t")
        self.ledger = ledger
        self.clock = ManualClock()
        self.subscriptions: dict[str, Subscription] = {}

    async def append_internal(self, entry: bytes) -> Position:
        return await self.ledger.add_entry(entry)

    def wake_subscriptions(self) -> None:
        pass


def message(txn: TxnId | None) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn.most, txn.least
    return proto.make_entry(meta, b"x")


async def test_last_visible_walks_back_over_markers_and_aborted_entries_across_ledgers() -> None:
    metadata = MemoryMetadataStore()
    factory = LedgerFactory(MemoryLedgerStore(), metadata, config=ManagedLedgerConfig(max_entries_per_ledger=1))
    ledger = await factory.open("public/default/persistent/t")
    topic = Topic(ledger)
    txn = TopicTransactions(topic, ledgers=factory, snapshots=MetadataSnapshotStore(metadata))
    await txn.recover()
    assert await txn.last_visible(ledger.last_confirmed) <= ledger.first_position()  # nothing readable yet

    async def send(t: TxnId | None) -> Position:
        started = txn.send_started(proto.parse_entry_metadata(message(t)))
        future = ledger.add_entry_future(message(t))
        if started is not None:
            txn.watch_send(started, future)
        position = await future
        return position

    plain = await send(None)
    committed = await send(T1)
    await txn.end_on_partition(T1, TxnAction.COMMIT)
    assert await txn.last_visible(ledger.last_confirmed) == committed  # not the commit marker
    await send(T2)
    assert await txn.last_visible(ledger.last_confirmed) == committed  # T2 is open
    await txn.end_on_partition(T2, TxnAction.ABORT)
    assert await txn.last_visible(ledger.last_confirmed) == committed  # T2's entry and marker are skipped
    assert len({p.ledger_id for p in (plain, committed, ledger.last_confirmed)}) == 3  # one entry per ledger
