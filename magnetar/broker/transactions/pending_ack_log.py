"""The pending-ack log of one subscription: what transactional acks are waiting, durable across crashes.

Each record is one transactional ACK (the txn, individual or cumulative, the positions with the batch
indexes acked) or the end of a transaction on the subscription (commit or abort, written after the outcome
is applied). Replaying the log in order rebuilds the acks still pending. Records are small JSON documents
with a version, written through PIP-160's buffered writer (one per entry, or many per entry when
``transactionPendingAckBatchedWriteEnabled``). Records of ended transactions are released on the log's own
cursor (batch-index acks inside batched entries), so replay skips them and consumed ledgers are trimmed.

The log is a managed ledger named ``{topic}-{subscription}__transaction_pending_ack`` in the topic's
namespace, as Pulsar names it. Knows nothing of cursors' meaning or of dispatch.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.names import TopicName
from magnetar.broker.transactions import log_records
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.broker.transactions.buffered_writer import (
    RecordPosition,
    RecordWriter,
    WriterError,
    WriterFactory,
    plain_writer_for,
)
from magnetar.ledger.api import (
    Cursor,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerError,
    Position,
    RetentionPolicy,
)
from magnetar.protocol.txn_log_batch import LogKind

log = logging.getLogger("magnetar.broker.transactions.pending_ack_log")

PENDING_ACK_SUFFIX = "__transaction_pending_ack"
RECORD_VERSION = 1
CURSOR_NAME = "__pending_ack_log"  # the log's own cursor: released records are acked on it
TRIM_EVERY_RELEASES = 1000  # ended transactions between two trims of the log
WHOLE = -1  # the mask of an ack of a whole entry


def pending_ack_topic(topic: TopicName, subscription: str) -> TopicName:
    local = f"{topic.local_name}-{subscription}{PENDING_ACK_SUFFIX}"
    return TopicName(topic.domain, topic.tenant, topic.namespace, local)


def is_transaction_internal(managed_ledger_name: str) -> bool:
    """Pending-ack logs are storage, not topics: listings leave them out (regex consumers must not see them)."""
    return managed_ledger_name.endswith(PENDING_ACK_SUFFIX)


@dataclass(frozen=True, slots=True)
class AckedId:
    """One acked entry: ``mask`` is the batch indexes acked (an int bit set) or WHOLE for the whole entry."""

    position: Position
    mask: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class AckRecord:
    txn: TxnId
    cumulative: bool
    ids: tuple[AckedId, ...]


@dataclass(frozen=True, slots=True)
class EndRecord:
    txn: TxnId
    action: TxnAction


Record = AckRecord | EndRecord


def encode_record(record: Record) -> bytes:
    doc: dict[str, object]
    if isinstance(record, AckRecord):
        ids = [[i.position.ledger_id, i.position.entry_id, i.mask, i.batch_size] for i in record.ids]
        doc = {"v": RECORD_VERSION, "t": "ack", "txn": [record.txn.most, record.txn.least],
               "cumulative": record.cumulative, "ids": ids}
    else:
        doc = {"v": RECORD_VERSION, "t": "end", "txn": [record.txn.most, record.txn.least],
               "action": int(record.action)}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_record(data: bytes) -> Record:
    """Raises ValueError for a record this code cannot read."""
    try:
        doc = json.loads(data)
        if doc["v"] != RECORD_VERSION:
            raise ValueError(f"unknown pending-ack record version {doc['v']!r}")
        txn = TxnId(int(doc["txn"][0]), int(doc["txn"][1]))
        if doc["t"] == "end":
            return EndRecord(txn, TxnAction(int(doc["action"])))
        if doc["t"] != "ack":
            raise ValueError(f"unknown pending-ack record type {doc['t']!r}")
        ids = tuple(
            AckedId(Position(int(lid), int(eid)), int(mask), int(size)) for lid, eid, mask, size in doc["ids"]
        )
        return AckRecord(txn, bool(doc["cumulative"]), ids)
    except (KeyError, TypeError, IndexError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable pending-ack record: {exc}") from exc


class PendingAckLog(Protocol):
    """Where a pending-ack store writes. ``append`` returns a handle of the record; ``release`` tells the
    log which records no transaction needs any more (replay skips them; storage behind them is trimmed)."""

    async def append(self, record: Record) -> object: ...

    async def replay(self) -> Sequence[tuple[object, Record]]: ...

    def release(self, handles: Iterable[object]) -> None: ...

    async def close(self) -> None: ...

    async def delete(self) -> None: ...


#: one record per entry (PIP-160 batching off)
plain_writer = plain_writer_for(LogKind.PENDING_ACK)


class ManagedLedgerAckLog:
    """The subscription's pending-ack managed ledger, written through a (possibly batching) record writer;
    its own cursor marks released records, so replay skips them and consumed ledgers are trimmed."""

    def __init__(self, ledger: ManagedLedger, cursor: Cursor, writer: RecordWriter) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self._writer = writer
        self._releases_since_trim = 0
        self._trim_task: asyncio.Task[None] | None = None
        self.records_appended = 0

    @classmethod
    async def open(cls, ledger: ManagedLedger, new_writer: WriterFactory = plain_writer) -> ManagedLedgerAckLog:
        cursor = await ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
        return cls(ledger, cursor, new_writer(ledger))

    @property
    def name(self) -> str:
        return self._ledger.name

    @property
    def ledger(self) -> ManagedLedger:
        """The log's managed ledger (its internal stats are the subscription's pendingAckInternalStats)."""
        return self._ledger

    async def append(self, record: Record) -> RecordPosition:
        try:
            position = await self._writer.write(encode_record(record))
        except WriterError as exc:
            raise ManagedLedgerError(f"{self._ledger.name}: {exc}") from exc
        self.records_appended += 1
        return position

    async def replay(self) -> list[tuple[object, Record]]:
        return [(p, decode_record(data)) async for p, data in log_records.replay(self._cursor, LogKind.PENDING_ACK)]

    def release(self, handles: Iterable[object]) -> None:
        log_records.release_all(self._cursor, [h for h in handles if isinstance(h, RecordPosition)])
        self._releases_since_trim += 1
        if self._releases_since_trim >= TRIM_EVERY_RELEASES and self._trim_task is None:
            self._releases_since_trim = 0
            self._trim_task = asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        try:
            await self._cursor.flush()
            await self._ledger.trim(RetentionPolicy())
        except ManagedLedgerError as exc:
            log.warning("%s: trimming the pending-ack log failed: %s", self._ledger.name, exc)
        finally:
            self._trim_task = None

    async def close(self) -> None:
        if self._trim_task is not None:
            await self._trim_task
        await self._writer.close()
        await self._cursor.close()
        await self._ledger.close()

    async def delete(self) -> None:
        if self._trim_task is not None:
            await self._trim_task
        await self._writer.close()
        await self._ledger.delete()
