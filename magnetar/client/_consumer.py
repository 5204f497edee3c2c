"""A consumer on one (partition) topic: subscribe, FLOW permits, the receive queue, acks, reconnects.

The broker sends only what ``receiver_queue_size`` permits allow, so the queue holds at most that
many messages plus one batch entry's overshoot; permits are returned in FLOWs of half the queue as
the application takes messages. Acks are grouped (``_acks``), nacks are redelivered after their
delay, messages past the dead-letter limit go to ``_dlq``. On a lost connection or a broker's
CLOSE_CONSUMER (e.g. after SEEK) it re-subscribes with the same consumer id after backoff.
Knows nothing of partitions (``_partitioned``) or frame reading (``_connection``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import secrets
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final

from magnetar.client._acks import AckGroupingTracker, NegativeAckTracker, unacked_after, unacked_except
from magnetar.client._config import ConsumerConfig
from magnetar.client._connection import Connection
from magnetar.client._context import ClientContext
from magnetar.client._dlq import DeadLetterSink
from magnetar.client._incoming import ChunkAssembler, StartFilter, decode_entry
from magnetar.client._messages import EARLIEST, LATEST, Message, MessageId
from magnetar.client._transaction import Transaction
from magnetar.client.errors import (
    AlreadyClosed,
    CumulativeAckNotAllowed,
    NotAllowedError,
    OperationTimeout,
    PulsarClientError,
)
from magnetar.core.lifecycle import Lifecycle, Transitions
from magnetar.protocol import commands, ids, pb

__all__ = ["Consumer", "ReceiveQueue"]

log = logging.getLogger(__name__)


class ConsumerState(enum.Enum):
    INIT = "init"
    CONNECTING = "connecting"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"


_S = ConsumerState
_EDGES: Final = Transitions(ConsumerState, {
    _S.INIT: frozenset({_S.CONNECTING, _S.CLOSED}),
    _S.CONNECTING: frozenset({_S.READY, _S.CLOSING, _S.CLOSED}),
    _S.READY: frozenset({_S.CONNECTING, _S.CLOSING}),
    _S.CLOSING: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
})


class ReceiveQueue:
    """Messages waiting for the application, shared by the consumers of one multi-topic consumer."""

    def __init__(self) -> None:
        self._items: deque[tuple[Consumer, Message]] = deque()
        self._ready = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, consumer: Consumer, message: Message) -> None:
        self._items.append((consumer, message))
        self._ready.set()

    def drop(self, consumer: Consumer) -> int:
        """Remove what ``consumer`` queued (it is re-subscribing); the number removed."""
        before = len(self._items)
        self._items = deque(item for item in self._items if item[0] is not consumer)
        return before - len(self._items)

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    async def get(self, timeout_ms: float | None) -> tuple[Consumer, Message]:
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        while not self._items:  # bounded by the deadline or close
            if self._closed:
                raise AlreadyClosed("consumer closed")
            self._ready.clear()
            remaining = None if deadline is None else max(deadline - loop.time(), 0)
            try:
                await asyncio.wait_for(self._ready.wait(), remaining)
            except TimeoutError:
                raise OperationTimeout(f"no message within {timeout_ms} ms") from None
        return self._items.popleft()


MakeProducer = Callable[[str, str | None], Coroutine[Any, Any, Any]]


class Consumer:
    """Create through ``Client.subscribe``; ``receive``/``async for`` give ``Message`` objects."""

    def __init__(
        self,
        ctx: ClientContext,
        topic: str,
        config: ConsumerConfig,
        *,
        partition: int = -1,
        queue: ReceiveQueue | None = None,
        start_message_id: MessageId | None = None,
        make_producer: MakeProducer | None = None,
    ) -> None:
        self._ctx = ctx
        self.topic = topic
        self.partition = partition
        self.subscription = config.subscription
        self._config = config
        self._id = next(ctx.consumer_ids)
        self._name = config.consumer_name if config.consumer_name is not None else secrets.token_hex(5)
        self._life = Lifecycle(_S.INIT, _EDGES)
        self._conn: Connection | None = None
        self._queue = queue if queue is not None else ReceiveQueue()
        self._owns_queue = queue is None
        self._permits_used = 0
        self._generation = 0
        self._subscribed = asyncio.Event()
        self._acks = AckGroupingTracker(max_size=config.ack_group_max_size, batch_index_ack=config.batch_index_ack)
        self._nacks = NegativeAckTracker(config.negative_ack_delay_ms)
        self._chunks = ChunkAssembler(config.max_pending_chunked_messages)
        self._start = start_message_id
        self._filter: StartFilter | None = None
        if start_message_id is not None and start_message_id not in (EARLIEST, LATEST):
            self._filter = StartFilter(start_message_id, config.start_message_inclusive)
        self._last_taken: MessageId | None = None
        self._dlq: DeadLetterSink | None = None
        if config.dead_letter_policy is not None and config.is_shared and make_producer is not None:
            self._dlq = DeadLetterSink(topic, config.subscription, config.dead_letter_policy, make_producer)
        self._tasks: set[asyncio.Task[None]] = set()
        self.is_active: bool | None = None
        self._batch_sizes: dict[tuple[int, int], int] = {}  # for acks given a bare MessageId

    def _id_and_size(self, message: Message | MessageId) -> tuple[MessageId, int]:
        if isinstance(message, Message):
            return message.message_id, message.batch_size
        if message.batch_index < 0:
            return message, 1
        return message, self._batch_sizes.get(message.entry, message.batch_index + 1)

    # ------------------------------------------------------------ lifecycle

    @property
    def state(self) -> ConsumerState:
        return self._life.state

    @property
    def consumer_name(self) -> str:
        return self._name

    async def start(self) -> None:
        self._life.transition_to(_S.CONNECTING)
        try:
            await self._ctx.retry(self._subscribe, f"subscribe to {self.topic}")
        except BaseException:
            self._life.transition_to(_S.CLOSED)
            raise
        self._spawn(self._ack_loop())
        self._spawn(self._nack_loop())

    async def _subscribe(self) -> None:
        conn = await self._ctx.connection_for(self.topic)
        conn.register_consumer(self._id, self)
        try:
            await conn.request(self._subscribe_command)
        except BaseException:
            conn.unregister_consumer(self._id)
            raise
        if self._life.state is not _S.CONNECTING:
            conn.unregister_consumer(self._id)
            return
        self._conn = conn
        self._life.transition_to(_S.READY)
        self._permits_used = 0
        self._generation += 1
        self._subscribed.set()
        conn.send(commands.flow(self._id, self._config.receiver_queue_size))

    def _subscribe_command(self, request_id: int) -> pb.BaseCommand:
        c = self._config
        start = None
        if not c.durable:
            resume = self._last_taken or self._start or EARLIEST
            start = resume.to_pb(with_batch_index=resume.batch_index >= 0)
        return commands.subscribe(
            self.topic, c.subscription, c.subscription_type_value, self._id, request_id,
            consumer_name="" if not c.durable else self._name,
            durable=c.durable,
            start_message_id=start,
            initial_position=pb.CommandSubscribe.Earliest if c.initial_position == "earliest"
            else pb.CommandSubscribe.Latest,
            priority_level=c.priority_level,
            metadata=dict(c.properties),
        )

    def on_disconnect(self, conn: Connection) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        if self._life.state is _S.READY:
            self._life.transition_to(_S.CONNECTING)
            self._subscribed.clear()
            self._queue.drop(self)  # the broker redelivers what was unacked
            if self._last_taken is not None and not self._config.durable:
                self._filter = StartFilter(self._last_taken, False)
            self._spawn(self._resubscribe_loop())

    def on_active_change(self, active: bool) -> None:
        self.is_active = active

    async def _resubscribe_loop(self) -> None:
        backoff = self._ctx.backoff()
        while self._life.state is _S.CONNECTING:  # ends on success or close
            await asyncio.sleep(backoff.next_ms() / 1000)
            if self._life.state is not _S.CONNECTING:
                return
            try:
                await self._subscribe()
            except PulsarClientError as exc:
                log.info("consumer %s on %s: resubscribe failed: %r", self._name, self.topic, exc)

    async def close(self) -> None:
        if self._life.state in (_S.CLOSING, _S.CLOSED):
            return
        if self._life.state is _S.INIT:
            self._life.transition_to(_S.CLOSED)
            return
        self._life.transition_to(_S.CLOSING)
        self._flush_acks()
        conn, self._conn = self._conn, None
        if conn is not None and conn.is_ready:
            with contextlib.suppress(PulsarClientError):
                await conn.request(lambda rid: commands.close_consumer(self._id, rid))
            conn.unregister_consumer(self._id)
        await self._finish_close()

    async def _finish_close(self) -> None:
        self._life.transition_to(_S.CLOSED)
        if self._owns_queue:
            self._queue.close()
        for task in self._tasks:
            task.cancel()
        if self._dlq is not None:
            await self._dlq.close()

    async def unsubscribe(self) -> None:
        conn = self._ready_connection()
        await conn.request(lambda rid: commands.unsubscribe(self._id, rid))
        conn.unregister_consumer(self._id)
        self._conn = None
        self._life.transition_to(_S.CLOSING)
        await self._finish_close()

    def _ready_connection(self) -> Connection:
        if self._life.state in (_S.CLOSING, _S.CLOSED):
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        if self._conn is None:
            raise NotAllowedError(f"consumer on {self.topic} is reconnecting")
        return self._conn

    # ------------------------------------------------------------ receiving

    def on_message(self, cmd: pb.CommandMessage, payload: memoryview) -> None:
        decoded = decode_entry(
            self.topic, cmd, payload, partition=self.partition if self.partition >= 0 else cmd.message_id.partition,
            max_message_bytes=(self._conn.max_message_size if self._conn else 5 << 20) * 4 + (1 << 20),
            chunks=self._chunks, start=self._filter,
        )
        if decoded.validation_error is not None and decoded.entry_id is not None:
            self._send(commands.ack(self._id, [decoded.entry_id.to_pb()], validation_error=decoded.validation_error))
        self._return_permits(decoded.discarded)
        for msg in decoded.messages:
            if self._acks.is_acked(msg.message_id):
                self._return_permits(1)
            elif self._dlq is not None and self._dlq.deliver(msg) is False:
                self._return_permits(1)  # past the limit: dead-lettered, never shown
                self._spawn(self._dead_letter([msg]))
            else:
                if msg.batch_size > 1:
                    self._batch_sizes[msg.message_id.entry] = msg.batch_size
                self._queue.put(self, msg)
        while len(self._batch_sizes) > BATCH_SIZES_REMEMBERED_MAX:  # bounded: forget the oldest
            del self._batch_sizes[next(iter(self._batch_sizes))]

    async def receive(self, timeout_ms: float | None = None) -> Message:
        """The next message; ``OperationTimeout`` when none comes within ``timeout_ms``."""
        if self._life.state in (_S.CLOSING, _S.CLOSED) and not len(self._queue):
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        consumer, msg = await self._queue.get(timeout_ms)
        consumer.message_taken(msg)
        return msg

    def message_taken(self, msg: Message) -> None:
        self._last_taken = msg.message_id
        self._return_permits(1)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except AlreadyClosed:
            raise StopAsyncIteration from None

    def _return_permits(self, count: int) -> None:
        if not count:
            return
        self._permits_used += count
        if self._permits_used >= max(self._config.receiver_queue_size // 2, 1) and self._conn is not None:
            self._send(commands.flow(self._id, self._permits_used))
            self._permits_used = 0

    def _send(self, cmd: pb.BaseCommand) -> None:
        if self._conn is not None:
            with contextlib.suppress(PulsarClientError):
                self._conn.send(cmd)

    # ------------------------------------------------------------ acks

    async def acknowledge(self, message: Message | MessageId, *, txn: Transaction | None = None) -> None:
        """Acknowledge (grouped, sent within ``ack_group_time_ms``); with ``txn`` the ack is part of that
        transaction: sent at once and confirmed by the broker before this returns."""
        mid, batch_size = self._id_and_size(message)
        self._check_open()
        if txn is not None:
            await self._ack_in_txn(txn, mid, batch_size, pb.CommandAck.Individual)
            return
        ids = message.chunk_ids if isinstance(message, Message) and message.chunk_ids else (mid,)
        flush = False
        for one in ids:
            flush = self._acks.add_individual(one, batch_size) or flush
        if self._dlq is not None:
            self._dlq.forget(mid)
        if flush:
            self._flush_acks()

    async def acknowledge_cumulative(self, message: Message | MessageId, *, txn: Transaction | None = None,
                                     receipt: bool = False) -> None:
        """Acknowledge everything up to ``message`` (grouped, as ``acknowledge``). With ``receipt`` (Pulsar's ack
        receipt) the ack is sent at once and this returns when the broker has persisted it in the subscription's
        cursor; a failure to persist raises."""
        if self._config.is_shared:
            raise CumulativeAckNotAllowed("cumulative acks are not allowed on Shared / Key_Shared subscriptions")
        self._check_open()
        mid, batch_size = self._id_and_size(message)
        if txn is not None:
            await self._ack_in_txn(txn, mid, batch_size, pb.CommandAck.Cumulative)
            return
        if receipt:
            target = self._ack_target(mid, batch_size, pb.CommandAck.Cumulative)
            await self._ready_connection().request(
                lambda rid: commands.ack(self._id, [target], pb.CommandAck.Cumulative, request_id=rid))
            return
        self._acks.add_cumulative(mid, batch_size)

    @staticmethod
    def _ack_target(mid: MessageId, batch_size: int, ack_type: int) -> pb.MessageIdData:
        target = ids.message_id(mid.ledger_id, mid.entry_id)
        if mid.batch_index >= 0 and batch_size > 1:
            if ack_type == pb.CommandAck.Individual:
                target.ack_set.extend(unacked_except(mid.batch_index, batch_size))
            else:
                target.ack_set.extend(unacked_after(mid.batch_index, batch_size))
        return target

    async def _ack_in_txn(self, txn: Transaction, mid: MessageId, batch_size: int, ack_type: int) -> None:
        await txn.register_subscription(self.topic, self.subscription)
        txn.check_open()
        conn = self._ready_connection()
        target = self._ack_target(mid, batch_size, ack_type)
        op = asyncio.ensure_future(conn.request(
            lambda rid: commands.ack(self._id, [target], ack_type, txnid=txn.txn_id, request_id=rid)
        ))
        txn.track(op)
        await op

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        mid, _ = self._id_and_size(message)
        self._check_open()
        self._nacks.add(mid.entry, self._ctx.clock.monotonic_ms())

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to resend everything unacked that it sent to this consumer."""
        conn = self._ready_connection()
        removed = self._queue.drop(self)
        conn.send(commands.redeliver(self._id))
        self._return_permits(removed)

    def _check_open(self) -> None:
        if self._life.state in (_S.CLOSING, _S.CLOSED):
            raise AlreadyClosed(f"consumer on {self.topic} is closed")

    def flush_acknowledgements(self) -> None:
        """Send grouped acks now instead of at the next ``ack_group_time_ms`` tick."""
        self._flush_acks()

    def _flush_acks(self) -> None:
        if self._conn is None:
            return
        for cmd in self._acks.take_commands(self._id):
            self._send(cmd)

    async def _ack_loop(self) -> None:
        interval_s = max(self._config.ack_group_time_ms, 1) / 1000
        while self._life.state in (_S.READY, _S.CONNECTING):  # ends with the consumer
            await asyncio.sleep(interval_s)
            if len(self._acks):
                self._flush_acks()

    async def _nack_loop(self) -> None:
        interval_s = self._config.negative_ack_delay_ms / 3 / 1000
        while self._life.state in (_S.READY, _S.CONNECTING):  # ends with the consumer
            await asyncio.sleep(interval_s)
            due = self._nacks.take_due(self._ctx.clock.monotonic_ms())
            if due and self._conn is not None:
                self._redeliver(due)

    def _redeliver(self, entries: list[tuple[int, int]]) -> None:
        if not self._config.is_shared:
            self.redeliver_unacknowledged_messages()
            return
        if self._dlq is not None:
            dead, entries = self._dlq.split_due(entries)
            if dead:
                self._spawn(self._dead_letter(dead))
        if entries:
            mids = [MessageId(ledger, entry).to_pb() for ledger, entry in entries]
            self._send(commands.redeliver(self._id, mids))

    async def _dead_letter(self, messages: list[Message]) -> None:
        assert self._dlq is not None
        try:
            await self._dlq.publish(messages)
        except PulsarClientError as exc:
            log.warning("dead-lettering from %s failed, redelivering: %r", self.topic, exc)
            self._send(commands.redeliver(self._id, [m.message_id.to_pb() for m in messages]))
            return
        for msg in messages:
            self._acks.add_individual(msg.message_id, msg.batch_size)
        self._flush_acks()

    # ------------------------------------------------------------ seek, last id

    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id (next message is the one after it) or a publish time."""
        conn = self._ready_connection()
        generation = self._generation
        if isinstance(target, MessageId):
            self._filter = None if target in (EARLIEST, LATEST) else StartFilter(target, False)
            self._start = target
            build = lambda rid: commands.seek(self._id, rid, message_id=target.to_pb())  # noqa: E731
        else:
            if not self._config.durable:
                raise NotAllowedError("readers cannot seek by publish time")
            self._filter = None
            build = lambda rid: commands.seek(self._id, rid, publish_time_ms=target)  # noqa: E731
        self._last_taken = None
        self._flush_acks()
        self._acks.forget_sent()
        await conn.request(build)
        if self._generation == generation and self._life.state is _S.READY:
            self._queue.drop(self)  # a broker that did not close us: drop what predates the seek
            return
        try:
            await asyncio.wait_for(self._wait_generation(generation), self._ctx.config.operation_timeout_ms / 1000)
        except TimeoutError:
            raise OperationTimeout(f"consumer on {self.topic} did not re-subscribe after seek") from None

    async def _wait_generation(self, generation: int) -> None:
        await self._subscribed.wait()  # cleared by the broker's CLOSE_CONSUMER, set by the re-subscribe
        if self._generation <= generation:
            raise NotAllowedError(f"consumer on {self.topic} was not re-subscribed after seek")

    async def get_last_message_id(self) -> MessageId:
        conn = self._ready_connection()
        reply = await conn.request(lambda rid: commands.get_last_message_id(self._id, rid))
        return MessageId.from_pb(reply.getLastMessageIdResponse.last_message_id)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


BATCH_SIZES_REMEMBERED_MAX: Final = 100_000
