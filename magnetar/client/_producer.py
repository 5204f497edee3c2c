"""A producer on one (partition) topic: sequence ids, batching, the pending queue, reconnects.

Every send becomes an ``_OpSend`` in a bounded pending queue (``max_pending_messages``) until its
SEND_RECEIPT; receipts must come in order. When the connection drops or the broker closes the
producer, it re-creates itself (LOOKUP, PRODUCER with the assigned name and ``epoch+1``) and
resends every pending op with the same sequence ids, so broker dedup removes duplicates.
Knows nothing of partitions (``_partitioned``) or of how frames are read (``_connection``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import deque
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from magnetar.client._batch import BatchBuilder, OutgoingMessage, build_entry, message_metadata, split_chunks
from magnetar.client._config import ProducerConfig
from magnetar.client._connection import Connection
from magnetar.client._context import ClientContext
from magnetar.client._messages import MessageId
from magnetar.client._transaction import Transaction
from magnetar.client.errors import (
    AlreadyClosed,
    ChecksumError,
    MessageTooBig,
    OperationTimeout,
    ProducerFenced,
    ProducerQueueIsFull,
    PulsarClientError,
    TopicTerminated,
    from_server,
    is_retriable,
)
from magnetar.core.lifecycle import Lifecycle, Transitions
from magnetar.protocol import DEFAULT_MAX_MESSAGE_SIZE, commands, compress, ids, pb

__all__ = ["Producer"]

log = logging.getLogger(__name__)
SendFuture = asyncio.Future[MessageId]


class ProducerState(enum.Enum):
    INIT = "init"
    CONNECTING = "connecting"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"  # fenced or terminated: permanent


_S = ProducerState
_EDGES: Final = Transitions(ProducerState, {
    _S.INIT: frozenset({_S.CONNECTING, _S.CLOSED}),
    _S.CONNECTING: frozenset({_S.READY, _S.CLOSING, _S.FAILED, _S.CLOSED}),
    _S.READY: frozenset({_S.CONNECTING, _S.CLOSING, _S.FAILED}),
    _S.CLOSING: frozenset({_S.CLOSED}),
    _S.FAILED: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
})
_PERMANENT: Final = (ProducerFenced, TopicTerminated)


@dataclass(slots=True)
class _OpSend:
    sequence_id: int
    entry: bytes
    futures: list[SendFuture]
    num_messages: int  # messages in the entry, for the receipt's sequence range
    batch: bool
    created_ms: float
    is_chunk: bool = False
    pending_messages: int = field(default=1)  # what this op frees in max_pending_messages
    txn_id: tuple[int, int] | None = None
    marker: bool = False


class Producer:
    """Create through ``Client.create_producer``; ``send`` returns the ``MessageId``."""

    def __init__(self, ctx: ClientContext, topic: str, config: ProducerConfig, *, partition: int = -1) -> None:
        self._ctx = ctx
        self.topic = topic
        self.partition = partition
        self._config = config
        self._id = next(ctx.producer_ids)
        self._life = Lifecycle(_S.INIT, _EDGES)
        self._conn: Connection | None = None
        self._name = config.producer_name
        self._epoch = -1
        self._topic_epoch: int | None = None
        self._next_seq = 0
        self._created = False
        self._last_seq_published = -1
        self._pending: deque[_OpSend] = deque()
        self._pending_messages = 0
        self._room = asyncio.Event()
        self._batch: BatchBuilder[SendFuture] | None = None
        if config.batching is not None:
            self._batch = BatchBuilder(config.batching)
        self._batch_timer: asyncio.TimerHandle | None = None
        self._failure: PulsarClientError | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ properties

    @property
    def producer_name(self) -> str:
        return self._name or ""

    @property
    def last_sequence_id(self) -> int:
        return self._last_seq_published

    @property
    def state(self) -> ProducerState:
        return self._life.state

    @property
    def pending_messages(self) -> int:
        return self._pending_messages

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._life.transition_to(_S.CONNECTING)
        try:
            await self._ctx.retry(self._connect, f"create producer on {self.topic}")
        except BaseException:
            self._life.transition_to(_S.CLOSED)
            raise
        if self._config.initial_sequence_id is not None:
            self._next_seq = self._config.initial_sequence_id
        self._spawn(self._timeout_loop())

    async def _connect(self) -> None:
        conn = await self._ctx.connection_for(self.topic)
        self._epoch += 1
        conn.register_producer(self._id, self)
        try:
            reply = await conn.request(self._producer_command)
        except BaseException:
            conn.unregister_producer(self._id)
            raise
        success = reply.producer_success
        self._name = success.producer_name
        if success.HasField("topic_epoch"):
            self._topic_epoch = success.topic_epoch
        if not self._created:
            self._created = True
            self._last_seq_published = success.last_sequence_id
            self._next_seq = success.last_sequence_id + 1
        if self._life.state is not _S.CONNECTING:  # closed while we were connecting
            conn.unregister_producer(self._id)
            return
        self._conn = conn
        self._life.transition_to(_S.READY)
        for op in self._pending:
            self._write(op)

    def _producer_command(self, request_id: int) -> pb.BaseCommand:
        return commands.producer(
            self.topic,
            self._id,
            request_id,
            producer_name=self._name,
            epoch=self._epoch,
            access_mode=self._config.access_mode_value,
            topic_epoch=self._topic_epoch,
            metadata=dict(self._config.properties),
            initial_subscription_name=self._config.initial_subscription_name,
        )

    def on_disconnect(self, conn: Connection) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        if self._life.state is _S.READY:
            self._life.transition_to(_S.CONNECTING)
            self._spawn(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        backoff = self._ctx.backoff()
        while self._life.state is _S.CONNECTING:  # ends on success, close or a permanent error
            await asyncio.sleep(backoff.next_ms() / 1000)
            if self._life.state is not _S.CONNECTING:
                return
            try:
                await self._connect()
                return
            except _PERMANENT as exc:
                self._fail_permanently(exc)
                return
            except Exception as exc:
                if not is_retriable(exc) and not isinstance(exc, OperationTimeout):
                    log.warning("producer %s on %s: reconnect failed: %r", self._name, self.topic, exc)

    def _fail_permanently(self, exc: PulsarClientError) -> None:
        self._failure = exc
        if self._life.can_go(_S.FAILED):
            self._life.transition_to(_S.FAILED)
        self._fail_all(exc)

    async def flush(self) -> None:
        """Send the open batch and wait for every pending send to be acknowledged or to fail."""
        self._flush_batch()
        futures = [f for op in self._pending for f in op.futures]
        if futures:
            await asyncio.wait(futures)

    async def close(self) -> None:
        if self._life.state in (_S.CLOSED, _S.CLOSING):
            return
        if self._life.state is _S.FAILED:
            self._life.transition_to(_S.CLOSED)
            return
        self._life.transition_to(_S.CLOSING)
        self._flush_batch()
        futures = [f for op in self._pending for f in op.futures]
        if futures and self._conn is not None:
            await asyncio.wait(futures, timeout=self._config.send_timeout_ms / 1000)
        conn, self._conn = self._conn, None
        if conn is not None and conn.is_ready:
            with contextlib.suppress(PulsarClientError):
                await conn.request(lambda rid: commands.close_producer(self._id, rid))
            conn.unregister_producer(self._id)
        self._life.transition_to(_S.CLOSED)
        self._fail_all(AlreadyClosed(f"producer on {self.topic} closed"))
        for task in self._tasks:
            task.cancel()

    # ------------------------------------------------------------ sending

    async def send(
        self,
        data: bytes,
        *,
        key: str | None = None,
        ordering_key: bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int = 0,
        sequence_id: int | None = None,
        deliver_at_ms: int | None = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        """Send and wait for the broker's receipt; waits for room when the queue is full. With ``txn`` the
        message belongs to that transaction (its partition is registered with the coordinator first)."""
        if txn is not None:
            await txn.register_partition(self.topic)
        if self._config.block_if_queue_full:
            await self._wait_for_room()
        fut = self.send_nowait(
            data, key=key, ordering_key=ordering_key, properties=properties, event_time_ms=event_time_ms,
            sequence_id=sequence_id, deliver_at_ms=deliver_at_ms, txn=txn,
        )
        if self._conn is not None:
            await self._conn.drain_if_congested()
        return await fut

    async def _wait_for_room(self) -> None:
        deadline_s = self._config.send_timeout_ms / 1000
        while self._pending_messages >= self._config.max_pending_messages:  # bounded by the timeout
            self._flush_batch()
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), deadline_s)
            except TimeoutError:
                raise ProducerQueueIsFull(f"no room in {self._config.max_pending_messages} pending") from None

    def send_nowait(
        self,
        data: bytes,
        *,
        key: str | None = None,
        ordering_key: bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int = 0,
        sequence_id: int | None = None,
        deliver_at_ms: int | None = None,
        txn: Transaction | None = None,
    ) -> SendFuture:
        """Queue a message and return a future for its id; raises ProducerQueueIsFull when full. A ``txn``
        must already have this partition registered (``send`` does that)."""
        self._check_open()
        if txn is not None:
            txn.check_open()
        if self._pending_messages >= self._config.max_pending_messages:
            raise ProducerQueueIsFull(f"{self._pending_messages} messages pending on {self.topic}")
        seq = self._next_seq if sequence_id is None else sequence_id
        self._next_seq = max(self._next_seq, seq + 1)
        fut: SendFuture = asyncio.get_running_loop().create_future()
        msg = OutgoingMessage(
            bytes(data), seq, fut, key=key, ordering_key=ordering_key, properties=dict(properties or {}),
            event_time_ms=event_time_ms, deliver_at_ms=deliver_at_ms, txn_id=None if txn is None else txn.txn_id,
        )
        self._pending_messages += 1
        if txn is not None:
            txn.track(fut)
        if self._batch is not None and deliver_at_ms is None:
            if txn is not None:
                txn.flush_before_end(self._flush_batch)  # its end must not wait for the batch timer
            self._add_to_batch(self._batch, msg)
        else:
            self._flush_batch()  # keep sequence order
            self._send_single(msg)
        return fut

    def send_entry(
        self, entry: bytes, *, num_messages: int | None, is_chunk: bool = False, marker: bool = False
    ) -> SendFuture:
        """Send a complete entry (magic, CRC, metadata, payload) as it is, e.g. a geo-replicated copy whose
        metadata keeps its original producer name and sequence id; ``num_messages`` only for a batch. The
        SEND carries this producer's own next sequence id, so receipts match as for any send."""
        self._check_open()
        if self._pending_messages >= self._config.max_pending_messages:
            raise ProducerQueueIsFull(f"{self._pending_messages} messages pending on {self.topic}")
        self._flush_batch()
        count = max(1, num_messages or 1)
        seq = self._next_seq
        self._next_seq += count
        fut: SendFuture = asyncio.get_running_loop().create_future()
        self._pending_messages += 1
        self._enqueue(_OpSend(seq, bytes(entry), [fut], count, num_messages is not None,
                              self._ctx.clock.monotonic_ms(), is_chunk=is_chunk, marker=marker))
        return fut

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._life.state in (_S.CLOSING, _S.CLOSED, _S.INIT):
            raise AlreadyClosed(f"producer on {self.topic} is {self._life.state.value}")

    def _add_to_batch(self, batch: BatchBuilder[SendFuture], msg: OutgoingMessage[SendFuture]) -> None:
        if not batch.has_room_for(msg):
            self._flush_batch()
        if batch.add(msg):
            self._flush_batch()
        elif len(batch) == 1:
            assert self._config.batching is not None
            delay_s = self._config.batching.max_delay_ms / 1000
            self._batch_timer = asyncio.get_running_loop().call_later(delay_s, self._flush_batch)

    def _flush_batch(self) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._batch is None or not len(self._batch):
            return
        compression = self._config.compression_type
        entry, messages = self._batch.take(self.producer_name, self._ctx.clock.now_ms(), compression)
        futures = [m.token for m in messages]
        if len(entry) > self._max_message_size():
            self._reject(futures, MessageTooBig(f"batch of {len(entry)} bytes exceeds the broker's limit"))
            return
        op = _OpSend(messages[0].sequence_id, entry, futures, len(messages), True, self._ctx.clock.monotonic_ms(),
                     pending_messages=len(messages), txn_id=messages[0].txn_id)
        self._enqueue(op)

    def _send_single(self, msg: OutgoingMessage[SendFuture]) -> None:
        meta = message_metadata(msg, self.producer_name, self._ctx.clock.now_ms())
        entry = build_entry(meta, msg.body, self._config.compression_type)
        limit = self._max_message_size()
        now = self._ctx.clock.monotonic_ms()
        if len(entry) <= limit:
            self._enqueue(_OpSend(msg.sequence_id, entry, [msg.token], 1, False, now, txn_id=msg.txn_id))
            return
        if not self._config.chunking:
            self._reject([msg.token], MessageTooBig(f"message of {len(entry)} bytes exceeds {limit}"))
            return
        meta = message_metadata(msg, self.producer_name, self._ctx.clock.now_ms())
        body = msg.body
        if self._config.compression_type != pb.NONE:
            meta.compression = self._config.compression_type  # type: ignore[assignment]
            meta.uncompressed_size = len(body)
            body = compress(self._config.compression_type, body)
        chunks = split_chunks(meta, body, limit, f"{self.producer_name}-{msg.sequence_id}")
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            self._enqueue(_OpSend(msg.sequence_id, chunk, [msg.token] if last else [], 1, False, now,
                                  is_chunk=True, pending_messages=1 if last else 0, txn_id=msg.txn_id))

    def _max_message_size(self) -> int:
        conn = self._conn
        return conn.max_message_size if conn is not None else DEFAULT_MAX_MESSAGE_SIZE

    def _reject(self, futures: list[SendFuture], exc: PulsarClientError) -> None:
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)
        self._release(len(futures))

    def _release(self, count: int) -> None:
        self._pending_messages -= count
        assert self._pending_messages >= 0
        if self._pending_messages < self._config.max_pending_messages:
            self._room.set()

    def _enqueue(self, op: _OpSend) -> None:
        self._pending.append(op)
        if self._life.state in (_S.READY, _S.CLOSING) and self._conn is not None:
            self._write(op)

    def _write(self, op: _OpSend) -> None:
        assert self._conn is not None
        cmd = commands.send(self._id, op.sequence_id, op.num_messages if op.batch else None, op.is_chunk,
                            txnid=op.txn_id, marker=op.marker)
        with contextlib.suppress(PulsarClientError):  # going away: on_disconnect resends what is pending
            self._conn.send_payload(cmd, op.entry)

    # ------------------------------------------------------------ receipts

    def on_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        if not self._pending:
            return
        op = self._pending[0]
        seq = receipt.sequence_id
        if seq < op.sequence_id:
            return  # that op already timed out
        if seq > op.sequence_id + op.num_messages - 1:
            log.warning("receipt for seq %d ahead of %d on %s: reconnecting", seq, op.sequence_id, self.topic)
            self._drop_connection()
            return
        self._pending.popleft()
        ledger, entry = ids.signed(receipt.message_id.ledgerId), ids.signed(receipt.message_id.entryId)
        for index, fut in enumerate(op.futures):
            if not fut.done():
                fut.set_result(MessageId(ledger, entry, index if op.batch else -1, self.partition))
        self._last_seq_published = max(self._last_seq_published, op.sequence_id + op.num_messages - 1)
        self._release(op.pending_messages)

    def on_send_error(self, error: pb.CommandSendError) -> None:
        exc = from_server(error.error, error.message)
        if isinstance(exc, ChecksumError) and self._pending and self._pending[0].sequence_id == error.sequence_id:
            op = self._pending.popleft()
            self._reject(op.futures, exc)
            return
        if isinstance(exc, _PERMANENT):
            self._fail_permanently(exc)
            return
        self._drop_connection()  # transient: reconnect and resend, as the reference client does

    def _drop_connection(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.unregister_producer(self._id)
            self.on_disconnect(conn)

    def _fail_all(self, exc: PulsarClientError) -> None:
        ops, self._pending = self._pending, deque()
        for op in ops:
            self._reject(op.futures, exc)
            self._release(op.pending_messages - len(op.futures))
        if self._batch is not None and len(self._batch):
            _, messages = self._batch.take(self.producer_name, 0, pb.NONE)
            self._reject([m.token for m in messages], exc)

    async def _timeout_loop(self) -> None:
        timeout_ms = self._config.send_timeout_ms
        if timeout_ms <= 0:
            return
        while self._life.state not in (_S.CLOSED, _S.FAILED):  # ends with the producer
            await asyncio.sleep(min(timeout_ms / 4, 1000) / 1000)
            now = self._ctx.clock.monotonic_ms()
            while self._pending and now - self._pending[0].created_ms > timeout_ms:
                op = self._pending.popleft()
                self._reject(op.futures, OperationTimeout(f"send not acknowledged within {timeout_ms} ms"))
                self._release(op.pending_messages - len(op.futures))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

