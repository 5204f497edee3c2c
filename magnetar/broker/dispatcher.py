"""Dispatchers: read a subscription's cursor and hand entries to its consumers within their permits.

One task per subscription runs the read loop, woken by new entries, new permits, redelivery requests
and consumer changes. Two policies share the loop:

* single active consumer (Exclusive, Failover): every entry goes to the active consumer; a redelivery
  or a change of active consumer rewinds the cursor to the first unacked entry;
* spread (Shared): entries go round-robin to consumers with permits; entries given back (consumer
  closed, negative ack) are replayed first, with their redelivery count raised.

Markers are never delivered: they are acknowledged here so they never hold back the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from magnetar import protocol as proto
from magnetar.broker.consumer import Consumer, Delivery, SubType
from magnetar.ledger.api import Cursor, Entry, ManagedLedger, Position

log = logging.getLogger("magnetar.broker.dispatcher")

REDELIVERY_TRACKED_MAX = 100_000  # positions whose redelivery count is remembered
ROUNDS_PER_WAKEUP_MAX = 64  # read rounds before the loop yields to a fresh wake-up


class Dispatcher:
    def __init__(
        self,
        sub_type: int,
        ledger: ManagedLedger,
        cursor: Cursor,
        *,
        read_batch_max: int = 100,
        read_bytes_max: int = 5 * 1024 * 1024,
    ) -> None:
        self.sub_type = sub_type
        self._ledger = ledger
        self._cursor = cursor
        self._read_batch_max = read_batch_max
        self._read_bytes_max = read_bytes_max
        self.consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._replay: set[Position] = set()
        self._redelivery_counts: dict[Position, int] = {}
        self._next_index = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def single_active(self) -> bool:
        return self.sub_type in (SubType.EXCLUSIVE, SubType.FAILOVER)

    @property
    def active_consumer(self) -> Consumer | None:
        return self._active

    # ---- consumers -----------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._choose_active()
        self._ensure_task()
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        given_back = consumer.take_unacked()
        if self.single_active:
            self._count_redelivery(given_back)
            self._choose_active()
        else:
            self._replay.update(given_back)
            self._count_redelivery(given_back)
        self.wake()

    def _choose_active(self) -> None:
        if not self.single_active:
            return
        ranked = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
        if self.consumers and self.sub_type == SubType.FAILOVER and ranked[0].partition >= 0:
            # spread partitions of one topic over the consumers, as Pulsar does
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

    # ---- events --------------------------------------------------------------------------------------

    def wake(self) -> None:
        self._wakeup.set()

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        """Give back ``positions`` (all of the consumer's unacked entries when None)."""
        if positions is None or self.single_active:
            taken = consumer.take_unacked()
            self._count_redelivery(taken)
            if self.single_active:
                self._cursor.rewind()
            else:
                self._replay.update(taken)
        else:
            chosen = [p for p in positions if p in consumer.unacked]
            for p in chosen:
                consumer.forget(p)
            self._count_redelivery(chosen)
            self._replay.update(chosen)
        self.wake()

    def acknowledged(self, positions: Iterable[Position]) -> None:
        for p in positions:
            self._redelivery_counts.pop(p, None)
            self._replay.discard(p)

    def rewind_all(self) -> None:
        """After a cursor reset: forget what was in flight and start reading again."""
        self._replay.clear()
        self._redelivery_counts.clear()
        for c in self.consumers:
            c.unacked.clear()
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
            try:
                for _ in range(ROUNDS_PER_WAKEUP_MAX):
                    if not await self._dispatch_round():
                        break
                else:
                    self.wake()  # more to do: go round again after others had a turn
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dispatch failed on cursor %s; retrying on the next event", self._cursor.name)

    def _permits(self) -> int:
        if self.single_active:
            return self._active.permits if self._active is not None and not self._active.closed else 0
        return sum(max(c.permits, 0) for c in self.consumers if not c.closed)

    async def _dispatch_round(self) -> bool:
        """One read and hand-out; False when there is nothing more to do now."""
        budget = self._permits()
        if budget <= 0:
            return False
        count = min(budget, self._read_batch_max)
        entries = await self._take_replay(count) if self._replay else []
        if not entries:
            entries = await self._cursor.read_entries(count, self._read_bytes_max)
        if not entries:
            return False
        deliveries = self._prepare(entries)
        if deliveries:
            await self._hand_out(deliveries)
        return True

    async def _take_replay(self, count: int) -> list[Entry]:
        chosen = sorted(self._replay)[:count]
        self._replay.difference_update(chosen)
        entries = []
        for p in chosen:
            if self._cursor.is_acknowledged(p):
                continue
            entries.append(await self._ledger.read_entry(p))
        return entries

    def _prepare(self, entries: list[Entry]) -> list[Delivery]:
        deliveries = []
        markers = []
        for e in entries:
            meta = proto.parse_entry_metadata(e.data)
            if meta.HasField("marker_type"):
                markers.append(e.position)
                continue
            num = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
            deliveries.append(
                Delivery(
                    e.position,
                    e.data,
                    max(num, 1),
                    self._redelivery_counts.get(e.position, 0),
                    self._cursor.batch_ack_set(e.position),
                )
            )
        if markers:
            self._cursor.acknowledge(markers)
        return deliveries

    async def _hand_out(self, deliveries: list[Delivery]) -> None:
        if self.single_active:
            active = self._active
            if active is None or active.closed:
                self._cursor.rewind()
                return
            active.deliver(deliveries)
            await active.endpoint.drain()
            return
        targets: dict[int, Consumer] = {}
        leftover: list[Position] = []
        for d in deliveries:
            consumer = self._next_with_permits()
            if consumer is None:
                leftover.append(d.position)
                continue
            consumer.deliver([d])
            targets[id(consumer)] = consumer
        self._replay.update(leftover)
        for c in targets.values():
            await c.endpoint.drain()

    def _next_with_permits(self) -> Consumer | None:
        n = len(self.consumers)
        for i in range(n):
            c = self.consumers[(self._next_index + i) % n]
            if c.permits > 0 and not c.closed and c.endpoint.is_open:
                self._next_index = (self._next_index + i + 1) % n
                return c
        return None
