"""The coordinators this broker runs, and the :class:`TxnRegistry` topics ask before a transactional SEND/ACK.

A standalone broker owns every coordinator: ``transactionCoordinatorCount`` of them, the partitions of the
system topic ``pulsar/system/transaction_coordinator_assign`` (partition *i* is TC *i*), created at start.
Each TC replays its log at start; a background task aborts transactions past their deadline. A command for
a TC id this broker does not run is ``TransactionCoordinatorNotFound``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol

from magnetar.broker.names import TopicName
from magnetar.broker.transactions.api import (
    CoordinatorNotFound,
    InvalidTxnStatus,
    TransactionNotFound,
    TxnAction,
    TxnError,
    TxnId,
    TxnParticipants,
)
from magnetar.broker.transactions.buffered_writer import WriterFactory
from magnetar.broker.transactions.coordinator import EndPolicy, TransactionCoordinator, TxnCounters, TxnMeta
from magnetar.broker.transactions.states import TxnStatus, action_of, check_open
from magnetar.broker.transactions.txn_log import TxnLog, plain_writer
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedgerConfig, ManagedLedgerFactory

log = logging.getLogger("magnetar.txn")

ASSIGN_TOPIC: Final = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign")
LOG_TOPIC_PREFIX: Final = "__transaction_log_"
TIMEOUT_CHECK_INTERVAL_MS_MAX: Final = 1_000.0
TIMEOUT_CHECK_INTERVAL_MS_MIN: Final = 10.0
NAMES_CACHED_MAX: Final = 4096  # normalised topic names remembered


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorSettings:
    count: int = 1  # transactionCoordinatorCount
    default_timeout_ms: int = 180_000  # transactionTimeoutMillis: when NEW_TXN carries no txn_ttl
    max_timeout_ms: int = 0  # transactionTimeoutMaxMillis: a larger txn_ttl is lowered to it; 0 = no cap
    max_active: int = 0  # maxActiveTransactionsPerCoordinator, 0 = no limit
    end_policy: EndPolicy = field(default_factory=EndPolicy)


@functools.lru_cache(maxsize=NAMES_CACHED_MAX)
def normalised(topic: str) -> str:
    """A topic name as the broker keys it (the same few names come in every transaction: parsed once)."""
    return str(TopicName.parse(topic))


def is_coordinator_log(topic: TopicName) -> bool:
    """The TC logs are owned by their coordinator, never loaded as ordinary topics."""
    return str(topic.namespace_name) == "pulsar/system" and topic.local_name.startswith(LOG_TOPIC_PREFIX)


class StoredSwitch(Protocol):
    """PIP-160's batching switch, whose stored setting wins over the configuration."""

    async def load(self) -> None: ...


class PartitionCount(Protocol):
    @property
    def partitions(self) -> int: ...


class AssignTopicHost(Protocol):
    """Partitioned topics (the topic catalog)."""

    async def partitioned_metadata(self, topic: TopicName) -> PartitionCount: ...

    async def create_partitioned_topic(self, topic: TopicName, partitions: int) -> bool: ...

    async def update_partitions(self, topic: TopicName, partitions: int) -> int | None: ...


async def _assign_topic(catalog: AssignTopicHost, count: int) -> int:
    """Create or grow the assign topic to ``count`` partitions; returns how many coordinators to run. A
    topic with more partitions than configured keeps them (coordinators cannot shrink: each has a log)."""
    existing = (await catalog.partitioned_metadata(ASSIGN_TOPIC)).partitions
    if existing == 0:
        await catalog.create_partitioned_topic(ASSIGN_TOPIC, count)
    elif existing < count:
        await catalog.update_partitions(ASSIGN_TOPIC, count)
    elif existing > count:
        log.warning("transactionCoordinatorCount=%d but %s has %d partitions: running %d coordinators "
                    "(a coordinator's log is never abandoned)", count, ASSIGN_TOPIC, existing, existing)
    return max(count, existing)


class TransactionCoordinatorService:
    """Implements :class:`TxnRegistry` over every coordinator of this broker."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        ledgers: ManagedLedgerFactory,
        participants: TxnParticipants,
        clock: Clock,
        *,
        ledger_config: ManagedLedgerConfig | None = None,
        new_writer: WriterFactory = plain_writer,
    ) -> None:
        self.settings = settings
        self._ledgers = ledgers
        self._participants = participants
        self._clock = clock
        self._ledger_config = ledger_config
        self._new_writer = new_writer
        self.coordinators: dict[int, TransactionCoordinator] = {}
        self._timeouts: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._wake_at_ms = 0.0

    async def start(self, catalog: AssignTopicHost | None = None, *, log_batching: StoredSwitch | None = None,
                    timeout_loop: bool = True) -> None:
        """Apply the stored batching switch (``log_batching``), create the assign topic (when given the
        catalog), open and replay every TC log, start the timeout task (``timeout_loop=False``: the caller
        runs ``check_timeouts``, as the simulator does)."""
        count = self.settings.count
        if log_batching is not None:
            await log_batching.load()  # PIP-160's stored switch wins over broker.conf
        if catalog is not None:
            count = await _assign_topic(catalog, count)
        for tc_id in range(count):
            txn_log = await TxnLog.open(self._ledgers, tc_id, self._ledger_config, self._new_writer)
            tc = TransactionCoordinator(
                tc_id, txn_log, self._participants, self._clock, max_active=self.settings.max_active,
                end_policy=self.settings.end_policy,
            )
            self.coordinators[tc_id] = tc
            await tc.recover()
        if timeout_loop:
            self._timeouts = asyncio.create_task(self._timeout_loop(), name="magnetar-txn-timeouts")

    def coordinator(self, tc_id: int) -> TransactionCoordinator:
        tc = self.coordinators.get(tc_id)
        if tc is None:
            raise CoordinatorNotFound(f"Transaction coordinator {tc_id} is not served by this broker")
        return tc

    # ---- the client commands --------------------------------------------------------------------------

    def connect(self, tc_id: int) -> None:
        """TC_CLIENT_CONNECT: succeeds once the coordinator is ready."""
        self.coordinator(tc_id)._ready()

    async def new_txn(self, tc_id: int, ttl_ms: int, owner: str | None = None) -> TxnId:
        timeout_ms = ttl_ms if ttl_ms > 0 else self.settings.default_timeout_ms
        if self.settings.max_timeout_ms > 0:
            timeout_ms = min(timeout_ms, self.settings.max_timeout_ms)
        txn = await self.coordinator(tc_id).new_txn(timeout_ms, owner)
        if self._clock.now_ms() + timeout_ms < self._wake_at_ms:
            self._wake.set()  # the timeout loop sleeps past this deadline: wake it earlier
        return txn

    async def add_partitions(self, txn: TxnId, partitions: Iterable[str]) -> None:
        names = [normalised(p) for p in partitions]
        await self.coordinator(txn.most).add_partitions(txn, names)

    async def add_subscriptions(self, txn: TxnId, subscriptions: Iterable[tuple[str, str]]) -> None:
        subs = [(normalised(t), s) for t, s in subscriptions]
        for _, sub in subs:
            if not sub:
                raise TxnError("A subscription name is required")
        await self.coordinator(txn.most).add_subscriptions(txn, subs)

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        await self.coordinator(txn.most).end_txn(txn, action)

    # ---- TxnRegistry ------------------------------------------------------------------------------------

    def _open_meta(self, txn: TxnId) -> TxnMeta:
        tc = self.coordinators.get(txn.most)
        if tc is None:
            raise TransactionNotFound(f"The transaction {txn} is not found: no coordinator {txn.most} here")
        meta = tc.get(txn)
        check_open(txn, meta.status)
        return meta

    def check_produce(self, txn: TxnId, topic: str) -> None:
        meta = self._open_meta(txn)
        if topic not in meta.partitions:
            raise TxnError(f"Partition {topic} was not added to transaction {txn} (ADD_PARTITION_TO_TXN first)")

    def check_ack(self, txn: TxnId, topic: str, subscription: str) -> None:
        meta = self._open_meta(txn)
        if (topic, subscription) not in meta.subscriptions:
            raise TxnError(
                f"Subscription {subscription} on {topic} was not added to transaction {txn} "
                "(ADD_SUBSCRIPTION_TO_TXN first)"
            )

    def is_open(self, txn: TxnId) -> bool:
        """Whether ``txn`` is still OPEN on its coordinator here (False once ending, ended or unknown)."""
        tc = self.coordinators.get(txn.most)
        meta = tc.txns.get(txn) if tc is not None else None
        return meta is not None and meta.status is TxnStatus.OPEN

    def owner_of(self, txn: TxnId) -> str | None:
        return self.coordinator(txn.most).get(txn).owner

    def check_decided(self, txn: TxnId, action: TxnAction) -> None:
        tc = self.coordinators.get(txn.most)
        if tc is None:
            raise TransactionNotFound(f"The transaction {txn} is not found: no coordinator {txn.most} here")
        status = tc.get(txn).status
        if not status.ending:
            raise InvalidTxnStatus(f"Transaction {txn} is {status.name}: only its coordinator ends it")
        if action_of(status) is not action:
            raise InvalidTxnStatus(f"Transaction {txn} is {status.name}, not to be ended by {action.name}")

    # ---- timeouts, stats, lifecycle ------------------------------------------------------------------------

    async def check_timeouts(self) -> int:
        """Abort what is past its deadline on every coordinator now (the loop calls this; so do tests)."""
        counts = await asyncio.gather(*(tc.check_timeouts() for tc in self.coordinators.values()))
        return sum(counts)

    async def _timeout_loop(self) -> None:
        while True:  # ends when cancelled by close
            now = self._clock.now_ms()
            deadlines = [d for tc in self.coordinators.values() if (d := tc.next_deadline_ms()) is not None]
            wait_ms = TIMEOUT_CHECK_INTERVAL_MS_MAX
            if deadlines:
                wait_ms = min(wait_ms, max(min(deadlines) - now, TIMEOUT_CHECK_INTERVAL_MS_MIN))
            self._wake.clear()
            self._wake_at_ms = now + wait_ms
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
            try:
                await self.check_timeouts()
            except Exception:
                log.exception("transaction timeout check failed")

    def totals(self) -> tuple[TxnCounters, int, int]:
        """Counters summed over the coordinators, active transactions, log records appended."""
        total = TxnCounters()
        active = appended = 0
        for tc in self.coordinators.values():
            total.created += tc.counters.created
            total.committed += tc.counters.committed
            total.aborted += tc.counters.aborted
            total.timed_out += tc.counters.timed_out
            active += len(tc.txns)
            appended += tc.log.appended
        return total, active, appended

    async def close(self) -> None:
        if self._timeouts is not None:
            self._timeouts.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timeouts
        for tc in self.coordinators.values():
            await tc.close()
