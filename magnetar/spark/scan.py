"""Reading one offset range of one topic partition on an executor, with data-loss detection.

A range is ``(start, end]``: the broker starts a non-durable reader after ``start`` (exclusive, applied
by the broker), and the scan stops at ``end`` or at the first message past it. If the first message
is in another ledger than ``start``, a one-message probe asks whether ``start``'s ledger still
exists; if it does not, retention removed data after ``start``: ``DataLossError`` names the range, or
it is skipped when ``failOnDataLoss`` is false. (A ledger read to its very last entry and trimmed
afterwards looks the same: reported as loss, though nothing unread was lost.) A range that stays quiet
with its end still ahead fails the task; with ``admin.url`` set, a broker that cannot read an offloaded
ledger (the object store fails) is asked for its reason, and ``OffloadReadFailure`` names the ledger and
the store's error (Spark retries the task; it succeeds once the store heals).
Knows nothing of Spark; returns Arrow record batches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from magnetar.client import Client, Message, MessageId, Reader
from magnetar.client.errors import OperationTimeout
from magnetar.spark import runtime
from magnetar.spark.offsets import contiguous, is_past, reaches
from magnetar.spark.schema import to_record_batch

__all__ = ["ROWS_PER_BATCH", "DataLossError", "OffloadReadFailure", "ScanRange", "drive", "iter_batches", "scan",
           "wanted"]

log = logging.getLogger(__name__)

ROWS_PER_BATCH: Final = 8192
_RECEIVER_QUEUE: Final = 2000


class DataLossError(RuntimeError):
    """Messages that a range should contain are gone (retention or deletion removed them)."""


class OffloadReadFailure(RuntimeError):
    """The broker cannot read an offloaded ledger of the range (the object store fails): the message names
    the ledger and the store's error. Retryable: the task may succeed once the store heals."""


async def _offload_read_error(admin_url: str, topic: str) -> str:
    """The broker's current ``offloadReadError`` for ``topic`` (``GET .../offload``); "" when none or unknown."""
    domain, _, rest = topic.partition("://")
    tenant, namespace, local = rest.split("/", 2)
    url = (f"{admin_url.rstrip('/')}/admin/v2/{domain}/{tenant}/{namespace}/"
           f"{urllib.parse.quote(local, safe='')}/offload")

    def fetch() -> str:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                status = json.loads(resp.read())
        except (OSError, ValueError):
            return ""
        return str(status.get("offloadReadError", "")) if isinstance(status, dict) else ""

    return await asyncio.to_thread(fetch)


@dataclass(frozen=True, slots=True)
class ScanRange:
    """What an input partition carries to the executor: everything ``read()`` needs."""

    topic: str
    partition: int
    start: MessageId  # exclusive
    end: MessageId  # inclusive
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    check_loss: bool = True  # False when ``start`` is a cut made by minPartitions, not a consumed message


def parent_topic(topic: str, partition: int) -> str:
    """``persistent://t/n/x`` for ``persistent://t/n/x-partition-3``; the topic itself otherwise."""
    return topic.rsplit("-partition-", 1)[0] if partition >= 0 else topic


def _lost(rng: ScanRange, first: MessageId | None) -> str:
    upto = f"before {first}" if first is not None else f"up to the range end {rng.end}"
    return (f"data loss in {rng.topic}: messages after {rng.start} {upto} are no longer available "
            "(removed by retention?); set failOnDataLoss=false to skip them")


async def _start_exists(client: Client, topic: str, start: MessageId, timeout_ms: int) -> bool:
    """Whether ``start``'s ledger still exists: if it does, every later ledger does too."""
    first_of_ledger = MessageId(start.ledger_id, 0)
    probe = await client.create_reader(topic, first_of_ledger, inclusive=True, receiver_queue_size=1)
    try:
        msg = await probe.read_next(timeout_ms)
        return msg.message_id.ledger_id == start.ledger_id
    except OperationTimeout:
        return False
    finally:
        await probe.close()


async def _check_first(client: Client, rng: ScanRange, first: MessageId | None, fail: bool, timeout_ms: int) -> None:
    if first is not None and contiguous(rng.start, first):
        return
    if not rng.check_loss or await _start_exists(client, rng.topic, rng.start, timeout_ms):
        return
    if fail:
        raise DataLossError(_lost(rng, first))
    log.warning("%s; skipped (failOnDataLoss=false)", _lost(rng, first))


async def _next(reader: Reader, rng: ScanRange, timeout_ms: int, admin_url: str | None) -> Message | None:
    """The next message, or None when the range's end can no longer arrive (it was removed)."""
    for _ in range(3):  # bounded: three quiet polls with the end still ahead of the topic's last id
        try:
            return await reader.read_next(timeout_ms)
        except OperationTimeout:
            last = await reader.last_message_id()
            if last.entry_id < 0 or is_past(rng.end, last):
                return None
    reason = await _offload_read_error(admin_url, rng.topic) if admin_url else ""
    if reason:
        raise OffloadReadFailure(f"reading {rng.topic} after {rng.start}: the broker cannot read an offloaded "
                                 f"ledger: {reason}")
    raise TimeoutError(f"no message from {rng.topic} after {rng.start} within {3 * timeout_ms} ms"
                       + ("" if admin_url else " (set admin.url to learn whether the offload store fails)"))


def wanted(msg: Message, rng: ScanRange) -> bool:
    """Whether ``msg`` is inside the range's publish-time window."""
    t = msg.publish_time_ms
    return (rng.start_time_ms is None or t >= rng.start_time_ms) and (rng.end_time_ms is None or t < rng.end_time_ms)


async def scan(
    client: Client, rng: ScanRange, *, fail_on_data_loss: bool, timeout_ms: int, admin_url: str | None = None
) -> AsyncGenerator[list[Message], None]:
    """Chunks of at most ``ROWS_PER_BATCH`` messages of the range, in order."""
    if not is_past(rng.end, rng.start):
        return
    reader = await client.create_reader(rng.topic, rng.start, receiver_queue_size=_RECEIVER_QUEUE)
    try:
        msg = await _next(reader, rng, timeout_ms, admin_url)
        await _check_first(client, rng, None if msg is None else msg.message_id, fail_on_data_loss, timeout_ms)
        chunk: list[Message] = []
        while msg is not None and not is_past(msg.message_id, rng.end):  # bounded by the range end
            if wanted(msg, rng):
                chunk.append(msg)
            if reaches(msg, rng.end):
                break
            if len(chunk) >= ROWS_PER_BATCH:
                yield chunk
                chunk = []
            msg = await _next(reader, rng, timeout_ms, admin_url)
            if msg is None and fail_on_data_loss:
                raise DataLossError(_lost(rng, None))
        if chunk:
            yield chunk
    finally:
        await asyncio.shield(reader.close())


async def _next_chunk(agen: AsyncIterator[list[Message]]) -> list[Message] | None:
    try:
        return await agen.__anext__()
    except StopAsyncIteration:
        return None


def iter_batches(rng: ScanRange, *, service_url: str, client_options: tuple[tuple[str, int], ...],
                 fail_on_data_loss: bool, timeout_ms: int, admin_url: str | None = None) -> Iterator[pa.RecordBatch]:
    """The range as Arrow record batches, driving the scan on this process's loop chunk by chunk."""
    client = runtime.client_for(service_url, client_options)
    agen = scan(client, rng, fail_on_data_loss=fail_on_data_loss, timeout_ms=timeout_ms, admin_url=admin_url)
    return drive(agen, rng)


def drive(agen: AsyncGenerator[list[Message], None], rng: ScanRange) -> Iterator[pa.RecordBatch]:
    """Record batches of the chunks ``agen`` yields (run on this process's loop), closing it at the end."""
    try:
        while True:  # ends with the scan, which ends at the range end
            chunk = runtime.run(_next_chunk(agen))
            if chunk is None:
                return
            yield to_record_batch(chunk, parent_topic(rng.topic, rng.partition), rng.partition)
    finally:
        runtime.run(agen.aclose(), 60.0)
