"""Shared and Key_Shared dispatch: many consumers, each entry to one of them.

Shared spreads entries round-robin over consumers with permits. Entries given back (a consumer closed,
a negative ack, an explicit redelivery request) are replayed before new ones, with their redelivery
count raised. Entries with a future ``deliver_at_time`` wait in the delayed index until due.

Key_Shared sends all entries of one key hash to the consumer that owns the hash. A key never has
entries at two consumers at once: an entry that cannot go now (owner without permits) holds back every
later entry of its key, and a consumer that joins after others only receives entries read before it
joined until everything before its join point is acknowledged (Pulsar's "recently joined consumers"
rule), unless it allows out-of-order delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from magnetar.broker.endpoint import Endpoint
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.subscription.delayed import DelayedDeliveryTracker
from magnetar.broker.subscription.dispatcher import Dispatcher, Prepared
from magnetar.broker.subscription.key_shared import StickyKeySelector
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, ManagedLedger, Position

REPLAY_MAX = 10_000  # entries waiting for redelivery before new reads pause


class SharedDispatcher(Dispatcher):
    def __init__(self, sub_type: int, ledger: ManagedLedger, cursor: Cursor, clock: Clock, **limits: Any) -> None:
        super().__init__(sub_type, ledger, cursor, clock, **limits)
        self._replay: set[Position] = set()
        self._delayed = DelayedDeliveryTracker(clock)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._next_index = 0
        self._next_lead = -1
        self._turns_held: set[int] | None = None  # ids of the endpoints whose turns this round holds
        self._room_waiters: dict[int, asyncio.Task[None]] = {}

    @property
    def delayed_count(self) -> int:
        return len(self._delayed)

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        given_back = consumer.take_unacked()
        self._count_redelivery(given_back)
        self._replay.update(given_back)

    def redeliver(self, consumer: Consumer, positions: Iterable[Position] | None) -> None:
        if positions is None:
            chosen = consumer.take_unacked()
        else:
            chosen = [p for p in positions if p in consumer.unacked]
            for p in chosen:
                consumer.forget(p)  # given back, not acked: it no longer counts against the consumer
        self._count_redelivery(chosen)
        self._replay.update(chosen)
        self.wake()

    def acknowledged(self, positions: Iterable[Position]) -> None:
        for p in positions:
            self._redelivery_counts.pop(p, None)
            self._forget_replay(p)

    def released(self, positions: Iterable[Position]) -> None:
        """Only entries the reads already passed are replayed: the reads reach the others themselves (after a
        restart they start at the mark-delete position again, behind a recovered transaction's acks)."""
        read_from = self._cursor.read_position
        for p in positions:
            for c in self.consumers:
                c.forget(p)
            if p < read_from:
                self._replay.add(p)
        self.wake()

    def rewind_all(self) -> None:
        self._replay.clear()
        self._delayed.clear()
        super().rewind_all()

    def _forget_replay(self, position: Position) -> None:
        self._replay.discard(position)

    def _hold(self, p: Prepared) -> None:
        self._replay.add(p.position)

    # ---- one round -----------------------------------------------------------------------------------

    def _eligible(self, consumer: Consumer) -> bool:
        """Can take messages in this round: permits, room, and its connection's turn is held by the round."""
        return consumer.can_receive and (self._turns_held is None or id(consumer.endpoint) in self._turns_held)

    def _permits(self) -> int:
        return sum(c.permits for c in self.consumers if self._eligible(c))

    async def _dispatch_round(self) -> bool:
        """Take the turns of the receiving connections that are free with room (waiting for one, in rotation,
        only if none is) and read for the consumers on the connections held: each consumer's output is
        charged to its own connection, and a stalled or busy connection does not hold up the others."""
        endpoints: dict[int, Endpoint] = {}
        for c in self.consumers:
            if c.can_receive:
                endpoints.setdefault(id(c.endpoint), c.endpoint)
        if not endpoints:
            return await self._wait_for_backed_up_consumers()
        order = list(endpoints.values())
        async with contextlib.AsyncExitStack() as turns:
            held = {id(e) for e in order if await turns.enter_async_context(e.output_turn_if_free())}
            if not held:  # every turn is taken by other subscriptions' reads: wait for one, in rotation
                self._next_lead = (self._next_lead + 1) % len(order)
                lead = order[self._next_lead]
                await turns.enter_async_context(lead.output_turn())  # one read at a time per connection
                held.add(id(lead))
            self._turns_held = held
            try:
                budget = self._permits()
                progress = await self._dispatch_with(budget) if budget > 0 else False
            finally:
                self._turns_held = None
        if not progress:
            for endpoint in order:  # what only a busy connection's consumers could take: retry once it is free
                if id(endpoint) not in held:
                    self._wake_when_free(endpoint, turn=True)
        return progress

    async def _wait_for_backed_up_consumers(self) -> bool:
        """No consumer can take messages now; wake up once a connection that only lacks room has room again
        (one waiter per such connection, so a stalled one does not hide the others; the loop stays free for
        permits and acks meanwhile). Always False: nothing was done."""
        for c in self.consumers:
            if c.wants_messages:
                self._wake_when_free(c.endpoint, turn=False)
        return False

    def _wake_when_free(self, endpoint: Endpoint, *, turn: bool) -> None:
        """Wake the dispatcher once ``endpoint`` has room (and, with ``turn``, its dispatch turn is free)."""
        key = id(endpoint)
        if key not in self._room_waiters or self._room_waiters[key].done():
            self._room_waiters[key] = asyncio.get_running_loop().create_task(self._wake_on(endpoint, turn))

    async def _wake_on(self, endpoint: Endpoint, turn: bool) -> None:
        try:
            if turn:
                async with endpoint.output_turn():
                    pass
            else:
                await endpoint.drain()
        finally:
            self._room_waiters.pop(id(endpoint), None)
        self.wake()

    async def _dispatch_with(self, budget: int) -> bool:
        for p in self._delayed.pop_due(REPLAY_MAX):
            self._replay.add(p)
        progress = False
        if self._replay:
            progress = await self._dispatch_replay(min(budget, self._read_batch_max))
            budget = self._permits()
            if budget <= 0 or not self._may_read_new():
                return progress
        if len(self._replay) >= REPLAY_MAX or self._delayed.full:
            return progress
        entries = await self._cursor.read_entries(
            min(budget, self._read_batch_max), self._read_bytes_max, max_position=self._read_limit()
        )
        if not entries:
            self._arm_timer()
            return progress
        await self._assign(self._hold_delayed(self._prepare(entries)), from_replay=False)
        self._arm_timer()
        return True

    def _may_read_new(self) -> bool:
        return True

    async def _dispatch_replay(self, count: int) -> bool:
        chosen = sorted(self._replay)[:count]
        entries = []
        for p in chosen:
            if not self._cursor.is_acknowledged(p):
                entries.append(await self._ledger.read_entry(p))  # a failed read keeps them all for the retry
        for p in chosen:
            self._forget_replay(p)
        return await self._assign(self._prepare(entries), from_replay=True) > 0

    def _hold_delayed(self, prepared: list[Prepared]) -> list[Prepared]:
        ready: list[Prepared] = []
        for p in prepared:
            if p.deliver_at_ms is None or self._delayed.is_due(p.deliver_at_ms):
                ready.append(p)
            elif not self._delayed.add(p.position, p.deliver_at_ms):
                self._cursor.seek(p.position)  # the index is full: read this entry again later
                break
        return ready

    def _arm_timer(self) -> None:
        due_ms = self._delayed.next_deliver_at_ms()
        if due_ms is None or (self._timer_at_ms is not None and self._timer_at_ms <= due_ms):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max(0.0, (due_ms - self._clock.now_ms()) / 1000)
        self._timer_at_ms = due_ms
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self._timer_at_ms = None
        self.wake()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for waiter in list(self._room_waiters.values()):
            waiter.cancel()
        await super().close()

    async def _assign(self, prepared: list[Prepared], *, from_replay: bool) -> int:
        """Hand entries out; what cannot go now waits in the replay set. Returns how many consumers got some."""
        targets: dict[int, Consumer] = {}
        for p in prepared:
            consumer = self._next_with_permits()
            if consumer is None:
                self._hold(p)
            else:
                self._send(consumer, p, targets)
        return len(targets)

    def _send(self, consumer: Consumer, p: Prepared, targets: dict[int, Consumer]) -> None:
        consumer.deliver([self._delivery(p)], self._clock.now_ms())
        targets.setdefault(id(consumer), consumer)

    def _next_with_permits(self) -> Consumer | None:
        n = len(self.consumers)
        for i in range(n):
            c = self.consumers[(self._next_index + i) % n]
            if self._eligible(c):  # room is checked per entry: a connection is never sent past its mark
                self._next_index = (self._next_index + i + 1) % n
                return c
        return None


class KeySharedDispatcher(SharedDispatcher):
    def __init__(self, sub_type: int, ledger: ManagedLedger, cursor: Cursor, clock: Clock, **limits: Any) -> None:
        super().__init__(sub_type, ledger, cursor, clock, **limits)
        self.selector: StickyKeySelector | None = None
        self._recently_joined: dict[Consumer, Position] = {}
        self._replay_hashes: dict[Position, int] = {}

    def add_consumer(self, consumer: Consumer) -> None:
        if self.selector is None or not self.consumers:
            self.selector = StickyKeySelector(consumer.key_shared_mode)
        self.selector.add(consumer)  # may refuse (overlapping sticky ranges, mixed modes)
        if self.consumers and not consumer.allow_out_of_order:
            self._recently_joined[consumer] = self._cursor.read_position
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if self.selector is not None:
            self.selector.remove(consumer)
        self._recently_joined.pop(consumer, None)
        super().remove_consumer(consumer)

    def acknowledged(self, positions: Iterable[Position]) -> None:
        super().acknowledged(positions)
        if self._recently_joined:
            self.wake()  # the mark-delete may have passed a join point

    def rewind_all(self) -> None:
        self._replay_hashes.clear()
        self._recently_joined.clear()
        super().rewind_all()

    def recently_joined(self) -> dict[Consumer, Position]:
        return dict(self._recently_joined)

    def _forget_replay(self, position: Position) -> None:
        super()._forget_replay(position)
        self._replay_hashes.pop(position, None)

    def _hold(self, p: Prepared) -> None:
        super()._hold(p)
        self._replay_hashes[p.position] = p.key_hash

    def _may_read_new(self) -> bool:
        # entries given back without a known key go out first, so no later entry of their key overtakes them
        return all(p in self._replay_hashes for p in self._replay)

    def _restricted(self, consumer: Consumer, position: Position) -> bool:
        joined_at = self._recently_joined.get(consumer)
        return joined_at is not None and position >= joined_at

    def _release_recently_joined(self) -> None:
        first_unacked = self._ledger.next_valid_position(self._cursor.mark_delete_position)
        for consumer, joined_at in list(self._recently_joined.items()):
            if first_unacked >= joined_at:
                del self._recently_joined[consumer]

    async def _assign(self, prepared: list[Prepared], *, from_replay: bool) -> int:
        self._release_recently_joined()
        # replayed entries are the oldest of their keys; new ones wait behind any replay of their key
        blocked = set() if from_replay else set(self._replay_hashes.values())
        targets: dict[int, Consumer] = {}
        for p in sorted(prepared, key=lambda x: x.position):
            consumer = self.selector.select(p.key_hash) if self.selector is not None else None
            if (
                p.key_hash in blocked
                or consumer is None
                or not self._eligible(consumer)
                or self._restricted(consumer, p.position)
            ):
                self._hold(p)
                blocked.add(p.key_hash)
                continue
            self._send(consumer, p, targets)
        return len(targets)
