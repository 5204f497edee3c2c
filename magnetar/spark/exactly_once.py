"""The exactly-once sink: every task writes inside one broker transaction, the driver commits them.

    task:    open txn -> send rows with txn -> wait for every receipt -> TxnCommit(txn id, deadline)
    driver:  commit(messages, batchId)
               intent for batchId recorded and done?  -> abort the new txns (a replay), done
               intent recorded, not done?              -> commit the recorded txns (roll forward), abort the new
               no intent                               -> record {batchId, txns} (temp + fsync + rename),
                                                          commit every txn, mark the intent done
             abort(messages, batchId): abort the given txns, except ones a recorded intent holds (those are
             rolled forward by the replay); txns nobody reports (a task or driver killed) are reaped by the
             broker when ``txnTimeoutMs`` passes.

Committing a transaction twice: the coordinator forgets a finished transaction, so a repeated COMMIT answers
``TransactionNotFound``. Only transactions named in this sink's intent are ever committed, and nobody aborts
them but their timeout; so before the deadline the task reported, "not found" means an earlier attempt
committed it. After the deadline the broker can no longer tell a commit from a timeout, and the sink fails
with an error that says so rather than guess (``txnTimeoutMs`` must outlast a driver restart).

Intents live under ``{checkpointLocation}/magnetar-sink/{sinkId}/`` (a local or mounted path). Batch writes
(no checkpoint) commit all txns in ``commit`` and abort them in ``abort``. Knows Spark's commit-message
class and ``magnetar.client``; the broker's transactions do the isolation.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from magnetar.client import Client, Transaction
from magnetar.client.errors import InvalidTxnStatus, PulsarClientError, TransactionNotFound
from magnetar.spark import runtime, test_hooks
from magnetar.spark.options import OptionError, SinkOptions

__all__ = ["ExactlyOnceError", "IntentStore", "TxnCommit", "TxnSlot", "abort_txns", "commit_batch", "commit_stream",
           "write_in_txn"]

log = logging.getLogger(__name__)
_INTENTS_KEPT: Final = 20  # intents of this many recent batches stay (a replay is at most one batch back)
TxnRef = tuple[int, int, int]  # (most, least, deadline_ms)


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


class TxnSlot:
    """The task's transaction, opened on its first row (after the producer exists, so slow producer creation
    does not eat the timeout; an empty task opens none)."""

    def __init__(self, opts: SinkOptions) -> None:
        self._opts = opts
        self.txn: Transaction | None = None
        self.deadline_ms = 0

    async def get(self) -> Transaction:
        if self.txn is None:
            client = runtime.client_for(self._opts.service_url, self._opts.client_options)
            self.deadline_ms = _now_ms() + self._opts.txn_timeout_ms
            self.txn = await client.new_transaction(self._opts.txn_timeout_ms)
        return self.txn


def write_in_txn(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> TxnCommit:
    """Executor side: send every row inside a new transaction; abort it if the task fails."""
    from magnetar.spark.writer import write_batches  # the at-least-once path, given a txn

    slot = TxnSlot(opts)
    try:
        rows = write_batches(opts, batches, txn=slot).rows
    except BaseException:
        if slot.txn is not None:
            try:
                runtime.run(slot.txn.abort(), 60.0)
            except Exception as exc:  # the timeout reaps it
                log.warning("could not abort %s after a failed task: %s", slot.txn, exc)
        raise
    test_hooks.reached("task_written")
    if slot.txn is None:
        return TxnCommit(rows, -1, -1, 0)
    return TxnCommit(rows, slot.txn.txn_id[0], slot.txn.txn_id[1], slot.deadline_ms)


def _refs(messages: Iterable[WriterCommitMessage | None]) -> list[TxnRef]:
    return [m.ref for m in messages if isinstance(m, TxnCommit) and m.txn_most >= 0]


# ---- intents ------------------------------------------------------------------------------------------


def _local_path(location: str) -> Path:
    if location.startswith("file:"):
        location = location[len("file:"):]
        while location.startswith("//"):
            location = location[1:]
    elif "://" in location:
        raise OptionError(f"the exactly-once sink keeps its intents under checkpointLocation, which must be a "
                          f"local or mounted path here, got {location!r}")
    return Path(location)


class IntentStore:
    """``intent-{batchId}.json`` files, each written whole (temp file, fsync, rename, fsync of the dir)."""

    def __init__(self, checkpoint_location: str, sink_id: str) -> None:
        self.root = _local_path(checkpoint_location) / "magnetar-sink" / sink_id

    def _path(self, batch_id: int) -> Path:
        return self.root / f"intent-{batch_id}.json"

    def load(self, batch_id: int) -> tuple[list[TxnRef], bool] | None:
        """The recorded txns of ``batch_id`` and whether they were all committed, or None."""
        try:
            raw = json.loads(self._path(batch_id).read_text())
        except FileNotFoundError:
            return None
        if raw.get("batchId") != batch_id:
            raise ExactlyOnceError(f"intent file {self._path(batch_id)} names batch {raw.get('batchId')}")
        return [(int(a), int(b), int(c)) for a, b, c in raw["txns"]], bool(raw["done"])

    def save(self, batch_id: int, txns: list[TxnRef], *, done: bool) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self._path(batch_id)
        temp = final.with_suffix(".tmp")
        body = json.dumps({"batchId": batch_id, "txns": [list(t) for t in txns], "done": done}).encode()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, final)
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def prune(self, batch_id: int) -> None:
        for path in self.root.glob("intent-*.json"):
            stem = path.stem.removeprefix("intent-")
            if stem.isdigit() and int(stem) <= batch_id - _INTENTS_KEPT:
                path.unlink(missing_ok=True)


# ---- ending transactions (driver side) ----------------------------------------------------------------


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


async def _abort_one(client: Client, ref: TxnRef, timeout_ms: int) -> None:
    txn = await client.transaction_of((ref[0], ref[1]), timeout_ms)
    try:
        await txn.abort()
    except PulsarClientError as exc:  # already ended or unknown; the timeout reaps what is left
        log.info("abort of transaction %s,%s: %s", ref[0], ref[1], exc)


async def _end_all(opts: SinkOptions, commit: list[TxnRef], abort: list[TxnRef], batch_id: int | None) -> None:
    client = runtime.client_for(opts.service_url, opts.client_options)
    for ref in commit:
        await _commit_one(client, ref, opts.txn_timeout_ms, batch_id)
    for ref in abort:
        await _abort_one(client, ref, opts.txn_timeout_ms)


def commit_batch(opts: SinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    """A batch job succeeded: make every task's output visible."""
    runtime.run(_end_all(opts, _refs(messages), [], None))


def abort_txns(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    """Abort what the failed tasks report, except txns a recorded intent of ``batch_id`` holds."""
    refs = _refs(messages)
    if batch_id is not None and opts.checkpoint_location is not None:
        recorded = IntentStore(opts.checkpoint_location, opts.sink_id).load(batch_id)
        if recorded is not None:
            keep = {(r[0], r[1]) for r in recorded[0]}
            refs = [r for r in refs if (r[0], r[1]) not in keep]
    runtime.run(_end_all(opts, [], refs, None))


def commit_stream(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
    """The micro-batch's commit: record the intent, commit its txns; a replay rolls the recorded ones forward."""
    if opts.checkpoint_location is None:
        raise OptionError("the exactly-once sink needs option checkpointLocation")
    store = IntentStore(opts.checkpoint_location, opts.sink_id)
    new = _refs(messages)
    test_hooks.reached("commit_start")
    recorded = store.load(batch_id)
    if recorded is not None:
        txns, done = recorded
        known = {(r[0], r[1]) for r in txns}
        replayed = [r for r in new if (r[0], r[1]) not in known]
        log.info("batch %d replayed: rolling %d recorded txns forward, aborting %d new ones", batch_id,
                 0 if done else len(txns), len(replayed))
        runtime.run(_end_all(opts, [] if done else txns, replayed, batch_id))
    else:
        txns = new
        store.save(batch_id, txns, done=False)
        test_hooks.reached("intent_written")
        runtime.run(_end_all(opts, txns, [], batch_id))
    store.save(batch_id, txns, done=True)
    store.prune(batch_id)
    test_hooks.reached("committed")
