"""Transactions: finding the coordinators, and the ``Transaction`` producers and consumers take part in.

``Coordinators`` discovers the partitions of ``pulsar/system/transaction_coordinator_assign`` (partition *i*
is coordinator *i*), connects to each owner with TC_CLIENT_CONNECT_REQUEST, and sends NEW_TXN round-robin.
The connection to each coordinator's broker is kept (as the Java client's TransactionMetaStoreHandler
does): a request looks the coordinator up again only when that connection closed or the broker said the
coordinator is not there (it moved), never once per request.
A ``Transaction`` registers each partition (ADD_PARTITION_TO_TXN) before its first send there and each
subscription (ADD_SUBSCRIPTION_TO_TXN) before its first ack, once each; ``commit`` waits for the sends and
acks under way, then sends END_TXN. Used as ``async with``: commit on a clean exit, abort on an exception.

Requests that may not have reached the coordinator (a lost connection, a coordinator not loaded yet) are
retried within the operation timeout; the coordinator's answers about the transaction itself are not.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from magnetar.client._connection import Connection
from magnetar.client._context import ClientContext
from magnetar.client._lookup import partition_count
from magnetar.client._messages import partition_name
from magnetar.client.errors import (
    ConnectError,
    ConnectionClosed,
    InvalidTxnStatus,
    OperationTimeout,
    PulsarClientError,
    ServiceNotReady,
    TransactionCoordinatorNotFound,
)
from magnetar.core.lifecycle import IllegalTransition, Lifecycle, Transitions
from magnetar.protocol import pb, txn_commands

__all__ = ["ASSIGN_TOPIC", "Coordinators", "Transaction", "TransactionState"]

ASSIGN_TOPIC: Final = "persistent://pulsar/system/transaction_coordinator_assign"
COMMIT: Final = 0
ABORT: Final = 1
OPS_COMPACT_MIN: Final = 1024  # tracked operations before the first pass that drops settled ones
_TRANSIENT: Final = (ConnectionClosed, ConnectError, TransactionCoordinatorNotFound, ServiceNotReady)
R = TypeVar("R")


class Coordinators:
    """The client's view of the transaction coordinators (discovered on first use)."""

    def __init__(self, ctx: ClientContext) -> None:
        self._ctx = ctx
        self._count = 0
        self._round_robin = itertools.count()
        self._discovery: asyncio.Lock = asyncio.Lock()
        self._conns: dict[int, Connection] = {}  # tc id -> the connection to its broker, while it is ready

    async def discover(self) -> int:
        """The number of coordinators; raises TransactionCoordinatorNotFound when the broker runs none."""
        async with self._discovery:
            if self._count == 0:
                count = await partition_count(self._ctx.pool, self._ctx.config.service_url, ASSIGN_TOPIC)
                if count == 0:
                    raise TransactionCoordinatorNotFound("the broker runs no transaction coordinator")
                for tc_id in range(count):
                    await self._connect(tc_id)
                self._count = count
        return self._count

    async def available(self) -> bool:
        """Whether coordinator 0 answers TC_CLIENT_CONNECT (one try: a broker without transactions says no)."""
        if self._count:
            return True
        if await partition_count(self._ctx.pool, self._ctx.config.service_url, ASSIGN_TOPIC) == 0:
            return False
        try:
            conn = await self.connection(0)
            await conn.request(lambda rid: txn_commands.tc_client_connect(rid, 0))
        except (TransactionCoordinatorNotFound, ServiceNotReady):
            return False
        return True

    async def connection(self, tc_id: int) -> Connection:
        conn = self._conns.get(tc_id)
        if conn is not None and conn.is_ready:
            return conn
        conn = await self._ctx.connection_for(partition_name(ASSIGN_TOPIC, tc_id))
        self._conns[tc_id] = conn
        return conn

    async def _connect(self, tc_id: int) -> None:
        await self.request(tc_id, lambda rid: txn_commands.tc_client_connect(rid, tc_id))

    async def request(self, tc_id: int, build: Callable[[int], pb.BaseCommand]) -> pb.BaseCommand:
        """Send to coordinator ``tc_id``'s broker, retrying what may not have reached it."""

        async def attempt() -> pb.BaseCommand:
            conn = await self.connection(tc_id)
            try:
                return await conn.request(build)
            except _TRANSIENT:
                if self._conns.get(tc_id) is conn:
                    del self._conns[tc_id]  # look it up again: the coordinator may have moved
                raise

        return await _retry_transient(self._ctx, attempt, f"transaction coordinator {tc_id}")

    async def new_transaction(self, timeout_ms: int) -> Transaction:
        if timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive")
        count = await self.discover()
        tc_id = next(self._round_robin) % count
        reply = await self.request(tc_id, lambda rid: txn_commands.new_txn(rid, tc_id, timeout_ms))
        r = reply.newTxnResponse
        return Transaction(self, (r.txnid_most_bits, r.txnid_least_bits), timeout_ms)


async def _retry_transient(ctx: ClientContext, attempt: Callable[[], Awaitable[R]], what: str) -> R:
    deadline_ms = ctx.clock.monotonic_ms() + ctx.config.operation_timeout_ms
    backoff = ctx.backoff()
    while True:  # bounded by the deadline
        try:
            return await attempt()
        except _TRANSIENT as exc:
            delay_ms = backoff.next_ms()
            if ctx.clock.monotonic_ms() + delay_ms > deadline_ms:
                raise OperationTimeout(f"{what}: gave up after {ctx.config.operation_timeout_ms} ms: {exc}") from exc
            await asyncio.sleep(delay_ms / 1000)


def _retrieved(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class TransactionState(enum.Enum):
    OPEN = "open"
    COMMITTING = "committing"
    ABORTING = "aborting"
    COMMITTED = "committed"
    ABORTED = "aborted"
    ERROR = "error"  # the end failed in a way that leaves the outcome to the coordinator (e.g. its timeout)


_S = TransactionState
_EDGES: Final = Transitions(TransactionState, {
    _S.OPEN: frozenset({_S.COMMITTING, _S.ABORTING}),
    _S.COMMITTING: frozenset({_S.COMMITTED, _S.ABORTING, _S.ERROR}),
    _S.ABORTING: frozenset({_S.ABORTED, _S.ERROR}),
    _S.ERROR: frozenset({_S.ABORTING}),
    _S.COMMITTED: frozenset(),
    _S.ABORTED: frozenset(),
})


class Transaction:
    """Create with ``client.new_transaction()`` or ``async with client.transaction() as txn``."""

    def __init__(self, coordinators: Coordinators, txn_id: tuple[int, int], timeout_ms: int) -> None:
        self._coordinators = coordinators
        self.txn_id = txn_id  # (most, least)
        self.timeout_ms = timeout_ms
        self._life = Lifecycle(_S.OPEN, _EDGES)
        self._partitions: dict[str, asyncio.Future[None]] = {}
        self._subscriptions: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._ops: list[asyncio.Future[Any]] = []  # sends and acks of ours, settled ones dropped now and then
        self._ops_compact_at = OPS_COMPACT_MIN
        self._flushers: set[Callable[[], None]] = set()  # producers' batch flushes holding messages of ours
        self._failed: BaseException | None = None

    def __repr__(self) -> str:
        return f"Transaction({self.txn_id[0]},{self.txn_id[1]}, {self._life.state.value})"

    @property
    def state(self) -> TransactionState:
        return self._life.state

    @property
    def tc_id(self) -> int:
        return self.txn_id[0]

    def check_open(self) -> None:
        if self._life.state is not _S.OPEN:
            raise InvalidTxnStatus(f"transaction {self.txn_id} is {self._life.state.value}, not open")

    # ---- registration (once per partition / subscription; concurrent callers share the request) ------------

    async def register_partition(self, topic: str) -> None:
        self.check_open()
        await self._once(self._partitions, topic,
                         lambda rid: txn_commands.add_partition_to_txn(rid, self.txn_id, [topic]))

    async def register_subscription(self, topic: str, subscription: str) -> None:
        self.check_open()
        key = (topic, subscription)
        await self._once(self._subscriptions, key,
                         lambda rid: txn_commands.add_subscription_to_txn(rid, self.txn_id, [key]))

    async def _once(self, registry: dict[Any, asyncio.Future[None]], key: Any,
                    build: Callable[[int], pb.BaseCommand]) -> None:
        fut = registry.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._coordinators.request(self.tc_id, build))  # type: ignore[arg-type]
            fut.add_done_callback(_retrieved)  # every caller may have been cancelled meanwhile
            registry[key] = fut
        try:
            await asyncio.shield(fut)
        except PulsarClientError:
            if registry.get(key) is fut:
                del registry[key]  # a later call may try again
            raise

    def track(self, op: asyncio.Future[Any]) -> None:
        """A send or ack of this transaction: commit waits for it; a failure makes commit abort. Kept in a
        list, not watched with a done callback: a callback per message was the exactly-once Spark sink's
        largest cost over at-least-once (a callback added, scheduled and run per row). Settled operations are
        dropped whenever the list has doubled since the last pass (amortised O(1) per operation, memory bounded
        by twice what is unsettled)."""
        self._ops.append(op)
        if len(self._ops) >= self._ops_compact_at:
            self._drop_settled()

    def flush_before_end(self, flush: Callable[[], None]) -> None:
        """A producer batches messages of this transaction: ``flush`` sends its open batch at commit/abort."""
        self._flushers.add(flush)

    def _flush_batches(self) -> None:
        flushers, self._flushers = self._flushers, set()
        for flush in flushers:
            flush()

    def _drop_settled(self) -> None:
        live = []
        for op in self._ops:
            if op.done():
                self._note(op)
            else:
                live.append(op)
        self._ops = live
        self._ops_compact_at = max(OPS_COMPACT_MIN, 2 * len(live))

    def _note(self, op: asyncio.Future[Any]) -> None:
        """A settled operation: the first failure is the transaction's (retrieving it also keeps asyncio from
        reporting it as never retrieved)."""
        if not op.cancelled() and op.exception() is not None and self._failed is None:
            self._failed = op.exception()

    async def _settle_ops(self) -> None:
        """Wait for every operation under way and note how each ended."""
        ops, self._ops = self._ops, []
        self._ops_compact_at = OPS_COMPACT_MIN
        if ops:
            await asyncio.wait(ops)
        for op in ops:
            self._note(op)

    # ---- ending --------------------------------------------------------------------------------------------

    async def commit(self) -> None:
        """Commit once every send and ack under way is confirmed; if one failed, abort and raise it."""
        self._ending(_S.COMMITTING)
        self._flush_batches()
        await self._settle_ops()
        if self._failed is not None:
            await self.abort()
            raise InvalidTxnStatus(f"transaction {self.txn_id} aborted: an operation in it failed: "
                                   f"{self._failed!r}") from self._failed
        await self._end(COMMIT, _S.COMMITTED)

    async def abort(self) -> None:
        if self._life.state is _S.ABORTED:
            return
        self._ending(_S.ABORTING)
        self._flush_batches()
        await self._settle_ops()
        await self._end(ABORT, _S.ABORTED)

    def _ending(self, state: TransactionState) -> None:
        """Start committing or aborting; a transaction already ended (or ending) answers InvalidTxnStatus, as the
        official client does, not the state machine's AssertionError."""
        try:
            self._life.transition_to(state)
        except IllegalTransition:
            raise InvalidTxnStatus(f"transaction {self.txn_id} is {self._life.state.value}: it cannot be "
                                   f"{'committed' if state is _S.COMMITTING else 'aborted'}") from None

    async def _end(self, action: int, final: TransactionState) -> None:
        try:
            await self._coordinators.request(self.tc_id, lambda rid: txn_commands.end_txn(rid, self.txn_id, action))
        except PulsarClientError:
            self._life.transition_to(_S.ERROR)  # the coordinator decides (it finishes an end under way)
            raise
        self._life.transition_to(final)

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            await self.commit()
        elif self._life.state in (_S.OPEN, _S.ERROR):
            await self.abort()


class TransactionScope:
    """What ``client.transaction(...)`` returns: ``async with`` opens the transaction, then ends it."""

    def __init__(self, open_txn: Callable[[], Awaitable[Transaction]]) -> None:
        self._open = open_txn
        self._txn: Transaction | None = None

    async def __aenter__(self) -> Transaction:
        self._txn = await self._open()
        return self._txn

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        assert self._txn is not None
        await self._txn.__aexit__(exc_type, exc, tb)
