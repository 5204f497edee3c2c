"""A topic's side of transactions: its transaction buffer and its subscriptions' pending-ack stores.

The topic meets transactions through this one object (a few hook lines in ``topic.py``): a SEND's
metadata goes through :meth:`TopicTransactions.send_started`, each subscription's dispatchers get an
:class:`~magnetar.broker.dispatcher.EntryGate` from :meth:`gate`, the topic's load and close call
:meth:`recover` and :meth:`close`. The participants (the coordinator's way in) and the wire handlers call
:meth:`end_on_partition`, :meth:`end_on_subscription` and :meth:`acknowledge`.

Pending-ack stores are opened on a subscription's first transactional ack, and at load for every durable
subscription whose log exists. Knows nothing of sockets or of the coordinator's state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.errors import NotAllowed, ServiceNotReady
from magnetar.broker.names import TopicName
from magnetar.broker.subscription.dispatcher import GATE_DELIVER, GATE_DROP, GATE_HOLD
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.broker.transactions.buffer import (
    BufferState,
    SleepMs,
    TransactionBuffer,
    asyncio_sleep_ms,
    txn_of,
)
from magnetar.broker.transactions.buffered_writer import WriterFactory
from magnetar.broker.transactions.pending_ack import PendingAckStore
from magnetar.broker.transactions.pending_ack_log import (
    AckedId,
    ManagedLedgerAckLog,
    pending_ack_topic,
    plain_writer,
)
from magnetar.broker.transactions.snapshot import SnapshotStore
from magnetar.broker.visible import last_visible
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, ManagedLedgerError, ManagedLedgerFactory, Position

log = logging.getLogger("magnetar.broker.transactions.topic")



class TxnTopic(Protocol):
    """What the transactions of a topic need from it."""

    name: TopicName
    ledger: ManagedLedger
    clock: Clock

    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...

    async def append_internal(self, entry: bytes) -> Position: ...

    def wake_subscriptions(self) -> None: ...


class _Gate:
    """The EntryGate of one subscription."""

    def __init__(self, owner: TopicTransactions, subscription: str) -> None:
        self._owner = owner
        self._subscription = subscription

    def max_read_position(self) -> Position | None:
        return self._owner.buffer.max_read_position()

    def passes_all(self) -> bool:
        # entries of open transactions lie past max_read_position; only aborts and pending acks filter
        if self._owner.buffer.aborted_count():
            return False
        store = self._owner.stores.get(self._subscription)
        return store is None or not store.has_pending()

    def verdict(self, position: Position, metadata: proto.pb.MessageMetadata) -> int:
        txn = txn_of(metadata)
        if txn is not None and self._owner.buffer.is_aborted(txn):
            return GATE_DROP
        store = self._owner.stores.get(self._subscription)
        if store is not None and store.is_pending(position):
            return GATE_HOLD
        return GATE_DELIVER

    def pending_mask(self, position: Position) -> int:
        store = self._owner.stores.get(self._subscription)
        return store.pending_mask(position) if store is not None else 0


class TopicTransactions:
    def __init__(
        self,
        topic: TxnTopic,
        *,
        ledgers: ManagedLedgerFactory,
        snapshots: SnapshotStore,
        ledger_config: ManagedLedgerConfig | None = None,
        new_writer: WriterFactory = plain_writer,
        snapshot_min_interval_ms: int = 5000,
        snapshot_max_txn_count: int = 1000,
        sleep_ms: SleepMs = asyncio_sleep_ms,
    ) -> None:
        self._topic = topic
        self._ledgers = ledgers
        self._ledger_config = ledger_config
        self._snapshots = snapshots
        self._new_writer = new_writer
        self.buffer = TransactionBuffer(
            str(topic.name),
            topic.ledger,
            topic.clock,
            topic.append_internal,
            snapshots,
            on_change=topic.wake_subscriptions,
            snapshot_min_interval_ms=snapshot_min_interval_ms,
            snapshot_max_txn_count=snapshot_max_txn_count,
            sleep_ms=sleep_ms,
        )
        self.stores: dict[str, PendingAckStore] = {}
        self._open_lock = asyncio.Lock()
        self._sleep_ms = sleep_ms

    def gate(self, subscription: str) -> _Gate:
        return _Gate(self, subscription)

    # ---- produce -----------------------------------------------------------------------------------------

    def send_started(self, metadata: proto.pb.MessageMetadata) -> tuple[TxnId, bool] | None:
        """A SEND is about to take its place: note its transaction (raises TxnError when it ended here).
        Returns what :meth:`watch_send` needs, or None for a plain SEND."""
        txn = txn_of(metadata)
        if txn is None:
            return None
        self.buffer.check_send(txn)
        return txn, self.buffer.send_started(txn)

    def watch_send(self, started: tuple[TxnId, bool], result: asyncio.Future[Position]) -> None:
        """Tell the buffer where the SEND landed (or that it failed) once its append settles."""
        txn, tracked = started

        def settled(done: asyncio.Future[Position]) -> None:
            failed = done.cancelled() or done.exception() is not None
            self.buffer.send_finished(txn, None if failed else done.result(), tracked=tracked)

        result.add_done_callback(settled)

    # ---- acks --------------------------------------------------------------------------------------------

    async def acknowledge(self, subscription: Subscription, txn: TxnId, cumulative: bool,
                          ids: Sequence[AckedId]) -> None:
        if not subscription.durable:
            raise NotAllowed(f"Subscription {subscription.name!r} is not durable: it takes no transactional acks")
        store = await self.store(subscription)
        await store.acknowledge(txn, cumulative, ids)

    async def store(self, subscription: Subscription) -> PendingAckStore:
        """The subscription's pending-ack store, opened (and replayed) on first use."""
        async with self._open_lock:
            store = self.stores.get(subscription.name)
            if store is None:
                store = await self._open_store(subscription)
            return store

    async def _open_store(self, subscription: Subscription) -> PendingAckStore:
        name = pending_ack_topic(self._topic.name, subscription.name).managed_ledger_name
        try:
            ledger = await self._ledgers.open(name, self._ledger_config)
        except ManagedLedgerError as exc:
            raise ServiceNotReady(f"Failed to open the pending-ack log {name}: {exc}") from exc
        try:
            ack_log = await ManagedLedgerAckLog.open(ledger, self._new_writer)
        except ManagedLedgerError as exc:
            await ledger.close()
            raise ServiceNotReady(f"Failed to open the pending-ack log {name}: {exc}") from exc
        persist_ms = (self._ledger_config or ManagedLedgerConfig()).cursor_persist_interval_ms
        store = PendingAckStore(str(self._topic.name), subscription, ack_log, release_delay_ms=persist_ms,
                                sleep_ms=self._sleep_ms)
        await store.recover()
        self.stores[subscription.name] = store
        return store

    # ---- ending ------------------------------------------------------------------------------------------

    async def end_on_partition(self, txn: TxnId, action: TxnAction) -> None:
        await self.buffer.end(txn, action)

    async def end_on_subscription(self, subscription: str, txn: TxnId, action: TxnAction) -> None:
        sub = self._topic.subscriptions.get(subscription)
        if sub is None or not sub.durable:
            return  # the subscription is gone: nothing of it waits for this transaction
        store = self.stores.get(subscription)
        if store is None:
            return  # never acked in a transaction (an existing log is opened at load)
        await store.end(txn, action)

    # ---- queries -----------------------------------------------------------------------------------------

    async def last_visible(self, last: Position) -> Position:
        """The last entry a consumer can receive, at or before ``last``: not past maxReadPosition, not a
        marker, not an aborted transaction's entry (bounded walk back; past it, the limit itself)."""
        limit = self.buffer.max_read_position()
        position = min(last, limit) if limit is not None else last

        def hidden(meta: proto.pb.MessageMetadata) -> bool:
            txn = txn_of(meta)
            return meta.HasField("marker_type") or (txn is not None and self.buffer.is_aborted(txn))

        return await last_visible(self._topic.ledger, position, hidden)

    # ---- lifecycle ---------------------------------------------------------------------------------------

    async def recover(self) -> None:
        await self.buffer.recover()
        for sub in list(self._topic.subscriptions.values()):
            if not sub.durable:
                continue
            name = pending_ack_topic(self._topic.name, sub.name).managed_ledger_name
            if await self._ledgers.exists(name):
                await self.store(sub)

    async def subscription_deleted(self, subscription: str) -> None:
        store = self.stores.pop(subscription, None)
        if store is not None:
            await store.log.delete()
            return
        await delete_pending_ack_log(self._ledgers, self._topic.name, subscription, self._ledger_config)

    async def topic_deleted(self) -> None:
        """The topic is being deleted: its pending-ack logs and its buffer snapshot go with it."""
        self.buffer.state = BufferState.CLOSED  # no snapshot from here on
        for name in list(self._topic.subscriptions):
            await self.subscription_deleted(name)
        await self._snapshots.delete(str(self._topic.name))

    async def close(self) -> None:
        await self.buffer.close()
        for store in list(self.stores.values()):
            try:
                await store.close()
            except ManagedLedgerError as exc:
                log.warning("%s: closing a pending-ack log failed: %s", self._topic.name, exc)
        self.stores.clear()


async def delete_pending_ack_log(
    ledgers: ManagedLedgerFactory, topic: TopicName, subscription: str, config: ManagedLedgerConfig | None = None
) -> None:
    """Delete a subscription's pending-ack log if it exists (the subscription or its topic is deleted)."""
    name = pending_ack_topic(topic, subscription).managed_ledger_name
    if await ledgers.exists(name):
        ledger = await ledgers.open(name, config)
        await ledger.delete()


async def delete_unloaded(
    ledgers: ManagedLedgerFactory,
    snapshots: SnapshotStore,
    topic: TopicName,
    subscriptions: Iterable[str],
    config: ManagedLedgerConfig | None = None,
) -> None:
    """A topic that is not loaded is being deleted: its pending-ack logs and buffer snapshot go with it."""
    for subscription in subscriptions:
        await delete_pending_ack_log(ledgers, topic, subscription, config)
    await snapshots.delete(str(topic))
