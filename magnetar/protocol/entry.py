"""Entries: the stored form of a message, and the payload part of SEND and MESSAGE frames.

An entry is ``0x0e01 | u32 crc32c | u32 metadataSize | MessageMetadata | payload``; the CRC covers
everything after itself. The broker stores the bytes a producer sent (from the magic on) and sends
them back verbatim in MESSAGE frames, so checksums, compression, batches and encryption survive
without re-encoding. A SEND may be preceded by a ``0x0e02`` broker-entry-metadata block (skipped)
and, from clients below protocol v6, lack the magic and CRC (then one is computed).

Parses only the metadata, never the payload. Knows nothing of storage or of frames' commands.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from magnetar.protocol.checksum import crc32c
from magnetar.protocol.errors import ChecksumMismatch, MalformedFrame
from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = [
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "SendPayload",
    "entry_payload",
    "make_entry",
    "parse_entry_metadata",
    "parse_send_payload",
    "split_broker_entry_metadata",
    "verify_entry",
]

MAGIC_CRC32C: Final = 0x0E01
MAGIC_BROKER_ENTRY_METADATA: Final = 0x0E02
_CHECKSUM_HEADER_BYTES: Final = 6  # magic + crc
_U32: Final = struct.Struct(">I")
_CRC_HEADER: Final = struct.Struct(">HI")

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)  # not frozen: one per SEND, and a frozen init costs about three times as much
class SendPayload:
    """A SEND payload normalised for storage: the entry (magic and CRC included) and its metadata."""

    entry: bytes
    metadata: pb.MessageMetadata


def parse_send_payload(payload: memoryview) -> SendPayload:
    """Normalise the bytes after a SEND command into an entry, verifying the CRC when present."""
    _, rest = split_broker_entry_metadata(payload)
    if _starts_with(rest, MAGIC_CRC32C):
        body = _checked_body(rest)
        metadata = _parse_metadata(body)
        return SendPayload(bytes(rest), metadata)
    metadata = _parse_metadata(rest)
    return SendPayload(_CRC_HEADER.pack(MAGIC_CRC32C, crc32c(rest)) + bytes(rest), metadata)


def split_broker_entry_metadata(payload: memoryview) -> tuple[pb.BrokerEntryMetadata | None, memoryview]:
    """Split off a leading ``0x0e02`` broker-entry-metadata block, if there is one."""
    if not _starts_with(payload, MAGIC_BROKER_ENTRY_METADATA):
        return None, payload
    if len(payload) < 6:
        raise MalformedFrame("truncated broker entry metadata header")
    size: int = _U32.unpack_from(payload, 2)[0]
    end = 6 + size
    if end > len(payload):
        raise MalformedFrame(f"broker entry metadata size {size} exceeds the payload")
    bem = pb.BrokerEntryMetadata()
    _parse_into(bem, payload[6:end], "BrokerEntryMetadata")
    return bem, payload[end:]


def parse_entry_metadata(entry: Buffer) -> pb.MessageMetadata:
    """The MessageMetadata of a stored entry (the CRC is not checked: see ``verify_entry``)."""
    return _parse_metadata(_body(entry))


def entry_payload(entry: Buffer) -> memoryview:
    """The message body of an entry: everything after the metadata."""
    body = _body(entry)
    return body[_U32.size + _metadata_size(body) :]


def make_entry(metadata: pb.MessageMetadata, payload: Buffer) -> bytes:
    """Build an entry (magic, CRC, metadata, payload) from metadata and a message body."""
    raw = metadata.SerializeToString()
    head = _U32.pack(len(raw)) + raw
    crc = crc32c(payload, crc32c(head))
    return b"".join((_CRC_HEADER.pack(MAGIC_CRC32C, crc), head, payload))


def verify_entry(entry: Buffer) -> bool:
    """True when the entry carries the magic and a CRC that matches its bytes."""
    view = memoryview(entry)
    if len(view) < _CHECKSUM_HEADER_BYTES or not _starts_with(view, MAGIC_CRC32C):
        return False
    expected: int = _U32.unpack_from(view, 2)[0]
    return crc32c(view[_CHECKSUM_HEADER_BYTES:]) == expected


def _starts_with(view: memoryview, magic: int) -> bool:
    return len(view) >= 2 and (view[0] << 8 | view[1]) == magic


def _checked_body(rest: memoryview) -> memoryview:
    if len(rest) < _CHECKSUM_HEADER_BYTES:
        raise MalformedFrame("truncated checksum header")
    expected: int = _U32.unpack_from(rest, 2)[0]
    body = rest[_CHECKSUM_HEADER_BYTES:]
    actual = crc32c(body)
    if actual != expected:
        raise ChecksumMismatch(expected, actual)
    return body


def _body(entry: Buffer) -> memoryview:
    view = memoryview(entry)
    if _starts_with(view, MAGIC_CRC32C):
        return view[_CHECKSUM_HEADER_BYTES:]
    return view


def _metadata_size(body: memoryview) -> int:
    if len(body) < _U32.size:
        raise MalformedFrame("truncated metadata size")
    size: int = _U32.unpack_from(body)[0]
    if _U32.size + size > len(body):
        raise MalformedFrame(f"metadata size {size} exceeds the {len(body)} bytes available")
    return size


def _parse_metadata(body: memoryview) -> pb.MessageMetadata:
    size = _metadata_size(body)
    metadata = pb.MessageMetadata()
    _parse_into(metadata, body[_U32.size : _U32.size + size], "MessageMetadata")
    return metadata


def _parse_into(message: pb.MessageMetadata | pb.BrokerEntryMetadata, raw: memoryview, what: str) -> None:
    try:
        message.ParseFromString(raw)  # type: ignore[arg-type]  # upb parses any buffer, no copy
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise MalformedFrame(f"invalid {what}: {exc}") from exc
    if not message.IsInitialized():
        raise MalformedFrame(f"{what} is missing required fields")
