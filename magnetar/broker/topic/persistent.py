"""A persistent topic: its managed ledger, producers, subscriptions, deduplication and counters.

Publishing appends the stored entry (from the checksum magic on, verbatim) and wakes the dispatchers.
Sequence-id deduplication per producer name keeps a resend after a reconnect from landing twice.
The topic knows the wire format of entries and receipts, never sockets. Its lifecycle is
:mod:`magnetar.broker.topic.state`'s table; the registry (:mod:`magnetar.broker.registry`) loads and closes
it. Features reach it through :mod:`magnetar.broker.topic.extensions`; it imports none of them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.buckets import entry_size_buckets, write_latency_buckets
from magnetar.broker.errors import (
    BrokerError,
    ConsumerBusy,
    MetadataError,
    NotAllowed,
    PersistenceError,
    ProducerBusy,
    ProducerFenced,
    SubscriptionNotFound,
    TopicTerminated,
)
from magnetar.broker.names import TopicName
from magnetar.broker.reserved import is_reserved_cursor
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.subscription.dispatcher import DEFAULT_READ_BACKOFF, ReadBackoff
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic import positions
from magnetar.broker.topic.access import TOPIC_EPOCH_PROPERTY, Admission, Granted, ProducerAccess
from magnetar.broker.topic.dedup import (
    Deduplication,
    dedup_key,
    is_partial_chunk,
    is_replicator_producer,
    last_sequence_id_of,
)
from magnetar.broker.topic.extensions import CompactedPort, ReplicatorView, TopicExtensions, TxnPort
from magnetar.broker.topic.producer import Producer, failed_publish
from magnetar.broker.topic.state import TOPIC_TRANSITIONS, CloseReason, TopicState, closing_refusal
from magnetar.core.clock import Clock
from magnetar.ledger.api import (
    Cursor,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerError,
    Position,
)
from magnetar.storage.api import StorageError

log = logging.getLogger("magnetar.broker.topic")


class PersistentTopic:
    def __init__(
        self,
        name: TopicName,
        ledger: ManagedLedger,
        clock: Clock,
        *,
        dedup_enabled: bool,
        dedup_snapshot_entries: int = 1000,
        dedup_snapshot_interval_s: float = 120.0,
        read_batch_max: int,
        read_bytes_max: int,
        auto_skip_corrupted: bool = False,
        read_backoff: ReadBackoff = DEFAULT_READ_BACKOFF,
        transactions: Callable[[PersistentTopic], TxnPort[Any]] | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.clock = clock
        self.dedup_enabled = dedup_enabled
        self._read_batch_max = read_batch_max
        self._read_bytes_max = read_bytes_max
        self._auto_skip_corrupted = auto_skip_corrupted
        self._read_backoff = read_backoff
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, Subscription] = {}
        # a reader's seek closes its consumer, which drops the non-durable subscription; the client's
        # resubscribe then starts where the seek put it, not at the start id it first gave (bounded)
        self.reader_seeks: dict[str, Position] = {}
        self.dedup = Deduplication(
            ledger,
            enabled=dedup_enabled,
            snapshot_interval_entries=dedup_snapshot_entries,
            snapshot_interval_s=dedup_snapshot_interval_s,
        )
        self.msg_in_counter = 0
        self.write_latency_ms = write_latency_buckets()
        self.entry_size_bytes = entry_size_buckets()
        self.bytes_in_counter = 0
        self.state = TopicState.ACTIVE
        self.close_reason: CloseReason | None = None
        self._appends_open = True  # until the teardown starts (sends still land while clients are closed)
        self._background: set[asyncio.Task[None]] = set()
        self._publishes_in_flight = 0
        self._recovering_from_failure = False
        self.undeduplicated_copies = 0  # geo-replicated copies stored while deduplication is off (stats)
        self.access = ProducerAccess(self, self._fence)
        self.extensions = TopicExtensions()  # what features plug in (replicators, compacted view, PIP-33 hooks)
        self.txn = transactions(self) if transactions is not None else None  # the transaction buffer and acks
        for cursor_name, cursor in ledger.cursors.items():
            if is_reserved_cursor(cursor_name):
                continue
            self.subscriptions[cursor_name] = self._new_subscription(cursor_name, cursor, durable=True)

    @property
    def partition(self) -> int:
        return self.name.partition_index

    @property
    def closed(self) -> bool:
        """Closing or closed: no longer serving (new producers and subscriptions are refused)."""
        return self.state is TopicState.CLOSING or self.state is TopicState.CLOSED

    @property
    def replicators(self) -> Mapping[str, ReplicatorView]:
        return self.extensions.replicators

    @property
    def compacted(self) -> CompactedPort | None:
        return self.extensions.compacted

    @property
    def publishes_in_flight(self) -> int:
        return self._publishes_in_flight

    def _transition(self, new: TopicState) -> None:
        self.state = TOPIC_TRANSITIONS.check(self.state, new, f"topic {self.name}")

    def _new_subscription(self, name: str, cursor: Cursor, *, durable: bool) -> Subscription:
        sub = Subscription(
            name,
            self.ledger,
            cursor,
            self.clock,
            durable=durable,
            read_batch_max=self._read_batch_max,
            read_bytes_max=self._read_bytes_max,
            auto_skip_corrupted=self._auto_skip_corrupted,
            read_backoff=self._read_backoff,
            gate=self.txn.gate(name) if self.txn is not None else None,
        )
        sub.hidden_entries = lambda cursor: self.extensions.markers_ahead(cursor)
        return sub

    def add_durable_subscription(self, name: str, cursor: Cursor) -> Subscription:
        """A subscription the broker creates on an opened cursor (a PIP-33 update from another cluster);
        the one already there if a client subscribed meanwhile."""
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = self._new_subscription(name, cursor, durable=True)
        return sub

    # ---- producers -----------------------------------------------------------------------------------

    async def admit_producer(self, producer: Producer, presented_epoch: int | None) -> Admission:
        """Check the name, then the access mode (PIP-68). Granted producers are registered at once;
        a Queued one is registered by ``promoted`` when its turn comes."""
        if self.closed:
            raise closing_refusal(self.name, self.close_reason)
        if TERMINATED_PROPERTY in self.ledger.properties:
            raise TopicTerminated(f"Topic {self.name} was terminated")
        existing = self.producers.get(producer.name)
        if existing is not None and existing is not producer:
            # a reconnecting producer (higher epoch) replaces its own dead or same-connection predecessor
            successor = producer.epoch > existing.epoch and (
                not existing.endpoint.is_open or existing.endpoint is producer.endpoint
            )
            if not successor:
                raise ProducerBusy(f"Producer with name '{producer.name}' is already connected to topic")
            self.remove_producer(existing)
        await self.dedup.ensure_cursor()
        admission = await self.access.admit(producer, presented_epoch)
        if isinstance(admission, Granted):
            self.producers[producer.name] = producer
            producer.ready = True
        else:
            log.info("producer %s is waiting for exclusive access to %s", producer.name, self.name)
        return admission

    def promoted(self, producer: Producer) -> None:
        self.producers[producer.name] = producer
        producer.ready = True

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        producer.closed = True
        self.access.release(producer)

    def _fence(self, producer: Producer) -> None:
        """Fenced by an ExclusiveWithFencing producer: no new sends; receipts for what already landed
        go out before CLOSE_PRODUCER, so the topic holds exactly what each producer was receipted."""
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        producer.fenced = True

        async def close_after_pending() -> None:
            await producer.wait_pending()
            producer.closed = True
            producer.endpoint.send_frame(
                proto.encode_command(proto.commands.close_producer(producer.producer_id, -1))
            )
            producer.endpoint.forget_producer(producer.producer_id)

        task = asyncio.get_running_loop().create_task(close_after_pending())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- the topic epoch (EpochStore for the access state machine) -----------------------------------

    def current_epoch(self) -> int | None:
        text = self.ledger.properties.get(TOPIC_EPOCH_PROPERTY)
        return int(text) if text is not None and text.lstrip("-").isdigit() else None

    async def persist_epoch(self, epoch: int) -> None:
        try:
            await self.ledger.set_properties({TOPIC_EPOCH_PROPERTY: str(epoch)})
        except ManagedLedgerError as exc:
            raise MetadataError(f"Failed to persist the topic epoch of {self.name}: {exc}") from exc

    def last_sequence_id(self, producer_name: str) -> int:
        return self.dedup.last_sequence_id(producer_name)

    def publish(
        self,
        producer: Producer,
        sequence_id: int,
        highest_sequence_id: int | None,
        num_messages: int,
        entry: bytes,
        metadata: proto.pb.MessageMetadata,
    ) -> asyncio.Future[Position]:
        """Append ``entry`` for ``producer``; the receipt (or error) goes out in SEND order."""
        last_seq: int | None
        if is_partial_chunk(metadata):
            last_seq = None  # only a message's last chunk settles its sequence id
        elif highest_sequence_id is not None:
            last_seq = highest_sequence_id
        else:
            last_seq = sequence_id + max(num_messages, 1) - 1
        name, dedup_seq, checked = producer.name, sequence_id, last_seq is not None
        if metadata.replicated_from and is_replicator_producer(name):
            # a geo-replicated copy: deduplicate by the original producer and sequence ids (as Pulsar does)
            name, dedup_seq, last_seq, checked = dedup_key(metadata), metadata.sequence_id, last_sequence_id_of(
                metadata), True
            if not self.dedup.enabled:
                self._undeduplicated_copy()
        if self._recovering_from_failure:
            # an append failed: nothing may land until every publish before it has settled (ordering, dedup)
            refused = PersistenceError(f"{self.name} is recovering from a failed write; send again")
            return producer.track(sequence_id, highest_sequence_id, failed_publish(refused))
        if checked and self.dedup.is_duplicate(name, dedup_seq):
            return producer.track(sequence_id, highest_sequence_id, self.dedup.answer_duplicate(name, dedup_seq))
        try:
            txn_send = self.txn.send_started(metadata) if self.txn is not None else None
        except BrokerError as exc:
            return producer.track(sequence_id, highest_sequence_id, failed_publish(exc))
        self._publishes_in_flight += 1
        result: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        if txn_send is not None and self.txn is not None:
            self.txn.watch_send(txn_send, result)
        self._start_append(producer, name, last_seq, num_messages, entry, result)
        hook = self.extensions.marker_stored
        if hook is not None and metadata.replicated_from and metadata.HasField("marker_type"):
            result.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else hook(f.result(), metadata, entry))
        if last_seq is not None:
            self.dedup.pushed(name, last_seq, result)
        producer.msg_in_counter += num_messages
        producer.bytes_in_counter += len(entry)
        return producer.track(sequence_id, highest_sequence_id, result)

    def _undeduplicated_copy(self) -> None:
        """A geo-replicated copy arrives while deduplication is off: a replicator's resend after this cluster
        restarts would be stored twice. Said once per topic load, loudly, and counted in the topic's stats."""
        self.undeduplicated_copies += 1
        if self.undeduplicated_copies == 1:
            log.warning("%s receives geo-replicated messages with deduplication off: after a crash of this "
                        "cluster a replicator's resend is stored twice; set brokerDeduplicationEnabled=true "
                        "or the namespace's deduplication policy", self.name)

    def _start_append(
        self,
        producer: Producer,
        name: str,
        last_seq: int | None,
        num_messages: int,
        entry: bytes,
        result: asyncio.Future[Position],
    ) -> None:
        """Take the entry's place in the ledger now; ``_appended`` finishes the publish (no task per send)."""
        if not self._appends_open:
            self._append_failed(name, last_seq, result, NotAllowed(f"Topic {self.name} is closed"))
            return
        if producer.fenced:
            refused = ProducerFenced(f"Producer {producer.name} is fenced or no longer attached to {self.name}")
            self._append_failed(name, last_seq, result, refused)
            return
        try:
            added = self.ledger.add_entry_future(entry)
        except (ManagedLedgerError, StorageError) as exc:
            self._write_failed()
            self._append_failed(name, last_seq, result, self._persistence_error(exc))
            return
        started_ms = self.clock.monotonic_ms()
        added.add_done_callback(
            functools.partial(self._appended, name, last_seq, num_messages, len(entry), started_ms, result)
        )

    def _persistence_error(self, exc: BaseException) -> PersistenceError:
        error = PersistenceError(f"Failed to persist entry on {self.name}: {exc}")
        error.__cause__ = exc
        return error

    def _append_failed(
        self, name: str, last_seq: int | None, result: asyncio.Future[Position], exc: Exception
    ) -> None:
        self._publish_settled()
        if last_seq is not None:
            self.dedup.failed(name)
        if not result.done():
            result.set_exception(exc)

    def _appended(
        self,
        name: str,
        last_seq: int | None,
        num_messages: int,
        size_bytes: int,
        started_ms: float,
        result: asyncio.Future[Position],
        added: asyncio.Future[Position],
    ) -> None:
        error = added.exception() if not added.cancelled() else StorageError("add cancelled")
        if error is not None:
            if isinstance(error, (ManagedLedgerError, StorageError)):
                self._write_failed()
            self._append_failed(name, last_seq, result, self._persistence_error(error))
            return
        position = added.result()
        self._publish_settled()
        if last_seq is not None:
            self.dedup.persisted(name, last_seq, position)
        else:
            self.dedup.entry_stored(position)
        self.write_latency_ms.record(self.clock.monotonic_ms() - started_ms)
        self.entry_size_bytes.record(size_bytes)
        self.msg_in_counter += num_messages
        self.bytes_in_counter += size_bytes
        if self.txn is not None:
            self.txn.buffer.note_appended()  # bounds what a recovery after a crash replays
        self.wake_subscriptions()
        if not result.done():
            result.set_result(position)

    def wake_subscriptions(self) -> None:
        """Entries were stored: wake the dispatchers and the replicators."""
        for sub in self.subscriptions.values():
            sub.new_entries()
        self.extensions.wake_replicators()

    async def append_internal(self, entry: bytes) -> Position:
        """Append an entry the broker writes (a transaction marker), failing like a publish does."""
        if not self._appends_open or self._recovering_from_failure:
            raise PersistenceError(f"{self.name} is closed or recovering from a failed write")
        self._publishes_in_flight += 1
        try:
            return await self.ledger.add_entry_future(entry)
        except (ManagedLedgerError, StorageError) as exc:
            self._write_failed()
            raise self._persistence_error(exc) from exc
        finally:
            self._publish_settled()

    def _write_failed(self) -> None:
        """A write failed: refuse sends until every accepted one has settled, and (as Pulsar does) close every
        producer, so a send that followed the failed one on its connection is never stored ahead of its resend
        (dedup would then answer that resend as a duplicate: receipted, never stored)."""
        if self._recovering_from_failure:
            return
        self._recovering_from_failure = True
        if self.state is TopicState.ACTIVE:
            self._transition(TopicState.FENCED)
        producers = [*self.producers.values(), *self.access.waiting]
        for producer in producers:
            producer.fenced = True  # refused from now on; closed once its accepted sends are answered
        task = asyncio.get_running_loop().create_task(self._close_producers(producers, None))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _publish_settled(self) -> None:
        """One accepted publish is done; after a failed write, resume once none is left in flight."""
        self._publishes_in_flight -= 1
        if self._recovering_from_failure and self._publishes_in_flight == 0:
            self.dedup.reset_after_failure()
            if self.ledger.resume_writes():
                self._recovering_from_failure = False
                if self.state is TopicState.FENCED:
                    self._transition(TopicState.ACTIVE)
                log.warning("%s: writes resume after a failed append; producers resend what failed", self.name)

    # ---- subscriptions -------------------------------------------------------------------------------

    async def subscribe(
        self,
        consumer: Consumer,
        *,
        durable: bool,
        initial_position: InitialPosition,
        start: Position | None,
    ) -> Subscription:
        name = consumer.subscription_name
        if self.closed:
            raise closing_refusal(self.name, self.close_reason)
        if is_reserved_cursor(name):
            raise NotAllowed(f"Subscription name {name!r} is reserved for the broker's own cursors")
        if consumer.read_compacted and consumer.sub_type not in (SubType.EXCLUSIVE, SubType.FAILOVER):
            raise NotAllowed("Compacted reads are only allowed on Exclusive or Failover subscriptions")
        sub = self.subscriptions.get(name)
        created = sub is None
        if sub is None:
            if durable:
                cursor = await self.ledger.open_cursor(name, initial_position)
            else:
                start = self.reader_seeks.pop(name, start)
                begin = start if start is not None else (
                    self.ledger.first_position()
                    if initial_position == InitialPosition.EARLIEST
                    else self.ledger.next_valid_position(self.ledger.last_confirmed)
                )
                cursor = self.ledger.new_non_durable_cursor(begin, name)
            sub = self._new_subscription(name, cursor, durable=durable)
            self.subscriptions[name] = sub
        elif not sub.durable and durable:
            raise ConsumerBusy(f"Subscription {name!r} is a non-durable reader subscription")
        if consumer.read_compacted and self.compacted is not None:  # the compacted view, then the topic
            from_start = created and initial_position == InitialPosition.EARLIEST
            sub.read_compacted_cursor = self.compacted.reading_cursor(sub.cursor, start, from_start=from_start)
        try:
            sub.add_consumer(consumer)
        except BrokerError:
            if not sub.consumers and not sub.durable:
                del self.subscriptions[name]
            raise
        return sub

    async def unsubscribe(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {consumer.subscription_name!r} not found")
        others = [c for c in sub.consumers if c is not consumer]
        if others:
            raise ConsumerBusy("Subscription has other connected consumers")
        sub.remove_consumer(consumer)
        await sub.close()
        del self.subscriptions[sub.name]
        if sub.durable:
            await self.ledger.delete_cursor(sub.name)
            if self.txn is not None:
                await self.txn.subscription_deleted(sub.name)

    async def delete_subscription(self, sub: Subscription) -> None:
        """The admin deleted it (its consumers are closed already): closed, forgotten, its cursor deleted."""
        await sub.close()
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        if sub.durable:
            await self.ledger.delete_cursor(sub.name)

    async def remove_consumer(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        sub.remove_consumer(consumer)
        if not sub.durable and not sub.consumers:
            await sub.close()
            if self.subscriptions.get(sub.name) is sub:
                del self.subscriptions[sub.name]

    # ---- queries -------------------------------------------------------------------------------------

    async def last_message_id(self) -> tuple[Position, int]:
        """The last entry's position and the batch index of its last message (-1 when unbatched)."""
        return await positions.last_message_id(self.ledger, self.txn)

    async def position_for_publish_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after ``publish_time_ms`` (past the end if none)."""
        return await positions.first_published_at(self.ledger, publish_time_ms)

    @property
    def properties(self) -> Mapping[str, str]:
        return self.ledger.properties

    async def start(self) -> None:
        """Recover what must be rebuilt before the first producer is admitted."""
        await self.dedup.recover()
        if self.txn is not None:
            await self.txn.recover()

    def begin_closing(self, reason: CloseReason) -> bool:
        """ACTIVE or FENCED -> CLOSING: new producers and subscriptions are refused from now on (the
        ``reason`` tells them why). False if the topic is already closing or closed."""
        if self.closed:
            return False
        self._transition(TopicState.CLOSING)
        self.close_reason = reason
        return True

    async def close(self, reason: CloseReason = CloseReason.MOVING) -> None:
        """Tear down: appends stop, subscriptions close, then the transactions, deduplication and ledger are
        closed (MOVING) or deleted (DELETED: raises ``ManagedLedgerError`` if the ledger cannot be). The
        registry calls this once the clients are closed and every listener was told; replicators and other
        extensions are their features' to stop."""
        self.begin_closing(reason)
        reason = self.close_reason or reason
        self._appends_open = False
        try:
            for sub in list(self.subscriptions.values()):
                await sub.close()
            if reason is CloseReason.DELETED:
                if self.txn is not None:  # pending-ack logs and the transaction-buffer snapshot
                    await self.txn.topic_deleted()
                await self.ledger.delete()
            else:
                if self.txn is not None:
                    await self.txn.close()
                await self.dedup.close()
                await self.ledger.close()
        finally:
            self._transition(TopicState.CLOSED)

    def remember_reader_seek(self, subscription: str, position: Position, limit: int) -> None:
        """A reader's seek: its resubscribe starts at ``position`` (at most ``limit`` remembered)."""
        if len(self.reader_seeks) < limit:
            self.reader_seeks[subscription] = position

    # ---- admin: unload, delete, terminate (the admin API calls these) --------------------------------

    async def _close_producers(self, producers: list[Producer], assigned_url: str | None) -> None:
        for producer in producers:
            producer.closing = True  # what was accepted is answered; what comes now is resent elsewhere
        for producer in producers:
            await producer.wait_pending()
            self.remove_producer(producer)
            producer.endpoint.send_frame(proto.encode_command(
                proto.commands.close_producer(producer.producer_id, -1, assigned_broker_url=assigned_url)))
            producer.endpoint.forget_producer(producer.producer_id)

    async def disconnect_clients(self, *, consumers: bool, assigned_url: str | None = None) -> None:
        """Close every producer (and consumer, if asked) from the broker side: the clients look the topic
        up again and reconnect, as after a Pulsar unload, or go straight to ``assigned_url`` (PIP-307: the
        broker the topic moves to). Sends already accepted are answered first."""
        await self._close_producers([*self.producers.values(), *self.access.waiting], assigned_url)
        if not consumers:
            return
        for sub in list(self.subscriptions.values()):
            for consumer in sub.consumers:
                consumer.endpoint.send_frame(proto.encode_command(
                    proto.commands.close_consumer(consumer.consumer_id, -1, assigned_broker_url=assigned_url)))
                await self.remove_consumer(consumer)
                consumer.endpoint.forget_consumer(consumer.consumer_id)


#: managed-ledger property set by an admin terminate: the last position; no producer is admitted after it
TERMINATED_PROPERTY = "pulsar.terminated"
