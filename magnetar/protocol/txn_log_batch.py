"""PIP-160's entry format for batched transaction-log and pending-ack-log records.

A batched entry is ``[magic 0x0e01: u16 BE][version 1: u16 BE][protobuf batch]``; the batch message is
``BatchedTransactionMetadataEntry`` or ``BatchedPendingAckMetadataEntry`` (both "repeated record, field 1").
An entry without the magic is one plain record, so a log written before batching was enabled, or a record
too large to batch, replays unchanged. The magic can never open a plain record: its first byte, 0x0e, is a
protobuf tag with wire type 6, which no valid message starts with. Pure bytes in, bytes out.
"""

from __future__ import annotations

import enum
import struct

from google.protobuf.message import DecodeError

from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.proto import TransactionLogBatch_pb2 as batch_pb

MAGIC = 0x0E01
VERSION = 1
_HEADER = struct.Struct(">HH")
HEADER_BYTES = _HEADER.size


class LogEntryError(ProtocolError):
    """A stored batched entry that cannot be read: unknown version or a batch that does not parse."""


class LogKind(enum.Enum):
    """Which of the two logs: they differ only in the batch envelope's message type."""

    TRANSACTION = "transaction"
    PENDING_ACK = "pending_ack"


def encode_batch(kind: LogKind, records: list[bytes]) -> bytes:
    """One batched entry holding ``records`` (each an already-serialized record) in order."""
    if kind is LogKind.TRANSACTION:
        body = batch_pb.BatchedTransactionMetadataEntry(transaction_log=records).SerializeToString()
    else:
        body = batch_pb.BatchedPendingAckMetadataEntry(pending_ack_log=records).SerializeToString()
    return _HEADER.pack(MAGIC, VERSION) + body


def is_batched(entry: bytes | memoryview) -> bool:
    return len(entry) >= HEADER_BYTES and _HEADER.unpack_from(entry)[0] == MAGIC


def decode_entry(kind: LogKind, entry: bytes | memoryview) -> list[bytes]:
    """The records of an entry: the batch's records in order, or ``[entry]`` for a plain record.

    Raises LogEntryError for a batched entry of an unknown version or whose batch does not parse.
    """
    if not is_batched(entry):
        return [bytes(entry)]
    _, version = _HEADER.unpack_from(entry)
    if version != VERSION:
        raise LogEntryError(f"transaction log batch version {version} is not supported (expected {VERSION})")
    body = bytes(entry[HEADER_BYTES:])
    try:
        if kind is LogKind.TRANSACTION:
            txn = batch_pb.BatchedTransactionMetadataEntry.FromString(body)
            return list(txn.transaction_log)
        ack = batch_pb.BatchedPendingAckMetadataEntry.FromString(body)
        return list(ack.pending_ack_log)
    except DecodeError as exc:
        raise LogEntryError(f"transaction log batch does not parse: {exc}") from exc
