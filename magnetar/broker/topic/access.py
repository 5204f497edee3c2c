"""Who may produce on a topic (PIP-68): one explicit state machine per topic.

States: IDLE (no producer), SHARED (one or more Shared producers), EXCLUSIVE (one holder). Waiters
(WaitForExclusive) queue first-come first-served in any state and are promoted when the topic becomes
free. The topic epoch, a counter kept in the managed ledger's property ``pulsar.topic.epoch``, is written
(compare-and-set, through ``EpochStore``) before an exclusive producer is confirmed, so it survives
restarts and two racing takeovers cannot both win. This module decides; the server tells the clients.

Rules (Pulsar's, facts §4.3 and the PIP-68 spec):

| request              | IDLE              | SHARED                 | EXCLUSIVE               |
|----------------------|-------------------|------------------------|-------------------------|
| Shared               | → SHARED          | join                   | ProducerBusy            |
| Exclusive            | → EXCLUSIVE, +1   | ProducerFenced         | ProducerFenced          |
| WaitForExclusive     | → EXCLUSIVE, +1   | queued                 | queued                  |
| ExclusiveWithFencing | → EXCLUSIVE, +1   | fence all → EXCLUSIVE  | fence holder → EXCLUSIVE|

A Shared request is also refused (ProducerBusy) while waiters queue, and an Exclusive one (ProducerFenced).
A reconnecting producer that presents an epoch lower than the topic's is fenced; one that presents the
current epoch while the topic is free takes it back without a new epoch.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.errors import ProducerBusy, ProducerFenced
from magnetar.broker.topic.producer import AccessMode, Producer
from magnetar.core.lifecycle import Transitions

log = logging.getLogger("magnetar.broker.access")

TOPIC_EPOCH_PROPERTY = "pulsar.topic.epoch"
WAITERS_MAX = 10_000


class EpochStore(Protocol):
    def current_epoch(self) -> int | None:
        """The persisted epoch, None if no exclusive producer ever held the topic."""
        ...

    async def persist_epoch(self, epoch: int) -> None:
        """Write the epoch durably (compare-and-set) before it is handed out."""
        ...


class AccessState(enum.Enum):
    IDLE = "idle"
    SHARED = "shared"
    EXCLUSIVE = "exclusive"


ACCESS_TRANSITIONS = Transitions(AccessState, {
    AccessState.IDLE: {AccessState.SHARED, AccessState.EXCLUSIVE},
    AccessState.SHARED: {AccessState.SHARED, AccessState.IDLE, AccessState.EXCLUSIVE},
    AccessState.EXCLUSIVE: {AccessState.IDLE, AccessState.EXCLUSIVE},
})


@dataclass(frozen=True, slots=True)
class Granted:
    """The producer may publish now; ``topic_epoch`` is None for Shared producers."""

    topic_epoch: int | None


@dataclass(frozen=True, slots=True)
class Queued:
    """A WaitForExclusive producer: ``promoted`` resolves to its epoch when it becomes the holder."""

    promoted: asyncio.Future[int]


Admission = Granted | Queued


class ProducerAccess:
    def __init__(self, epochs: EpochStore, on_fenced: FenceCallback) -> None:
        self._epochs = epochs
        self._on_fenced = on_fenced
        self.state = AccessState.IDLE
        self.holder: Producer | None = None
        self.shared: set[Producer] = set()
        self._waiters: deque[tuple[Producer, asyncio.Future[int]]] = deque()
        self._promoting = False

    @property
    def waiting(self) -> list[Producer]:
        return [p for p, _ in self._waiters]

    @property
    def topic_epoch(self) -> int | None:
        return self._epochs.current_epoch()

    def _transition_to(self, new: AccessState) -> None:
        self.state = ACCESS_TRANSITIONS.check(self.state, new, "producer access")

    # ---- admission -----------------------------------------------------------------------------------

    async def admit(self, producer: Producer, presented_epoch: int | None) -> Admission:
        mode = producer.access_mode
        if mode is AccessMode.SHARED:
            if self.state is AccessState.EXCLUSIVE or self._waiters:
                raise ProducerBusy("Topic has an exclusive producer or producers waiting for exclusive access")
            self.shared.add(producer)
            self._transition_to(AccessState.SHARED)
            return Granted(None)
        self._check_epoch(presented_epoch)
        if mode is AccessMode.EXCLUSIVE:
            if self.state is not AccessState.IDLE or self._waiters:
                raise ProducerFenced("Topic already has producers: exclusive access refused")
            return Granted(await self._take(producer, presented_epoch))
        if mode is AccessMode.WAIT_FOR_EXCLUSIVE:
            if self.state is AccessState.IDLE and not self._waiters:
                return Granted(await self._take(producer, presented_epoch))
            if len(self._waiters) >= WAITERS_MAX:
                raise ProducerBusy("Too many producers waiting for exclusive access")
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._waiters.append((producer, future))
            return Queued(future)
        # ExclusiveWithFencing: everyone else goes
        self._fence_everyone_but(producer)
        return Granted(await self._take(producer, presented_epoch))

    def _check_epoch(self, presented: int | None) -> None:
        current = self._epochs.current_epoch()
        if presented is not None and current is not None and presented < current:
            raise ProducerFenced(f"Producer epoch {presented} is older than the topic epoch {current}")

    async def _take(self, producer: Producer, presented: int | None) -> int:
        """Make ``producer`` the holder and persist its epoch before confirming it."""
        self.holder = producer
        self._transition_to(AccessState.EXCLUSIVE)
        current = self._epochs.current_epoch()
        epoch = presented if presented is not None and presented == current else (
            0 if current is None else current + 1
        )
        try:
            if epoch != current:
                await self._epochs.persist_epoch(epoch)
        except BaseException:
            self._drop_holder(producer)
            raise
        if self.holder is not producer:
            raise ProducerFenced("Exclusive access was lost while the topic epoch was being written")
        producer.topic_epoch = epoch
        return epoch

    def _fence_everyone_but(self, producer: Producer) -> None:
        victims = [p for p in (self.holder, *self.shared) if p is not None and p is not producer]
        waiters, self._waiters = list(self._waiters), deque()
        for _, future in waiters:
            if not future.done():
                future.set_exception(ProducerFenced("Fenced by an ExclusiveWithFencing producer"))
        self.shared.clear()
        self.holder = None
        if self.state is not AccessState.IDLE:
            self._transition_to(AccessState.IDLE)
        for victim in victims:
            victim.fenced = True
            self._on_fenced(victim)

    # ---- release and promotion -----------------------------------------------------------------------

    def release(self, producer: Producer) -> None:
        """The producer closed or its connection dropped; promote the next waiter if the topic is free."""
        for i, (waiting, future) in enumerate(self._waiters):
            if waiting is producer:
                del self._waiters[i]
                if not future.done():
                    future.cancel()
                return
        if producer in self.shared:
            self.shared.discard(producer)
            if not self.shared:
                self._transition_to(AccessState.IDLE)
        elif self.holder is producer:
            self._drop_holder(producer)
        self._schedule_promotion()

    def _drop_holder(self, producer: Producer) -> None:
        if self.holder is producer:
            self.holder = None
            self._transition_to(AccessState.IDLE)

    def _schedule_promotion(self) -> None:
        if self.state is AccessState.IDLE and self._waiters and not self._promoting:
            self._promoting = True
            asyncio.get_running_loop().create_task(self._promote_next())

    async def _promote_next(self) -> None:
        try:
            while self.state is AccessState.IDLE and self._waiters:
                producer, future = self._waiters.popleft()
                if future.done() or producer.closed:
                    continue
                try:
                    epoch = await self._take(producer, None)
                except Exception as exc:
                    if not future.done():
                        future.set_exception(exc)
                    continue
                if future.done():  # the waiter went away while its epoch was written
                    self._drop_holder(producer)
                    continue
                future.set_result(epoch)
                log.info("promoted waiting producer %s to exclusive access (epoch %d)", producer.name, epoch)
                return
        finally:
            self._promoting = False


class FenceCallback(Protocol):
    def __call__(self, producer: Producer) -> None: ...
