"""The coordinator's log: a managed ledger ``pulsar/system/persistent/__transaction_log_{tc}`` of records.

Every change to a transaction (new, partition added, subscription added, status update) is one record,
written before the coordinator answers; replaying the records rebuilds the open transactions. Records
are ``TransactionMetadataEntry`` protobufs (Pulsar's field numbers). Writing goes through a
:class:`RecordWriter` (one record in, its position out): PIP-160's buffered writer, batching many records
per entry or not as the broker's switch says; replay reads plain and batched entries alike.

A durable cursor marks what is still needed: once a transaction has finished, its records are acknowledged
on the cursor, replay skips them, and fully consumed ledgers are trimmed. The id allocator survives
trimming in the ledger's properties (``magnetar.txn.sequence.reserved``): ids are reserved in blocks before
use, so no id is ever handed out twice. Knows nothing of the wire or of participants.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from magnetar.broker.errors import PersistenceError
from magnetar.broker.names import TopicName
from magnetar.broker.transactions import log_records
from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.buffered_writer import (
    RecordPosition,
    RecordWriter,
    WriterError,
    WriterFactory,
    plain_writer_for,
)
from magnetar.broker.transactions.states import TxnStatus
from magnetar.ledger.api import (
    Cursor,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
    RetentionPolicy,
)
from magnetar.protocol.proto import TransactionLog_pb2 as logpb
from magnetar.protocol.txn_log_batch import LogKind

log = logging.getLogger("magnetar.txn.log")

CURSOR_NAME: Final = "__transaction_log_cursor"
SEQUENCE_PROPERTY: Final = "magnetar.txn.sequence.reserved"
SEQUENCE_BLOCK: Final = 10_000  # ids reserved per properties write
TRIM_EVERY_RELEASES: Final = 1_000  # finished transactions between two trims of the log


def log_topic(tc_id: int) -> TopicName:
    return TopicName.parse(f"persistent://pulsar/system/__transaction_log_{tc_id}")


class Op(enum.IntEnum):
    NEW = 0
    ADD_PARTITION = 1
    ADD_SUBSCRIPTION = 2
    UPDATE = 3


class TxnLogCorrupted(Exception):
    """A record that does not decode: the log cannot be trusted past it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnLogRecord:
    op: Op
    txn: TxnId
    expected: TxnStatus | None = None
    new: TxnStatus | None = None
    partitions: tuple[str, ...] = ()
    subscriptions: tuple[tuple[str, str], ...] = ()
    timeout_ms: int = 0
    start_time_ms: int = 0
    modified_ms: int = 0
    owner: str | None = None  # NEW: the role that opened it (None without authentication)


def encode(record: TxnLogRecord) -> bytes:
    entry = logpb.TransactionMetadataEntry(
        metadata_op=int(record.op),  # type: ignore[arg-type]
        txnid_most_bits=record.txn.most,
        txnid_least_bits=record.txn.least,
        partitions=list(record.partitions),
        subscriptions=[logpb.TxnSubscription(topic=t, subscription=s) for t, s in record.subscriptions],
    )
    if record.expected is not None:
        entry.expected_status = int(record.expected)  # type: ignore[assignment]
    if record.new is not None:
        entry.new_status = int(record.new)  # type: ignore[assignment]
    if record.op is Op.NEW:
        entry.timeout_ms = record.timeout_ms
        entry.start_time = record.start_time_ms
        entry.max_local_txn_id = record.txn.least
        if record.owner is not None:
            entry.owner = record.owner
    entry.last_modification_time = record.modified_ms
    return entry.SerializeToString()


def decode(data: bytes) -> TxnLogRecord:
    entry = logpb.TransactionMetadataEntry()
    try:
        entry.ParseFromString(data)
        if not entry.HasField("metadata_op"):  # absent, or a value this version does not know
            raise ValueError("no known metadata_op")
        op = Op(entry.metadata_op)
        expected = TxnStatus(entry.expected_status) if entry.HasField("expected_status") else None
        new = TxnStatus(entry.new_status) if entry.HasField("new_status") else None
    except (DecodeError, ValueError) as exc:
        raise TxnLogCorrupted(f"undecodable transaction log record: {exc}") from exc
    return TxnLogRecord(
        op=op,
        txn=TxnId(entry.txnid_most_bits, entry.txnid_least_bits),
        expected=expected,
        new=new,
        partitions=tuple(entry.partitions),
        subscriptions=tuple((s.topic, s.subscription) for s in entry.subscriptions),
        timeout_ms=entry.timeout_ms,
        start_time_ms=entry.start_time,
        modified_ms=entry.last_modification_time,
        owner=entry.owner if entry.HasField("owner") else None,
    )


#: one record per entry (PIP-160 batching off)
plain_writer = plain_writer_for(LogKind.TRANSACTION)


class TxnLog:
    """One coordinator's log; ``open`` then ``replay`` once, then ``append``/``release``."""

    def __init__(self, tc_id: int, ledger: ManagedLedger, cursor: Cursor, writer: RecordWriter) -> None:
        self.tc_id = tc_id
        self.ledger = ledger
        self._cursor = cursor
        self.writer = writer
        self.appended = 0  # records appended since open (pulsar_txn_append_log_total)
        self._releases_since_trim = 0
        self._reserved = int(ledger.properties.get(SEQUENCE_PROPERTY, "0"))

    @classmethod
    async def open(
        cls,
        factory: ManagedLedgerFactory,
        tc_id: int,
        config: ManagedLedgerConfig | None = None,
        new_writer: WriterFactory = plain_writer,
    ) -> TxnLog:
        ledger = await factory.open(log_topic(tc_id).managed_ledger_name, config)
        cursor = await ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
        return cls(tc_id, ledger, cursor, new_writer(ledger))

    async def replay(self) -> AsyncIterator[tuple[RecordPosition, TxnLogRecord]]:
        """Every record not yet released, in log order (plain and batched entries alike)."""
        async for position, data in log_records.replay(self._cursor, LogKind.TRANSACTION):
            yield position, decode(data)

    @property
    def reserved_sequence(self) -> int:
        """Ids below this may have been handed out before; a new id must be at least this after a restart."""
        return self._reserved

    async def reserve_through(self, least: int) -> None:
        """Make sure ``least`` is covered by a durable reservation before it is used."""
        if least < self._reserved:
            return
        reserved = (least // SEQUENCE_BLOCK + 1) * SEQUENCE_BLOCK
        try:
            await self.ledger.set_properties({SEQUENCE_PROPERTY: str(reserved)})
        except ManagedLedgerError as exc:
            raise PersistenceError(f"transaction log {self.tc_id}: cannot reserve ids: {exc}") from exc
        self._reserved = max(self._reserved, reserved)

    async def append(self, record: TxnLogRecord) -> RecordPosition:
        try:
            position = await self.writer.write(encode(record))
        except WriterError as exc:
            raise PersistenceError(f"transaction log {self.tc_id}: {exc}") from exc
        self.appended += 1
        return position

    def release(self, positions: Iterable[RecordPosition]) -> None:
        """The records of a finished transaction are no longer needed for recovery."""
        log_records.release_all(self._cursor, positions)
        self._releases_since_trim += 1

    async def trim_if_due(self) -> None:
        if self._releases_since_trim < TRIM_EVERY_RELEASES:
            return
        self._releases_since_trim = 0
        await self._cursor.flush()
        await self.ledger.trim(RetentionPolicy())

    async def close(self) -> None:
        await self.writer.close()
        await self._cursor.close()
        await self.ledger.close()
