"""The exactly-once sink: every task writes inside one broker transaction, the driver commits them.

    task:    (streaming) abort the recorded txns other writers left that no intent names (a killed run's)
             open txn -> record it under the checkpoint -> send rows with txn -> wait for every receipt
             -> TxnCommit(txn id, deadline)
    driver:  commit(messages, batchId)
               intent for batchId recorded and done?  -> abort the new txns (a replay)
               intent recorded, not done?              -> commit the recorded txns (roll forward), abort the new
               no intent                               -> record {batchId, txns}, commit every txn, mark it done
               then abort every recorded txn no intent names (failed or killed attempts), forget the others
             abort(messages, batchId): abort the given txns except ones a recorded intent holds, then the same
             sweep as commit.

Why the records: an open transaction that wrote to a topic holds the topic's read position (the broker's max
read position stops before its first entry), so every message committed after it stays invisible until it
ends. A driver killed before its intent, or a task killed mid-batch, leaves such a transaction. Its record lets
the first task of the restarted query, or the commit of the batch whose task was retried, abort it at once
rather than when ``txnTimeoutMs`` passes. A transaction opened and killed before its record holds nothing: it
has no send yet.

Who may abort what: nobody commits a recorded txn that no intent names, so aborting one is safe unless its task
may still report it. A task reaps only other writers' records: Spark ships one writer object to every task of
a micro-batch (its id differs between batches and between runs of the query) and the micro-batches of a query
never overlap, so no other writer has a live task. The commit's sweep runs once the batch's own txns are named.

Committing a transaction twice: the coordinator forgets a finished transaction, so a repeated COMMIT answers
``TransactionNotFound``. Only transactions named in this sink's intent are ever committed, and nobody aborts
them but their timeout; so before the deadline the task reported, "not found" means an earlier attempt
committed it. After the deadline the broker can no longer tell a commit from a timeout, and the sink fails
with an error that says so rather than guess (``txnTimeoutMs`` must outlast a driver restart).

Files live under ``{checkpointLocation}/magnetar-sink/{sinkId}/`` (``sink_state``; a local or mounted path that
every executor sees). Batch writes (no checkpoint) commit all txns in ``commit`` and abort them in ``abort``;
their tasks' txns are not recorded. Knows Spark's commit-message and task-context classes and
``magnetar.client``; the broker's transactions do the isolation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from magnetar.client import Client, Transaction
from magnetar.client.errors import InvalidTxnStatus, PulsarClientError, TransactionNotFound
from magnetar.spark import runtime, test_hooks
from magnetar.spark.options import OptionError, SinkOptions
from magnetar.spark.sender import write_batches  # the at-least-once path, given a txn
from magnetar.spark.sink_state import OpenRecord, SinkFiles, TxnRef

__all__ = ["ExactlyOnceError", "TxnCommit", "TxnSlot", "abort_txns", "commit_batch", "commit_stream", "orphans",
           "prepare_stream", "write_in_txn"]

log = logging.getLogger(__name__)


class ExactlyOnceError(RuntimeError):
    """The sink cannot prove a batch's output is visible exactly once; the message says what to do."""


@dataclass
class TxnCommit(WriterCommitMessage):
    """What a task reports: its rows, its transaction and when the broker will reap it (epoch ms)."""

    rows: int
    txn_most: int  # -1: the task had no rows and opened no transaction
    txn_least: int
    deadline_ms: int

    @property
    def ref(self) -> TxnRef:
        return (self.txn_most, self.txn_least, self.deadline_ms)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _files(opts: SinkOptions) -> SinkFiles:
    if opts.checkpoint_location is None:
        raise OptionError("the exactly-once sink needs option checkpointLocation")
    return SinkFiles(opts.checkpoint_location, opts.sink_id)


def _task_identity() -> tuple[int | None, int | None, int | None]:
    """(batchId, partition, attempt) of the running Spark task, for the record; Nones outside a task."""
    ctx = TaskContext.get()
    if ctx is None:
        return None, None, None
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return (int(batch) if batch is not None and batch.isdigit() else None), ctx.partitionId(), ctx.attemptNumber()


class TxnSlot:
    """The task's transaction, opened on its first row (after the producer exists, so slow producer creation
    does not eat the timeout; an empty task opens none) and recorded before the first send when ``files``."""

    def __init__(self, opts: SinkOptions, files: SinkFiles | None = None, writer: str = "") -> None:
        self._opts = opts
        self._files = files
        self._writer = writer
        self.txn: Transaction | None = None
        self.deadline_ms = 0

    async def get(self) -> Transaction:
        if self.txn is None:
            client = runtime.client_for(self._opts.service_url, self._opts.client_options)
            deadline_ms = _now_ms() + self._opts.txn_timeout_ms
            txn = await client.new_transaction(self._opts.txn_timeout_ms)
            if self._files is not None:
                record = OpenRecord(txn.txn_id, deadline_ms, self._writer, *_task_identity())
                try:
                    await asyncio.to_thread(self._files.record_open, record)
                except BaseException:
                    with contextlib.suppress(PulsarClientError):  # no send yet: it holds nothing either way
                        await txn.abort()
                    raise
            self.txn, self.deadline_ms = txn, deadline_ms
            await asyncio.to_thread(test_hooks.reached, "txn_opened")
        return self.txn


def write_in_txn(opts: SinkOptions, batches: Iterator[pa.RecordBatch], writer: str | None = None) -> TxnCommit:
    """Executor side: send every row inside a new transaction; abort it if the task fails. A streaming write
    (``writer`` given) first aborts what other writers left open, then records its own txn."""
    files = _files(opts) if writer is not None else None
    if files is not None:
        runtime.run(_reap(opts, files, orphans(files.open_records(), files.named(), writer=writer)))
    slot = TxnSlot(opts, files, writer or "")
    try:
        rows = write_batches(opts, batches, txn=slot).rows
    except BaseException:
        if slot.txn is not None:
            try:
                runtime.run(slot.txn.abort(), 60.0)
            except Exception as exc:  # the next reap or the timeout ends it
                log.warning("could not abort %s after a failed task: %s", slot.txn, exc)
            else:
                if files is not None:
                    files.forget(slot.txn.txn_id)
        raise
    test_hooks.reached("task_written")
    if slot.txn is None:
        return TxnCommit(rows, -1, -1, 0)
    return TxnCommit(rows, slot.txn.txn_id[0], slot.txn.txn_id[1], slot.deadline_ms)


def _refs(messages: Iterable[WriterCommitMessage | None]) -> list[TxnRef]:
    return [m.ref for m in messages if isinstance(m, TxnCommit) and m.txn_most >= 0]


def orphans(records: Iterable[OpenRecord], named: set[tuple[int, int]], *, writer: str | None) -> list[OpenRecord]:
    """The recorded txns nobody will commit: named by no intent and, for a task's reap (``writer`` given),
    opened by another writer (an earlier batch's or run's; the commit's sweep passes None: all of them)."""
    return [r for r in records if r.txn not in named and (writer is None or r.writer != writer)]


# ---- ending transactions ------------------------------------------------------------------------------


async def _commit_one(client: Client, ref: TxnRef, timeout_ms: int, batch_id: int | None) -> None:
    txn = await client.transaction_of((ref[0], ref[1]), timeout_ms)
    try:
        await txn.commit()
    except TransactionNotFound as exc:
        if batch_id is not None and _now_ms() < ref[2]:
            return  # ours, recorded, before its deadline: an earlier attempt committed it
        if batch_id is None:
            raise ExactlyOnceError(f"transaction {ref[0]},{ref[1]} timed out before the job ended: raise "
                                   f"txnTimeoutMs above the job's duration") from exc
        raise ExactlyOnceError(
            f"transaction {ref[0]},{ref[1]} of batch {batch_id} is no longer known to the broker and its timeout has "
            "passed: it was committed by an earlier attempt or aborted by the timeout, and the broker cannot say "
            "which. Raise txnTimeoutMs above the time a restart takes.") from exc
    except InvalidTxnStatus as exc:
        raise ExactlyOnceError(f"transaction {ref[0]},{ref[1]} could not commit (its timeout, txnTimeoutMs, "
                               f"may have passed before the driver committed it): {exc}") from exc


async def _abort_one(client: Client, txn_id: tuple[int, int], timeout_ms: int) -> bool:
    """Abort ``txn_id``; True once it has ended (aborted now, or already ended: unknown or not open)."""
    txn = await client.transaction_of(txn_id, timeout_ms)
    try:
        await txn.abort()
    except (TransactionNotFound, InvalidTxnStatus) as exc:
        log.info("abort of transaction %s,%s: already ended (%s)", txn_id[0], txn_id[1], exc)
    except PulsarClientError as exc:  # unreachable: the next reap, or the timeout, ends it
        log.warning("abort of transaction %s,%s failed: %s", txn_id[0], txn_id[1], exc)
        return False
    return True


async def _end_all(opts: SinkOptions, commit: list[TxnRef], abort: list[TxnRef], batch_id: int | None) -> None:
    client = runtime.client_for(opts.service_url, opts.client_options)
    for ref in commit:
        await _commit_one(client, ref, opts.txn_timeout_ms, batch_id)
    for ref in abort:
        await _abort_one(client, (ref[0], ref[1]), opts.txn_timeout_ms)


async def _reap(opts: SinkOptions, files: SinkFiles, found: list[OpenRecord]) -> None:
    """Abort each orphan and forget its record once it has ended."""
    client = runtime.client_for(opts.service_url, opts.client_options)
    for record in found:
        if await _abort_one(client, record.txn, opts.txn_timeout_ms):
            log.info("aborted transaction %s,%s left open by writer %s (batch %s, partition %s, attempt %s)",
                     record.txn[0], record.txn[1], record.writer, record.batch_id, record.partition, record.attempt)
            await asyncio.to_thread(files.forget, record.txn)


def _sweep(opts: SinkOptions, files: SinkFiles, done: set[tuple[int, int]]) -> None:
    """Driver side, after a commit or abort: forget the records of ``done`` (committed) txns, abort the orphans."""
    records = files.open_records()
    for record in records:
        if record.txn in done:
            files.forget(record.txn)
    runtime.run(_reap(opts, files, orphans(records, files.named(), writer=None)))
    files.clear_temp()


def prepare_stream(opts: SinkOptions) -> None:
    """Driver side, when Spark asks for the streaming writer: the directories its tasks record into."""
    _files(opts).prepare()


def commit_batch(opts: SinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    """A batch job succeeded: make every task's output visible."""
    runtime.run(_end_all(opts, _refs(messages), [], None))


def abort_txns(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    """Abort what the failed tasks report, except txns a recorded intent of ``batch_id`` holds; a streaming
    batch also aborts what its killed tasks recorded."""
    refs = _refs(messages)
    files = _files(opts) if batch_id is not None and opts.checkpoint_location is not None else None
    if files is not None:
        recorded = files.load_intent(batch_id) if batch_id is not None else None
        if recorded is not None:
            keep = {(r[0], r[1]) for r in recorded[0]}
            refs = [r for r in refs if (r[0], r[1]) not in keep]
    runtime.run(_end_all(opts, [], refs, None))
    if files is not None:
        _sweep(opts, files, set())


def commit_stream(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
    """The micro-batch's commit: record the intent, commit its txns; a replay rolls the recorded ones forward."""
    files = _files(opts)
    new = _refs(messages)
    test_hooks.reached("commit_start")
    recorded = files.load_intent(batch_id)
    if recorded is not None:
        txns, done = recorded
        known = {(r[0], r[1]) for r in txns}
        replayed = [r for r in new if (r[0], r[1]) not in known]
        log.info("batch %d replayed: rolling %d recorded txns forward, aborting %d new ones", batch_id,
                 0 if done else len(txns), len(replayed))
        runtime.run(_end_all(opts, [] if done else txns, replayed, batch_id))
    else:
        txns = new
        files.save_intent(batch_id, txns, done=False)
        test_hooks.reached("intent_written")
        runtime.run(_end_all(opts, txns, [], batch_id))
    files.save_intent(batch_id, txns, done=True)
    files.prune_intents(batch_id)
    _sweep(opts, files, {(r[0], r[1]) for r in txns})
    test_hooks.reached("committed")
