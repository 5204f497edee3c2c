"""A subscription: a cursor, its consumers and the dispatcher that feeds them.

It enforces the subscription-type rules (one consumer on Exclusive, one type per subscription) and turns
client acks into cursor operations. A non-durable subscription (a reader) lives while it has consumers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.errors import ConsumerBusy
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.subscription.dispatcher import (
    DEFAULT_READ_BACKOFF,
    Dispatcher,
    EntryGate,
    ReadBackoff,
    SingleActiveDispatcher,
)
from magnetar.broker.subscription.dispatcher_shared import KeySharedDispatcher, SharedDispatcher
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, ManagedLedger, Position

log = logging.getLogger("magnetar.broker.subscription")

_new = tuple.__new__  # builds a Position without its Python-level constructor (per acked id)

ACK_INDIVIDUAL = 0
ACK_CUMULATIVE = 1


class Subscription:
    def __init__(
        self,
        name: str,
        ledger: ManagedLedger,
        cursor: Cursor,
        clock: Clock,
        *,
        durable: bool,
        read_batch_max: int,
        read_bytes_max: int,
        auto_skip_corrupted: bool = False,
        gate: EntryGate | None = None,
        read_backoff: ReadBackoff = DEFAULT_READ_BACKOFF,
    ) -> None:
        self.name = name
        self._read_backoff = read_backoff
        self.gate = gate  # transaction isolation for this subscription's dispatchers
        self._auto_skip_corrupted = auto_skip_corrupted
        self.ledger = ledger
        self.cursor = cursor
        self.clock = clock
        self.durable = durable
        self.sub_type: int | None = None
        self.replicated = False
        self.on_mark_delete: Callable[[Subscription], None] | None = None  # PIP-33 snapshots follow it
        self.on_marker: Callable[[Position, proto.pb.MessageMetadata, bytes], None] | None = None  # read ones
        self.hidden_entries: Callable[[Cursor], int] = lambda _cursor: 0  # markers ahead: not user backlog
        self._read_batch_max = read_batch_max
        self._read_bytes_max = read_bytes_max
        self.dispatcher: Dispatcher | None = None
        self.read_compacted_cursor: Cursor | None = None  # what read_compacted consumers dispatch from
        self._dispatching: Cursor = cursor
        self._closing: set[asyncio.Task[None]] = set()  # dispatchers replaced by a type change
        self.msg_out_counter = 0
        self.bytes_out_counter = 0
        self.acked_counter = 0  # message ids acknowledged (stats: messagesConsumedCounter, ack rates)
        self.last_acked_ms = 0
        self.last_mark_delete_advanced_ms = 0

    @property
    def consumers(self) -> list[Consumer]:
        return list(self.dispatcher.consumers) if self.dispatcher is not None else []

    def add_consumer(self, consumer: Consumer) -> None:
        if self.dispatcher is not None and self.dispatcher.consumers:
            if consumer.sub_type != self.sub_type:
                raise ConsumerBusy(
                    f"Subscription {self.name!r} is of type {SubType.LABELS.get(self.sub_type or 0)}, "
                    f"not {SubType.LABELS.get(consumer.sub_type, consumer.sub_type)}"
                )
            if consumer.sub_type == SubType.EXCLUSIVE:
                raise ConsumerBusy(f"Exclusive consumer is already connected to subscription {self.name!r}")
        compacted = self.read_compacted_cursor if consumer.read_compacted else None
        wanted = compacted or self.cursor
        if (
            self.dispatcher is None
            or self.dispatcher.sub_type != consumer.sub_type
            or (self._dispatching is not wanted and not self.dispatcher.consumers)
        ):
            self._dispatching = wanted
            if self.dispatcher is not None:  # no consumers left: the old type's dispatcher goes
                task = asyncio.get_running_loop().create_task(self.dispatcher.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            self.dispatcher = new_dispatcher(
                consumer.sub_type,
                self.ledger,
                wanted,
                self.clock,
                read_batch_max=self._read_batch_max,
                read_bytes_max=self._read_bytes_max,
                auto_skip_corrupted=self._auto_skip_corrupted,
                gate=self.gate,
                read_backoff=self._read_backoff,
            )
            self.dispatcher.on_marker = lambda *marker: self.on_marker(*marker) if self.on_marker else None
        self.sub_type = consumer.sub_type
        self.dispatcher.add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if self.dispatcher is not None:
            self.msg_out_counter += consumer.msg_out_counter
            self.bytes_out_counter += consumer.bytes_out_counter
            self.dispatcher.remove_consumer(consumer)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def new_entries(self) -> None:
        if self.dispatcher is not None and self.dispatcher.consumers:
            self.dispatcher.wake()

    def acknowledge(self, consumer: Consumer, ack_type: int, ids: Sequence[proto.pb.MessageIdData]) -> None:
        before = self.cursor.mark_delete_position
        self._acknowledge(consumer, ack_type, ids)
        now = self.clock.now_ms()
        consumer.last_acked_ms = self.last_acked_ms = now
        self.acked_counter += len(ids)
        if self.cursor.mark_delete_position != before:
            self.last_mark_delete_advanced_ms = now
            if self.on_mark_delete is not None:
                self.on_mark_delete(self)

    def _acknowledge(self, consumer: Consumer, ack_type: int, ids: Sequence[proto.pb.MessageIdData]) -> None:
        if ack_type == ACK_CUMULATIVE:
            if not ids:
                return
            pos = Position(proto.ids.signed(ids[0].ledgerId), proto.ids.signed(ids[0].entryId))
            if ids[0].ack_set:
                # a cumulative ack in the middle of a batch: everything before that entry is done
                self.cursor.acknowledge_batch_indexes(pos, list(ids[0].ack_set), self._batch_size(consumer, ids[0]))
                pos = Position(pos.ledger_id, pos.entry_id - 1)
            if pos.entry_id >= 0 or pos.ledger_id >= 0:
                self.cursor.acknowledge_cumulative(pos)
                was_blocked = consumer.blocked
                forgotten = consumer.forget_up_to(pos)
                if self.dispatcher is not None:
                    self.dispatcher.acknowledged(forgotten)
                    if was_blocked and not consumer.blocked:
                        self.dispatcher.wake()
            return
        whole: list[Position] = []
        signed = proto.ids.signed
        for mid in ids:
            pos = _new(Position, (signed(mid.ledgerId), signed(mid.entryId)))  # an ACK may carry hundreds
            if mid.ack_set:
                self.cursor.acknowledge_batch_indexes(pos, list(mid.ack_set), self._batch_size(consumer, mid))
                if not self.cursor.is_acknowledged(pos):
                    continue
            whole.append(pos)
        if whole:
            self.cursor.acknowledge(whole)
            unblocked = consumer.forget_all(whole)
            if self.dispatcher is not None:
                self.dispatcher.acknowledged(whole)
                if unblocked:
                    self.dispatcher.wake()

    @staticmethod
    def _batch_size(consumer: Consumer, mid: proto.pb.MessageIdData) -> int:
        if mid.HasField("batch_size") and mid.batch_size > 0:
            return int(mid.batch_size)
        pos = Position(proto.ids.signed(mid.ledgerId), proto.ids.signed(mid.entryId))
        return consumer.unacked.get(pos, 64 * len(mid.ack_set))

    def redeliver(self, consumer: Consumer, ids: Sequence[proto.pb.MessageIdData]) -> None:
        if self.dispatcher is None:
            return
        positions = [Position(proto.ids.signed(m.ledgerId), proto.ids.signed(m.entryId)) for m in ids]
        self.dispatcher.redeliver(consumer, positions or None)

    async def reset(self, position: Position) -> list[Consumer]:
        """Seek: move the cursor and return the consumers to disconnect."""
        await self.cursor.reset(position)
        consumers = self.consumers
        if self.dispatcher is not None:
            self.dispatcher.rewind_all()
        return consumers

    def backlog(self) -> int:
        return max(0, self.cursor.backlog_entries() - self.hidden_entries(self.cursor))

    async def close(self) -> None:
        if self._closing:
            await asyncio.gather(*self._closing)
        if self.dispatcher is not None:
            await self.dispatcher.close()
        if self.durable:
            await self.cursor.flush()


def new_dispatcher(
    sub_type: int,
    ledger: ManagedLedger,
    cursor: Cursor,
    clock: Clock,
    *,
    read_batch_max: int,
    read_bytes_max: int,
    auto_skip_corrupted: bool = False,
    gate: EntryGate | None = None,
    read_backoff: ReadBackoff = DEFAULT_READ_BACKOFF,
) -> Dispatcher:
    limits: dict[str, Any] = {
        "read_batch_max": read_batch_max,
        "read_bytes_max": read_bytes_max,
        "auto_skip_corrupted": auto_skip_corrupted,
        "gate": gate,
        "read_backoff": read_backoff,
    }
    if sub_type == SubType.SHARED:
        return SharedDispatcher(sub_type, ledger, cursor, clock, **limits)
    if sub_type == SubType.KEY_SHARED:
        return KeySharedDispatcher(sub_type, ledger, cursor, clock, **limits)
    return SingleActiveDispatcher(sub_type, ledger, cursor, clock, **limits)
