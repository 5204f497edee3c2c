"""Dispatchers: read a subscription's cursor and hand entries to its consumers within their permits.

One task per subscription runs the read loop, woken by new entries, permits, acks, redelivery requests
and consumer changes. This module holds what every dispatcher shares (the loop, preparing entries,
redelivery counts) and the single-active-consumer policy of Exclusive and Failover subscriptions: every
entry goes to the active consumer, and a redelivery or a change of active consumer rewinds the cursor
to the first unacked entry. The Shared and Key_Shared policies live in ``dispatcher_shared``.

Markers are never delivered: they are acknowledged here so they never hold back the backlog.

A failed read (the offload store down, a damaged entry) is never skipped and never replaced by other data:
the cursor stays where it was and the loop tries again after a wait that doubles from
``dispatcherReadFailureBackoffInitialTimeInMs`` up to ``dispatcherReadFailureBackoffMaxTimeInMs`` (Pulsar's
read-failure backoff); wake-ups in between do not read. A good round resets the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from magnetar import protocol as proto
from magnetar.broker.subscription.consumer import Consumer, DeliveryFields, SubType
from magnetar.broker.subscription.key_shared import key_hash, sticky_key
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, Entry, EntryCorruptedError, ManagedLedger, OffloadReadError, Position
from magnetar.ledger.bitset import all_set, int_to_words, words_to_int
from magnetar.protocol.dispatch_fields import dispatch_fields

log = logging.getLogger("magnetar.broker.dispatcher")

REDELIVERY_TRACKED_MAX = 100_000  # positions whose redelivery count is remembered
ROUNDS_PER_WAKEUP_MAX = 64  # read rounds before the loop yields to a fresh wake-up


@dataclass(frozen=True, slots=True)
class ReadBackoff:
    """Pulsar's ``dispatcherReadFailureBackoff*``: the wait after the n-th failed read in a row."""

    initial_ms: int = 15_000
    max_ms: int = 60_000

    def delay_ms(self, failures_in_row: int) -> int:
        doublings = min(max(failures_in_row - 1, 0), 30)
        return max(0, min(self.max_ms, self.initial_ms * (1 << doublings)))


DEFAULT_READ_BACKOFF = ReadBackoff()


GATE_DELIVER, GATE_DROP, GATE_HOLD = 0, 1, 2  # EntryGate verdicts: deliver / ack unseen / skip for now


class EntryGate(Protocol):
    """Transaction isolation as dispatch sees it (supplied by the topic's transactions)."""

    def max_read_position(self) -> Position | None:
        """Read no entry after this position (None: no limit)."""
        ...

    def passes_all(self) -> bool:
        """True when every readable entry would get GATE_DELIVER (asked once per read batch)."""
        ...

    def verdict(self, position: Position, metadata: proto.pb.MessageMetadata) -> int:
        """GATE_DROP for an aborted transaction's entry, GATE_HOLD for one a transaction is acking."""
        ...

    def pending_mask(self, position: Position) -> int:
        """Batch indexes of ``position`` an open transaction acked (not to be delivered again)."""
        ...


class Prepared(NamedTuple):
    """A read entry with what dispatch decisions need from its metadata (a tuple: one is made per entry)."""

    position: Position
    data: bytes
    num_messages: int
    key_hash: int  # 0 unless the subscription is Key_Shared
    deliver_at_ms: int | None


class Dispatcher:
    """The shared machinery; subclasses decide who gets what in ``_dispatch_round``."""

    def __init__(
        self,
        sub_type: int,
        ledger: ManagedLedger,
        cursor: Cursor,
        clock: Clock,
        *,
        read_batch_max: int = 100,
        read_bytes_max: int = 5 * 1024 * 1024,
        auto_skip_corrupted: bool = False,
        gate: EntryGate | None = None,
        read_backoff: ReadBackoff = DEFAULT_READ_BACKOFF,
    ) -> None:
        self.sub_type = sub_type
        self._read_backoff = read_backoff
        self._failures_in_row = 0
        self._backing_off = False  # after a failed read, until its retry is due
        self.read_failures = 0  # failed reads since this dispatcher started
        self._hash_keys = sub_type == SubType.KEY_SHARED  # only Key_Shared routes by the key's hash
        self._gate = gate
        self._auto_skip_corrupted = auto_skip_corrupted
        self._ledger = ledger
        self._cursor = cursor
        self._clock = clock
        self._read_batch_max = read_batch_max
        self._read_bytes_max = read_bytes_max
        self.consumers: list[Consumer] = []
        self._redelivery_counts: dict[Position, int] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.corrupted_entries = 0
        self.on_marker: Callable[[Position, proto.pb.MessageMetadata, bytes], None] | None = None  # PIP-33 reads

    @property
    def active_consumer(self) -> Consumer | None:
        return None

    @property
    def delayed_count(self) -> int:
        return 0

    # ---- consumers and events ------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._ensure_task()
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.wake()

    def wake(self) -> None:
        self._wakeup.set()

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        raise NotImplementedError

    def acknowledged(self, positions: Iterable[Position]) -> None:
        if not self._redelivery_counts:
            return
        for p in positions:
            self._redelivery_counts.pop(p, None)

    def released(self, positions: Iterable[Position]) -> None:
        """A transaction that acked these entries aborted: deliver them again."""
        for c in self.consumers:
            c.take_unacked()
        self._cursor.rewind()
        self.wake()

    def _read_limit(self) -> Position | None:
        return self._gate.max_read_position() if self._gate is not None else None

    def rewind_all(self) -> None:
        """After a cursor reset: forget what was in flight and start reading again."""
        self._redelivery_counts.clear()
        for c in self.consumers:
            c.take_unacked()
        self._cursor.rewind()
        self.wake()

    def _count_redelivery(self, positions: Iterable[Position]) -> None:
        for p in positions:
            self._redelivery_counts[p] = self._redelivery_counts.get(p, 0) + 1
        while len(self._redelivery_counts) > REDELIVERY_TRACKED_MAX:
            del self._redelivery_counts[next(iter(self._redelivery_counts))]

    # ---- the read loop -------------------------------------------------------------------------------

    def _ensure_task(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dispatcher")

    async def close(self) -> None:
        self._closed = True
        self.wake()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self._backing_off:
                continue  # backing off after a failed read: the scheduled wake-up reads again
            try:
                for _ in range(ROUNDS_PER_WAKEUP_MAX):
                    if not await self._dispatch_round():
                        break
                else:
                    self.wake()  # more to do: go round again after others had a turn
                self._failures_in_row = 0
            except asyncio.CancelledError:
                raise
            except EntryCorruptedError as exc:
                self._corrupted(exc)
            except OffloadReadError as exc:  # the store's reason is the news; no stack trace
                delay_ms = self._retry_later()
                log.warning("cursor %s: read failed, retrying in %d ms: %s", self._cursor.name, delay_ms, exc)
            except Exception:
                delay_ms = self._retry_later()
                log.exception("dispatch failed on cursor %s; retrying in %d ms", self._cursor.name, delay_ms)

    def _corrupted(self, exc: EntryCorruptedError) -> None:
        """A stored entry failed its checksum: never deliver it; skip it only if configured to."""
        self.corrupted_entries += 1
        if self._auto_skip_corrupted:
            log.error("cursor %s: entry %s failed its checksum: skipped (autoSkipNonRecoverableData)",
                      self._cursor.name, exc.position)
            self._cursor.acknowledge([exc.position])
            self.wake()
            return
        log.error(
            "cursor %s: entry %s failed its checksum and is not delivered; this subscription's dispatch "
            "waits until the entry is repaired or skipped (autoSkipNonRecoverableData=true)",
            self._cursor.name, exc.position,
        )
        self._retry_later()

    def _retry_later(self) -> int:
        """Count a failed read and wake the loop after the backoff; returns the wait in ms."""
        self.read_failures += 1
        self._failures_in_row += 1
        delay_ms = self._read_backoff.delay_ms(self._failures_in_row)
        self._backing_off = True
        asyncio.get_running_loop().call_later(delay_ms / 1000, self._retry_due)
        return delay_ms

    def _retry_due(self) -> None:
        self._backing_off = False
        self.wake()

    async def _dispatch_round(self) -> bool:
        """One read and hand-out; False when there is nothing more to do now."""
        raise NotImplementedError

    def _prepare(self, entries: list[Entry]) -> list[Prepared]:
        prepared = []
        markers = []
        gate = self._gate if self._gate is not None and not self._gate.passes_all() else None
        fast = gate is None and not self._hash_keys  # then two metadata fields decide (markers excepted)
        for position, data in entries:
            fields = dispatch_fields(data) if fast else None
            if fields is not None:
                num, deliver_at = fields
                prepared.append(Prepared(position, data, num if num > 0 else 1, 0, deliver_at))
                continue
            meta = proto.parse_entry_metadata(data)
            verdict = gate.verdict(position, meta) if gate is not None else GATE_DELIVER
            if verdict == GATE_DROP or meta.HasField("marker_type"):
                markers.append(position)
                if self.on_marker is not None and meta.HasField("marker_type"):
                    self.on_marker(position, meta, data)
                continue
            if verdict == GATE_HOLD:
                continue
            num = meta.num_messages_in_batch  # 1 when absent (the field's default)
            deliver_at = int(meta.deliver_at_time) if meta.HasField("deliver_at_time") else None
            hashed = key_hash(sticky_key(meta)) if self._hash_keys else 0
            prepared.append(Prepared(position, data, num if num > 0 else 1, hashed, deliver_at))
        if markers:
            self._cursor.acknowledge(markers)
        return prepared

    def _delivery(self, p: Prepared, gate_open: bool = False) -> DeliveryFields:
        """``gate_open``: the gate passed every entry just now (same loop step), no pending mask to ask for."""
        ack_set = self._cursor.batch_ack_set(p.position)
        held = self._gate.pending_mask(p.position) if self._gate is not None and not gate_open else 0
        if held:  # batch indexes an open transaction acked are not handed out again
            unacked = words_to_int(ack_set, p.num_messages) if ack_set is not None else all_set(p.num_messages)
            ack_set = int_to_words(unacked & ~held)
        count = self._redelivery_counts.get(p.position, 0) if self._redelivery_counts else 0
        return p.position, p.data, p.num_messages, count, ack_set


class SingleActiveDispatcher(Dispatcher):
    """Exclusive and Failover: one active consumer receives everything."""

    def __init__(self, sub_type: int, ledger: ManagedLedger, cursor: Cursor, clock: Clock, **limits: Any) -> None:
        super().__init__(sub_type, ledger, cursor, clock, **limits)
        self._active: Consumer | None = None

    @property
    def active_consumer(self) -> Consumer | None:
        return self._active

    def add_consumer(self, consumer: Consumer) -> None:
        super().add_consumer(consumer)
        self._choose_active()

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        self._count_redelivery(consumer.take_unacked())
        self._choose_active()

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        # Exclusive and Failover always redeliver everything unacked (facts §5.6)
        self._count_redelivery(consumer.take_unacked())
        self._cursor.rewind()
        self.wake()

    def _choose_active(self) -> None:
        ranked = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
        if ranked and self.sub_type == SubType.FAILOVER and ranked[0].partition >= 0:
            # partitions of one topic are spread over the consumers, as Pulsar does
            ranked = [ranked[ranked[0].partition % len(ranked)]]
        new_active = ranked[0] if ranked else None
        if new_active is not self._active:
            self._active = new_active
            self._cursor.rewind()
            self._notify_active_change()

    def _notify_active_change(self) -> None:
        if self.sub_type != SubType.FAILOVER:
            return
        for c in self.consumers:
            if c.endpoint.is_open and c.endpoint.protocol_version >= 12:
                cmd = proto.commands.active_consumer_change(c.consumer_id, c is self._active)
                c.endpoint.send_frame(proto.encode_command(cmd))

    async def _dispatch_round(self) -> bool:
        active = self._active
        if active is None or active.closed or active.permits <= 0:
            return False
        async with active.endpoint.output_turn():  # one read at a time per connection, only with room
            count = min(active.permits, self._read_batch_max)
            entries = await self._cursor.read_entries(count, self._read_bytes_max, max_position=self._read_limit())
            if not entries:
                return False
            if active is not self._active or active.closed:
                self._cursor.rewind()  # the active consumer changed while we read
                return True
            gate_open = self._gate is None or self._gate.passes_all()  # no await from here to deliver()
            deliveries = [self._delivery(p, gate_open) for p in self._prepare(entries)]
            if deliveries:
                active.deliver(deliveries, self._clock.now_ms())
        return True
