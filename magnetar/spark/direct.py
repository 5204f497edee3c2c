"""Direct reads (``readFrom=storage``): Spark tasks read a topic's sealed ledgers straight from the object store
the broker keeps them in (``ledgerStoreUrl=s3://...``) instead of through the broker.

Planning (driver, ``plan_direct``): the broker's internal stats (``admin.url``) list each partition's ledgers.
Each ledger a range covers is read from the store (a ``LedgerRange``) when it is sealed and in the store: every
ledger but the last (the current one, which may still grow), and none offloaded to tiered storage with its store
copy deleted; consecutive ledger ranges of a partition make one Spark task (a ``LedgerTask``) of up to
``TASK_BYTES`` (by the sizes the stats give), as a task costs a Python worker round trip however small it is.
What is left, such ledgers and the tail from the current ledger on, is read through
the broker as before (a ``ScanRange`` whose start is a cut, not a consumed message). When the range's start lies
in a ledger the list no longer has (retention removed it), the range is not split: the broker path reports the
loss exactly as without ``readFrom``.

Reading (executor, ``scan_ledger``): the store is opened as a reader (no probe: it creates nothing), once per
Python worker; entries come in runs of ``RUN_ENTRIES``, the next run fetched while this one is decoded (ranged
GETs; the store verifies every record's checksums, the decoder every entry's CRC), and each entry is decoded as
the client decodes a delivered one: batches split, compression undone. What the broker never delivers is
skipped: markers. Where visibility depends on more than the entry, the rest of the ledger range is read through
the broker, which decides exactly as for any reader: an entry written in a transaction (only the broker knows
which transactions aborted) and a chunk of a chunked message (its chunks may straddle ledgers). A ledger deleted
by retention while it is read is data loss, reported (or skipped with ``failOnDataLoss=false``) as on the broker
path. Rows, their ids, columns and order are the broker path's (``tests/spark/test_direct_read.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Final

from magnetar.client import Client, Message, MessageId, decode_stored_entry
from magnetar.core.clock import SystemClock
from magnetar.protocol import ProtocolError, parse_entry_metadata, split_broker_entry_metadata
from magnetar.spark import runtime
from magnetar.spark.offsets import after, is_past
from magnetar.spark.options import LedgerStoreLocation, SourceOptions
from magnetar.spark.scan import ROWS_PER_BATCH, DataLossError, ScanRange, scan, wanted
from magnetar.storage.api import CountingLedgerIdAllocator, EntryNotFound, LedgerNotFound, LedgerStore
from magnetar.storage.objectstore.opening import open_s3_ledger_store
from magnetar.storage.objectstore.settings import LedgerStoreConfig, parse_ledger_store_url

__all__ = ["CorruptEntry", "LedgerRange", "LedgerTask", "group_tasks", "plan_direct", "scan_task", "split_direct"]

log = logging.getLogger(__name__)

RUN_ENTRIES: Final = 256  # entries per store read
TASK_BYTES: Final = 64 * 1024 * 1024  # ledger ranges of one partition grouped into one Spark task, up to this
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024  # the largest decompressed entry accepted


class CorruptEntry(RuntimeError):
    """An entry in the store fails its checksum or cannot be decoded: the message names it."""


@dataclass(frozen=True, slots=True)
class LedgerRange:
    """One Spark task of a direct read: entries ``first..last`` of one sealed ledger, within ``rng``'s bounds
    (its exclusive start, inclusive end and publish-time window)."""

    rng: ScanRange
    ledger_id: int
    first: int
    last: int
    location: LedgerStoreLocation
    size_bytes: int = 0  # estimated from the ledger's size and the share of its entries covered


@dataclass(frozen=True, slots=True)
class LedgerTask:
    """One Spark task of a direct read: consecutive ledger ranges of one partition, read in order."""

    ranges: tuple[LedgerRange, ...]


@dataclass(frozen=True, slots=True)
class Ledger:
    """One ledger of a partition, as the broker's internal stats list it."""

    ledger_id: int
    entries: int
    in_store: bool  # False: offloaded, and its copy in the broker's store deleted
    size_bytes: int = 0


# ------------------------------------------------------------------------------------------ planning (driver)

def _span(rng: ScanRange, ledger: Ledger) -> tuple[int, int] | None:
    """The entries of ``ledger`` that ``rng`` covers (first, last), or None."""
    start, end = rng.start, rng.end
    if ledger.entries <= 0 or start.ledger_id > ledger.ledger_id or end.ledger_id < ledger.ledger_id:
        return None
    first = 0
    if start.ledger_id == ledger.ledger_id:
        first = start.entry_id if start.batch_index >= 0 else start.entry_id + 1
    last = ledger.entries - 1 if end.ledger_id > ledger.ledger_id else min(end.entry_id, ledger.entries - 1)
    return (max(first, 0), last) if max(first, 0) <= last else None


def _cut(rng: ScanRange, start: MessageId, end: MessageId, first_piece: bool) -> ScanRange:
    return ScanRange(rng.topic, rng.partition, start, end, rng.start_time_ms, rng.end_time_ms,
                     rng.check_loss and first_piece)


def split_direct(rng: ScanRange, ledgers: list[Ledger], location: LedgerStoreLocation
                 ) -> list[ScanRange | LedgerRange]:
    """``rng`` as ledger ranges read from the store and the ranges between and after them read through the
    broker, in order (the module's docstring)."""
    known = {ledger.ledger_id for ledger in ledgers}
    if rng.check_loss and rng.start.entry_id >= 0 and rng.start.ledger_id not in known:
        return [rng]  # its start's ledger is gone: the broker path tells whether that lost data
    out: list[ScanRange | LedgerRange] = []
    cursor, first_piece = rng.start, True
    broker_end: MessageId | None = None  # the end of ledgers left to the broker, not planned yet
    for i, ledger in enumerate(ledgers):
        span = _span(rng, ledger)
        if span is None:
            continue
        if i == len(ledgers) - 1 or not ledger.in_store:
            broker_end = MessageId(ledger.ledger_id, span[1], -1)
            continue
        if broker_end is not None:
            out.append(_cut(rng, cursor, broker_end, first_piece))
            cursor, first_piece, broker_end = broker_end, False, None
        share = ledger.size_bytes * (span[1] - span[0] + 1) // max(ledger.entries, 1)
        out.append(LedgerRange(rng, ledger.ledger_id, span[0], span[1], location, share))
        cursor, first_piece = MessageId(ledger.ledger_id, span[1], -1), False
    if broker_end is not None or after(rng.end, cursor):  # the current ledger, and anything listed after stats
        out.append(_cut(rng, cursor, rng.end, first_piece))
    return out


def _internal_stats(admin_url: str, topic: str) -> dict[str, Any]:
    domain, _, rest = topic.partition("://")
    tenant, namespace, local = rest.split("/", 2)
    url = (f"{admin_url.rstrip('/')}/admin/v2/{domain}/{tenant}/{namespace}/"
           f"{urllib.parse.quote(local, safe='')}/internalStats")
    with urllib.request.urlopen(url, timeout=30) as resp:
        stats: dict[str, Any] = json.loads(resp.read())
        return stats


def ledgers_of(stats: dict[str, Any]) -> list[Ledger]:
    out = []
    for item in stats.get("ledgers", []):
        context = item.get("offloadContext") or {}
        gone = bool(item.get("offloaded")) and bool(context.get("bookkeeperDeleted"))
        out.append(Ledger(int(item["ledgerId"]), int(item["entries"]), not gone, int(item.get("size") or 0)))
    return out


def group_tasks(pieces: list[ScanRange | LedgerRange], task_bytes: int = TASK_BYTES) -> list[ScanRange | LedgerTask]:
    """Consecutive ledger ranges of one range as tasks of up to ``task_bytes``; broker ranges as they are."""
    out: list[ScanRange | LedgerTask] = []
    group: list[LedgerRange] = []
    size = 0
    for piece in pieces:
        if isinstance(piece, LedgerRange) and group and group[0].rng == piece.rng and (
                size + piece.size_bytes <= task_bytes):
            group.append(piece)
            size += piece.size_bytes
            continue
        if group:
            out.append(LedgerTask(tuple(group)))
            group, size = [], 0
        if isinstance(piece, LedgerRange):
            group, size = [piece], piece.size_bytes
        else:
            out.append(piece)
    if group:
        out.append(LedgerTask(tuple(group)))
    return out


async def plan_direct(ranges: list[ScanRange], opts: SourceOptions) -> list[ScanRange | LedgerTask]:
    """Every range split into ledger tasks and broker ranges (``opts.ledger_store`` and ``admin_url`` set)."""
    assert opts.ledger_store is not None and opts.admin_url is not None
    out: list[ScanRange | LedgerTask] = []
    for rng in ranges:
        stats = await asyncio.to_thread(_internal_stats, opts.admin_url, rng.topic)
        out.extend(group_tasks(split_direct(rng, ledgers_of(stats), opts.ledger_store)))
    return out


# ------------------------------------------------------------------------------------------ reading (executor)

async def _store(location: LedgerStoreLocation) -> LedgerStore:
    """This worker's reader of the broker's store (opened on first use, kept for later tasks)."""
    cache = runtime.process_cache()
    key = ("ledger-store", location)
    if key not in cache:
        config = LedgerStoreConfig(url=parse_ledger_store_url(location.url), service_endpoint=location.endpoint,
                                   region=location.region)
        cache[key] = await open_s3_ledger_store(config, clock=SystemClock(), allocator=CountingLedgerIdAllocator(),
                                                probe=False)
    store: LedgerStore = cache[key]
    return store


def _needs_broker(meta: Any) -> bool:
    """An entry whose visibility the broker decides: written in a transaction, or one chunk of a message."""
    return bool(meta.HasField("txnid_most_bits") or meta.num_chunks_from_msg > 1)


def _through_broker(lr: LedgerRange, entry_id: int, upto: LedgerRange) -> ScanRange:
    """From ``entry_id`` of ``lr`` to the end of ``upto`` (the task's last ledger range), as a broker range."""
    rng = lr.rng
    before = MessageId(lr.ledger_id, entry_id - 1, -1)
    start = rng.start if after(rng.start, before) else before
    end = rng.end if (rng.end.ledger_id, rng.end.entry_id) == (upto.ledger_id, upto.last) else MessageId(
        upto.ledger_id, upto.last, -1)
    return ScanRange(rng.topic, rng.partition, start, end, rng.start_time_ms, rng.end_time_ms, False)


def _decode(lr: LedgerRange, entry_id: int, data: bytes) -> list[Message] | None:
    """The entry's messages inside the range (markers: none); None when the broker must decide."""
    _, entry = split_broker_entry_metadata(memoryview(data))
    try:
        meta = parse_entry_metadata(entry)
    except ProtocolError as exc:
        raise CorruptEntry(f"{lr.rng.topic}: ledger {lr.ledger_id} entry {entry_id} is damaged: {exc}") from exc
    if meta.HasField("marker_type"):
        return []
    if _needs_broker(meta):
        return None
    decoded = decode_stored_entry(lr.rng.topic, lr.ledger_id, entry_id, entry, partition=lr.rng.partition,
                                  max_message_bytes=MAX_MESSAGE_BYTES)
    if decoded.validation_error is not None:
        raise CorruptEntry(f"{lr.rng.topic}: ledger {lr.ledger_id} entry {entry_id} fails its checksum or cannot "
                           "be decompressed")
    rng = lr.rng
    return [m for m in decoded.messages
            if after(m.message_id, rng.start) and not is_past(m.message_id, rng.end) and wanted(m, rng)]


async def scan_task(task: LedgerTask, client: Callable[[], Client], *, fail_on_data_loss: bool, timeout_ms: int,
                    admin_url: str | None = None) -> AsyncGenerator[list[Message], None]:
    """The task's ledger ranges, one after the other (``client``: the broker's, made when first needed). Once an
    entry needs the broker, one broker read takes the rest of the task (a topic written in transactions
    throughout costs one reader per task, not one per ledger)."""
    handed_over: list[bool] = []
    for lr in task.ranges:
        part = scan_ledger(lr, client, fail_on_data_loss=fail_on_data_loss, timeout_ms=timeout_ms,
                           admin_url=admin_url, upto=task.ranges[-1], handed_over=handed_over)
        try:
            async for chunk in part:
                yield chunk
        finally:
            await part.aclose()
        if handed_over:
            return


async def scan_ledger(lr: LedgerRange, client: Callable[[], Client], *, fail_on_data_loss: bool, timeout_ms: int,
                      admin_url: str | None = None, upto: LedgerRange | None = None,
                      handed_over: list[bool] | None = None) -> AsyncGenerator[list[Message], None]:
    """Chunks of at most ``ROWS_PER_BATCH`` messages of the ledger range, in order. From an entry that needs the
    broker on, a broker read to the end of ``upto`` (default ``lr``) takes over, and ``handed_over`` says so."""
    store = await _store(lr.location)

    def fetch(first: int) -> asyncio.Future[list[bytes]] | None:
        return None if first > lr.last else asyncio.ensure_future(
            store.read(lr.ledger_id, first, min(first + RUN_ENTRIES - 1, lr.last)))

    chunk: list[Message] = []
    entry, pending = lr.first, fetch(lr.first)
    try:
        while pending is not None:  # bounded: each turn consumes one run of the range
            try:
                run = await pending
            except (LedgerNotFound, EntryNotFound) as exc:
                pending = None
                message = (f"data loss in {lr.rng.topic}: ledger {lr.ledger_id} was removed while being read "
                           f"({exc}); set failOnDataLoss=false to skip it")
                if fail_on_data_loss:
                    raise DataLossError(message) from exc
                log.warning("%s; skipped (failOnDataLoss=false)", message)
                break
            pending = fetch(entry + len(run))
            for data in run:
                messages = _decode(lr, entry, data)
                if messages is None:
                    if chunk:
                        yield chunk
                        chunk = []
                    if handed_over is not None:
                        handed_over.append(True)
                    rest = scan(client(), _through_broker(lr, entry, upto or lr), fail_on_data_loss=fail_on_data_loss,
                                timeout_ms=timeout_ms, admin_url=admin_url)
                    try:
                        async for part in rest:
                            yield part
                    finally:
                        await rest.aclose()
                    return
                chunk.extend(messages)
                entry += 1
                if len(chunk) >= ROWS_PER_BATCH:
                    yield chunk
                    chunk = []
        if chunk:
            yield chunk
    finally:
        if pending is not None:
            pending.cancel()
