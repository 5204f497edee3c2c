"""PIP-160's buffered writer: many transaction-log or pending-ack records per storage entry.

One writer serves one log (a coordinator's or a subscription's pending-ack store). ``write(record)`` returns
a future resolved, once the entry holding the record is durable, with its :class:`RecordPosition`
``(ledger_id, entry_id, batch_size, batch_index)``; futures resolve in write order.

Batching only pays when records queue behind a write, so the writer behaves like the storage's group
commit, with PIP-160's limits on top:

- a record that finds the log idle (nothing buffered, no append in flight) is appended at once, as a plain
  entry: a lone transaction never waits for a timer;
- otherwise it joins the batch being filled while the previous append is written (flushes are pipelined);
  the batch is appended once that append completed and nothing else is in flight (``IDLE``: on the next
  loop pass, so what the callers just answered write at once joins it), or when
  ``max_records`` records or ``max_bytes`` bytes are buffered, or when its oldest record has waited
  ``max_delay_ms`` (a timer armed once per batch, when its first record arrives), whichever comes first;
- a record that alone reaches ``max_bytes``: what is buffered is flushed first, then that record is written
  alone as a plain (unbatched) entry, keeping write order.

Disabled (or ``max_records <= 1``), every record is its own plain entry, as before PIP-160. The settings can
change while the writer runs (:meth:`reconfigure`, PIP-160's dynamic switch): they apply from the next
write, and turning batching off first flushes what is buffered, so write order holds across the switch. A
failed append fails every caller of that entry exactly once; the managed ledger refuses later appends until
the writer has seen every append in flight settle and resumes it. This module knows the ledger's append,
never what a record means (the coordinator and the pending-ack store own that).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.broker.buckets import Buckets
from magnetar.ledger.api import Position
from magnetar.protocol.txn_log_batch import LogKind, encode_batch

KIB = 1024

# Pulsar's histogram buckets (PIP-160 metrics)
BATCH_RECORDS_BUCKETS = tuple((float(b), str(b)) for b in (10, 50, 100, 200, 500, 1000))
BATCH_BYTES_BUCKETS = tuple((float(b), str(b)) for b in (128, 512, 1024, 2048, 4096, 16384, 102400, 1232896))
OLDEST_DELAY_S_BUCKETS = ((0.001, "0.001"), (0.005, "0.005"), (0.01, "0.01"))


class WriterError(Exception):
    """A record the writer could not make durable (closed writer, failed append)."""


class WriterClosed(WriterError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchingConfig:
    """One log's batching settings (Pulsar's ``transactionLogBatchedWrite*`` keys and their
    ``transactionPendingAckBatchedWrite*`` twins)."""

    enabled: bool = False
    max_records: int = 512
    max_bytes: int = 4 * KIB * KIB
    max_delay_ms: int = 1

    @property
    def batching(self) -> bool:
        return self.enabled and self.max_records > 1

    def problems(self, prefix: str) -> list[str]:
        """What is wrong with these settings when enabled, each naming the key (empty when valid)."""
        if not self.enabled:
            return []
        rules = (
            ("MaxRecords", self.max_records, 10, ""),
            ("MaxSize", self.max_bytes, 128 * KIB, " bytes"),
            ("MaxDelayInMillis", self.max_delay_ms, 1, " ms"),
        )
        return [
            f"{prefix}{key} must be at least {least}{unit} when batching is enabled, got {value}"
            for key, value, least, unit in rules
            if value < least
        ]


@dataclass(frozen=True, slots=True, order=True)
class RecordPosition:
    """Where a record lives: its entry, and its index among ``batch_size`` records (1 and 0 when plain)."""

    ledger_id: int
    entry_id: int
    batch_size: int
    batch_index: int

    @property
    def entry(self) -> Position:
        return Position(self.ledger_id, self.entry_id)

    @property
    def batched(self) -> bool:
        return self.batch_size > 1


class FlushTrigger(enum.Enum):
    MAX_RECORDS = "max_records"
    MAX_SIZE = "max_size"
    MAX_DELAY = "max_delay"
    LARGE_DATA = "large_data"
    IDLE = "idle"  # magnetar's own: the append in flight completed with records buffered behind it


@dataclass(slots=True)
class WriterMetrics:
    """Counts one log family shares (all coordinators, or all pending-ack stores); exported at scrape."""

    batch_records: Buckets = field(default_factory=lambda: Buckets(BATCH_RECORDS_BUCKETS))
    batch_size_bytes: Buckets = field(default_factory=lambda: Buckets(BATCH_BYTES_BUCKETS))
    oldest_record_delay_s: Buckets = field(default_factory=lambda: Buckets(OLDEST_DELAY_S_BUCKETS))
    triggers: dict[FlushTrigger, int] = field(default_factory=lambda: dict.fromkeys(FlushTrigger, 0))
    entries_written: int = 0
    records_written: int = 0


SleepMs = Callable[[int], Awaitable[None]]


class LogLedger(Protocol):
    """The part of a managed ledger the writer appends through."""

    def add_entry_future(self, data: bytes | memoryview) -> asyncio.Future[Position]: ...

    def resume_writes(self) -> bool: ...


@dataclass(slots=True)
class _Pending:
    record: bytes
    future: asyncio.Future[RecordPosition]
    queued_at_s: float


class BufferedWriter:
    def __init__(
        self,
        ledger: LogLedger,
        kind: LogKind,
        config: BatchingConfig,
        metrics: WriterMetrics | None = None,
        *,
        now_s: Callable[[], float] | None = None,
        sleep_ms: SleepMs | None = None,
    ) -> None:
        self._ledger = ledger
        self._kind = kind
        self.config = config
        self.metrics = metrics or WriterMetrics()
        self._loop = asyncio.get_running_loop()
        self._now_s = now_s or self._loop.time
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._sleep_ms = sleep_ms  # the delay on an injected clock (simulations); None: the loop's timer
        self._timer: asyncio.TimerHandle | asyncio.Task[None] | None = None
        self._in_flight = 0
        self._idle_flush_due = False  # the batch filled behind the last append goes on the next loop pass
        self._failed = False  # an append failed: resume the ledger once every append in flight settled
        self._settled = asyncio.Event()
        self._settled.set()
        self.closed = False

    @property
    def pending_records(self) -> int:
        return len(self._pending)

    def reconfigure(self, config: BatchingConfig) -> None:
        """New settings from the next write on (PIP-160's dynamic switch). Turning batching off appends what
        is buffered first, so records keep their write order across the switch."""
        if not config.batching:
            self._flush(None)
        self.config = config
        if self._pending and len(self._pending) >= config.max_records:
            self._flush(FlushTrigger.MAX_RECORDS)

    def write(self, record: bytes) -> asyncio.Future[RecordPosition]:
        """Queue ``record``; the future resolves once it is durable, or fails with :class:`WriterError`."""
        future: asyncio.Future[RecordPosition] = self._loop.create_future()
        if self.closed:
            future.set_exception(WriterClosed("the log writer is closed"))
            return future
        config = self.config
        pending = _Pending(record, future, self._now_s())
        if not config.batching or (self._in_flight == 0 and not self._pending and not self._idle_flush_due):
            self._append([pending], batched=False)  # off, or an idle log: nothing to wait for
            return future
        if len(record) >= config.max_bytes:
            self._flush(None)
            self._append([pending], batched=False)
            self.metrics.triggers[FlushTrigger.LARGE_DATA] += 1
            return future
        self._pending.append(pending)
        self._pending_bytes += len(record)
        if len(self._pending) >= config.max_records:
            self._flush(FlushTrigger.MAX_RECORDS)
        elif self._pending_bytes >= config.max_bytes:
            self._flush(FlushTrigger.MAX_SIZE)
        elif self._timer is None:  # the batch's first record: its delay starts now, once per batch
            self._arm_timer(config.max_delay_ms)
        return future

    def _arm_timer(self, delay_ms: int) -> None:
        if self._sleep_ms is None:
            self._timer = self._loop.call_later(delay_ms / 1000, self._on_timer)
            return
        sleep_ms = self._sleep_ms

        async def wait() -> None:
            await sleep_ms(delay_ms)
            if self._timer is asyncio.current_task():
                self._on_timer()

        self._timer = self._loop.create_task(wait())

    def _on_timer(self) -> None:
        self._timer = None
        if self._pending:
            self._flush(FlushTrigger.MAX_DELAY)

    def _flush(self, trigger: FlushTrigger | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        if trigger is not None:
            self.metrics.triggers[trigger] += 1
        self._append(batch, batched=len(batch) > 1)  # a batch of one is written as the plain record it is

    def _append(self, batch: list[_Pending], *, batched: bool) -> None:
        records = [p.record for p in batch]
        data = encode_batch(self._kind, records) if batched else records[0]
        metrics = self.metrics
        metrics.entries_written += 1
        metrics.records_written += len(records)
        if batched:
            metrics.batch_records.record(len(records))
            metrics.batch_size_bytes.record(len(data))
            metrics.oldest_record_delay_s.record(self._now_s() - batch[0].queued_at_s)
        self._in_flight += 1
        self._settled.clear()
        try:
            added = self._ledger.add_entry_future(data)
        except Exception as exc:  # an add refused at once settles like a failed one
            added = self._loop.create_future()
            added.set_exception(exc)
        added.add_done_callback(lambda done: self._complete(done, batch, batched))

    def _complete(self, done: asyncio.Future[Position], batch: list[_Pending], batched: bool) -> None:
        self._in_flight -= 1
        exc = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if exc is not None:
            self._failed = True
            error = WriterError(f"the log append failed: {exc}")
            error.__cause__ = exc
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(error)
        else:
            pos = done.result()
            size = len(batch) if batched else 1
            for index, pending in enumerate(batch):
                if not pending.future.done():
                    pending.future.set_result(RecordPosition(pos.ledger_id, pos.entry_id, size, index))
        if self._in_flight == 0:
            if self._failed and self._ledger.resume_writes():
                self._failed = False
            if self._pending and not self.closed and not self._idle_flush_due:
                # the log went idle with a batch filled behind it: send it on the next loop pass, after the
                # callers just answered have run (what they write next joins it: bigger batches, fewer rounds)
                self._idle_flush_due = True
                self._loop.call_soon(self._flush_idle)
            elif not self._idle_flush_due:
                self._settled.set()

    def _flush_idle(self) -> None:
        self._idle_flush_due = False
        if self._in_flight == 0 and self._pending:
            self._flush(FlushTrigger.IDLE)
        elif self._in_flight == 0:
            self._settled.set()

    async def flush(self) -> None:
        """Write what is pending now and wait until every append in flight has settled."""
        self._flush(None)
        await self._settled.wait()

    async def close(self) -> None:
        """Fail what is still buffered, let what was handed to storage finish, refuse later writes."""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for p in pending:
            if not p.future.done():
                p.future.set_exception(WriterClosed("the log writer closed before this record was written"))
        await self._settled.wait()


class RecordWriter(Protocol):
    """Makes one serialized record durable and tells where it lies (what the coordinator log and the
    pending-ack logs write through; :class:`BufferedWriter` is the implementation)."""

    def write(self, record: bytes) -> asyncio.Future[RecordPosition]: ...

    async def close(self) -> None: ...


WriterFactory = Callable[[LogLedger], RecordWriter]


def plain_writer_for(kind: LogKind) -> WriterFactory:
    """A factory of writers putting one record per entry (batching off) for one kind of log."""

    def new(ledger: LogLedger) -> RecordWriter:
        return BufferedWriter(ledger, kind, BatchingConfig(enabled=False))

    return new
