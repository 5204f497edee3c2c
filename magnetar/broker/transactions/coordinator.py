"""One transaction coordinator (TC): the open transactions of one ``tc_id``, over its log.

Every change is appended to the log before it is applied and answered, so a crash at any point leaves
either the old or the new state in the log. Ending a transaction is: log COMMITTING/ABORTING (from here on
the outcome is decided), end it on every registered partition and subscription through
:class:`TxnParticipants` (transient failures retried with bounded backoff), log COMMITTED/ABORTED, forget
it. Recovery replays the log: open transactions come back with their deadlines, ending ones are driven to
the end. A transaction whose deadline passes is aborted (``check_timeouts``).

Operations on one transaction are serialised by its lock, so a registration cannot slip in after the
end began. Time comes from the injected ``Clock`` (wall clock: deadlines survive restarts).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from magnetar.broker.errors import BrokerError, NotAllowed, ServiceNotReady, SubscriptionNotFound, TopicNotFound
from magnetar.broker.transactions import states
from magnetar.broker.transactions.api import (
    CoordinatorNotFound,
    TransactionNotFound,
    TxnAction,
    TxnError,
    TxnId,
    TxnParticipants,
)
from magnetar.broker.transactions.buffered_writer import RecordPosition
from magnetar.broker.transactions.states import TxnStatus
from magnetar.broker.transactions.txn_log import Op, TxnLog, TxnLogRecord
from magnetar.core.clock import Clock

log = logging.getLogger("magnetar.txn.coordinator")

PARTITIONS_PER_TXN_MAX: Final = 10_000  # registered partitions (and subscriptions) per transaction
_GONE: Final = (TopicNotFound, SubscriptionNotFound)  # nothing left to end there


class TcState(enum.Enum):
    """Pulsar's TransactionMetadataStoreState names (shown by coordinatorStats)."""

    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    CLOSED = "Close"


@dataclass(frozen=True, slots=True, kw_only=True)
class EndPolicy:
    """How hard the TC tries to end a transaction on one participant before answering the client."""

    call_timeout_ms: int = 3_000  # transactionBufferClientOperationTimeoutInMills
    attempts_max: int = 8
    backoff_initial_ms: float = 100.0
    backoff_max_ms: float = 5_000.0


@dataclass(eq=False)
class TxnMeta:
    txn: TxnId
    status: TxnStatus
    opened_ms: int
    timeout_at_ms: int
    partitions: dict[str, None] = field(default_factory=dict)  # ordered set
    subscriptions: dict[tuple[str, str], None] = field(default_factory=dict)
    positions: list[RecordPosition] = field(default_factory=list)  # its log records, released when it finishes
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    modified_ms: int = 0
    owner: str | None = None  # the role that opened it; None: anyone may use it (no authentication)


@dataclass(slots=True)
class TxnCounters:
    created: int = 0
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0


class TransactionCoordinator:
    def __init__(
        self,
        tc_id: int,
        txn_log: TxnLog,
        participants: TxnParticipants,
        clock: Clock,
        *,
        max_active: int = 0,
        end_policy: EndPolicy | None = None,
    ) -> None:
        self.tc_id = tc_id
        self.log = txn_log
        self._participants = participants
        self._clock = clock
        self._max_active = max_active
        self._end = end_policy or EndPolicy()
        self.state = TcState.NONE
        self.txns: dict[TxnId, TxnMeta] = {}
        self._next_least = 0
        self.counters = TxnCounters()
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self._drivers: set[asyncio.Task[None]] = set()

    @property
    def next_least(self) -> int:
        """The sequence the next transaction id of this coordinator gets."""
        return self._next_least

    # ---- recovery ------------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Replay the log; then drive every transaction that was ending to its end (in the background)."""
        self.state = TcState.INITIALIZING
        self.recover_start_ms = self._clock.now_ms()
        highest = -1
        async for position, record in self.log.replay():
            highest = max(highest, record.txn.least)
            self._apply(position, record)
        self._next_least = max(highest + 1, self.log.reserved_sequence)
        self.recover_end_ms = self._clock.now_ms()
        self.state = TcState.READY
        ending = [m for m in self.txns.values() if m.status.ending]
        log.info("TC %d recovered: %d open, %d ending transactions", self.tc_id, len(self.txns) - len(ending),
                 len(ending))
        for meta in ending:
            self._spawn(self._drive_quietly(meta))

    def _apply(self, position: RecordPosition, record: TxnLogRecord) -> None:
        """One replayed record. Records of transactions that already left memory are released leftovers."""
        if record.op is Op.NEW:
            self.txns[record.txn] = TxnMeta(
                record.txn, TxnStatus.OPEN, record.start_time_ms, record.start_time_ms + record.timeout_ms,
                positions=[position], modified_ms=record.modified_ms, owner=record.owner,
            )
            return
        meta = self.txns.get(record.txn)
        if meta is None:
            self.log.release([position])
            return
        meta.positions.append(position)
        meta.modified_ms = record.modified_ms
        if record.op is Op.ADD_PARTITION:
            meta.partitions.update(dict.fromkeys(record.partitions))
        elif record.op is Op.ADD_SUBSCRIPTION:
            meta.subscriptions.update(dict.fromkeys(record.subscriptions))
        elif record.new is not None:
            meta.status = record.new
            if record.new.finished:
                self._forget(meta)

    # ---- the operations ------------------------------------------------------------------------------

    def _ready(self) -> None:
        if self.state is not TcState.READY:
            raise CoordinatorNotFound(f"Transaction coordinator {self.tc_id} is {self.state.value}, not ready")

    def get(self, txn: TxnId) -> TxnMeta:
        self._ready()
        meta = self.txns.get(txn)
        if meta is None:
            raise TransactionNotFound(f"The transaction {txn} is not found in coordinator {self.tc_id}")
        return meta

    async def new_txn(self, timeout_ms: int, owner: str | None = None) -> TxnId:
        self._ready()
        if self._max_active > 0 and len(self.txns) >= self._max_active:
            raise NotAllowed(f"Transaction coordinator {self.tc_id} has {len(self.txns)} active transactions, "
                             f"the limit (maxActiveTransactionsPerCoordinator)")
        txn = TxnId(self.tc_id, self._next_least)
        self._next_least += 1
        await self.log.reserve_through(txn.least)
        now = self._clock.now_ms()
        record = TxnLogRecord(op=Op.NEW, txn=txn, new=TxnStatus.OPEN, timeout_ms=timeout_ms, start_time_ms=now,
                              modified_ms=now, owner=owner)
        position = await self.log.append(record)
        self.txns[txn] = TxnMeta(txn, TxnStatus.OPEN, now, now + timeout_ms, positions=[position], modified_ms=now,
                                 owner=owner)
        self.counters.created += 1
        return txn

    async def add_partitions(self, txn: TxnId, partitions: Iterable[str]) -> None:
        meta = self.get(txn)
        states.check_open(txn, meta.status)
        async with meta.lock:
            states.check_open(txn, self.get(txn).status)
            new = tuple(p for p in dict.fromkeys(partitions) if p not in meta.partitions)
            if not new:
                return
            if len(meta.partitions) + len(new) > PARTITIONS_PER_TXN_MAX:
                raise TxnError(f"Transaction {txn} would touch more than {PARTITIONS_PER_TXN_MAX} partitions")
            await self._log(meta, TxnLogRecord(op=Op.ADD_PARTITION, txn=txn, partitions=new))
            meta.partitions.update(dict.fromkeys(new))

    async def add_subscriptions(self, txn: TxnId, subscriptions: Iterable[tuple[str, str]]) -> None:
        meta = self.get(txn)
        states.check_open(txn, meta.status)
        async with meta.lock:
            states.check_open(txn, self.get(txn).status)
            new = tuple(s for s in dict.fromkeys(subscriptions) if s not in meta.subscriptions)
            if not new:
                return
            if len(meta.subscriptions) + len(new) > PARTITIONS_PER_TXN_MAX:
                raise TxnError(f"Transaction {txn} would touch more than {PARTITIONS_PER_TXN_MAX} subscriptions")
            await self._log(meta, TxnLogRecord(op=Op.ADD_SUBSCRIPTION, txn=txn, subscriptions=new))
            meta.subscriptions.update(dict.fromkeys(new))

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        """Commit or abort; returns once every participant ended it and the final status is logged."""
        meta = self.get(txn)
        states.ending_status(txn, meta.status, action)  # a crossed END_TXN fails now, not after the other's end
        async with meta.lock:
            current = self.get(txn).status  # it may have finished while we waited for the lock
            ending = states.ending_status(txn, current, action)
            if current is TxnStatus.OPEN:
                await self._log(meta, TxnLogRecord(op=Op.UPDATE, txn=txn, expected=current, new=ending))
                meta.status = ending
            await self._drive(meta)

    async def _log(self, meta: TxnMeta, record: TxnLogRecord) -> None:
        now = self._clock.now_ms()
        stamped = TxnLogRecord(
            op=record.op, txn=record.txn, expected=record.expected, new=record.new, partitions=record.partitions,
            subscriptions=record.subscriptions, modified_ms=now,
        )
        meta.positions.append(await self.log.append(stamped))
        meta.modified_ms = now

    # ---- ending ----------------------------------------------------------------------------------------

    async def _drive(self, meta: TxnMeta) -> None:
        """End an ending transaction everywhere, then log its final status (caller holds its lock)."""
        if meta.status.finished or self.txns.get(meta.txn) is not meta:
            return
        action = states.action_of(meta.status)
        calls: list[Callable[[], Awaitable[None]]] = []
        for topic in meta.partitions:
            calls.append(_bind_partition(self._participants, topic, meta.txn, action))
        for topic, sub in meta.subscriptions:
            calls.append(_bind_subscription(self._participants, topic, sub, meta.txn, action))
        await asyncio.gather(*(self._with_retries(call, meta.txn) for call in calls))
        final = states.final_status(meta.status)
        states.check_transition(meta.txn, meta.status, final)
        await self._log(meta, TxnLogRecord(op=Op.UPDATE, txn=meta.txn, expected=meta.status, new=final))
        meta.status = final
        if final is TxnStatus.COMMITTED:
            self.counters.committed += 1
        else:
            self.counters.aborted += 1
        self._forget(meta)
        await self.log.trim_if_due()

    async def _with_retries(self, call: Callable[[], Awaitable[None]], txn: TxnId) -> None:
        delay_ms = self._end.backoff_initial_ms
        for attempt in range(1, self._end.attempts_max + 1):
            try:
                async with asyncio.timeout(self._end.call_timeout_ms / 1000):  # no task per call, unlike wait_for
                    await call()
                return
            except _GONE as exc:
                log.warning("ending %s: participant is gone (%s); nothing to end there", txn, exc)
                return
            except (BrokerError, TimeoutError, OSError) as exc:
                if attempt == self._end.attempts_max:  # retriable for the client: END_TXN again resumes it
                    raise ServiceNotReady(f"Transaction {txn} is still ending after {attempt} attempts: {exc}") from exc
                log.info("ending %s: attempt %d failed (%s), retrying in %.0f ms", txn, attempt, exc, delay_ms)
            await asyncio.sleep(delay_ms / 1000)
            delay_ms = min(delay_ms * 2, self._end.backoff_max_ms)

    def _forget(self, meta: TxnMeta) -> None:
        self.txns.pop(meta.txn, None)
        self.log.release(meta.positions)

    async def _drive_quietly(self, meta: TxnMeta) -> None:
        """Background end of a transaction nobody waits for (recovery, timeouts, a failed END_TXN)."""
        try:
            async with meta.lock:
                await self._drive(meta)
        except (BrokerError, TimeoutError, OSError) as exc:
            log.warning("TC %d: transaction %s not ended yet (%s); retried on the next timeout check",
                        self.tc_id, meta.txn, exc)
        except Exception:
            log.exception("TC %d: ending transaction %s failed", self.tc_id, meta.txn)

    # ---- timeouts ----------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.timeout_at_ms for m in self.txns.values() if m.status is TxnStatus.OPEN]
        return min(deadlines) if deadlines else None

    async def check_timeouts(self) -> int:
        """Abort every open transaction past its deadline; re-drive ending ones left stuck. Returns aborts."""
        if self.state is not TcState.READY:
            return 0
        now = self._clock.now_ms()
        expired = [m for m in self.txns.values() if m.status is TxnStatus.OPEN and m.timeout_at_ms <= now]
        stuck = [m for m in self.txns.values() if m.status.ending and not m.lock.locked()]
        results = await asyncio.gather(*(self._time_out(m) for m in expired), *(self._drive_quietly(m) for m in stuck))
        return sum(1 for r in results[: len(expired)] if r)

    async def _time_out(self, meta: TxnMeta) -> bool:
        async with meta.lock:
            if meta.status is not TxnStatus.OPEN or self.txns.get(meta.txn) is not meta:
                return False
            try:
                await self._log(meta, TxnLogRecord(op=Op.UPDATE, txn=meta.txn, expected=TxnStatus.OPEN,
                                                   new=TxnStatus.ABORTING))
            except BrokerError as exc:
                log.warning("TC %d: cannot time out %s yet (%s); retried on the next check", self.tc_id, meta.txn, exc)
                return False
            meta.status = TxnStatus.ABORTING
            self.counters.timed_out += 1
            log.info("TC %d: transaction %s timed out: aborting", self.tc_id, meta.txn)
        await self._drive_quietly(meta)
        return True

    # ---- lifecycle ---------------------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._drivers.add(task)
        task.add_done_callback(self._drivers.discard)

    async def settle(self) -> None:
        """Wait for the background ends under way (recovery, timeouts) to finish or give up."""
        while self._drivers:  # each pass waits for every task present; drivers spawn no others
            await asyncio.gather(*self._drivers, return_exceptions=True)

    async def close(self) -> None:
        self.state = TcState.CLOSED
        for task in list(self._drivers):
            task.cancel()
        await asyncio.gather(*self._drivers, return_exceptions=True)
        await self.log.close()


def _bind_partition(p: TxnParticipants, topic: str, txn: TxnId, action: TxnAction) -> Callable[[], Awaitable[None]]:
    return lambda: p.end_txn_on_partition(topic, txn, action)


def _bind_subscription(
    p: TxnParticipants, topic: str, sub: str, txn: TxnId, action: TxnAction
) -> Callable[[], Awaitable[None]]:
    return lambda: p.end_txn_on_subscription(topic, sub, txn, action)
