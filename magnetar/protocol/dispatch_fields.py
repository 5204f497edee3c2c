"""The few MessageMetadata fields dispatch needs, read straight from a stored entry's bytes.

Dispatch looks at every entry it reads but needs only ``num_messages_in_batch`` (11) and
``deliver_at_time`` (19), and whether the entry is a marker (``marker_type``, 20). Building a full
protobuf message for that costs more than walking the metadata's tags, so :func:`dispatch_fields`
walks them, skipping every other field by its wire type. Anything unusual (a marker, a group, a varint
longer than ten bytes, a field running past the metadata, no CRC magic) returns None and the caller
parses the whole metadata as before; the results equal protobuf's (a property test checks it).
Stored entries were parsed and validated when published, so required fields are not checked here.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["dispatch_fields"]

_U32: Final = struct.Struct(">I")
_METADATA_AT: Final = 10  # magic (2) + crc (4) + metadata size (4)
_NUM_MESSAGES_TAG: Final = 11 << 3  # varint
_DELIVER_AT_TAG: Final = 19 << 3  # varint
_MARKER_FIELD: Final = 20


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def dispatch_fields(entry: bytes) -> tuple[int, int | None] | None:
    """(num_messages_in_batch as stored, deliver_at_time or None), or None: parse the metadata instead."""
    if len(entry) < _METADATA_AT or entry[0] != 0x0E or entry[1] != 0x01:
        return None
    end = _METADATA_AT + _U32.unpack_from(entry, 6)[0]
    if end > len(entry):
        return None
    num = 1
    deliver_at: int | None = None
    i = _METADATA_AT
    while i < end:
        key = entry[i]
        i += 1
        if key >= 0x80:  # fields 16..2047 take a two-byte tag; longer ones are left to protobuf
            if i >= end or entry[i] >= 0x80:
                return None
            key = (key & 0x7F) | entry[i] << 7
            i += 1
        if key < 8 or key >> 3 == _MARKER_FIELD:
            return None
        wire = key & 7
        if wire == 0 or wire == 2:
            value = entry[i] if i < end else 0x80
            i += 1
            if value >= 0x80:  # a multi-byte varint (one byte is the common case)
                value, i = _long_varint(entry, i, end, value & 0x7F)
                if i < 0:
                    return None
            if wire == 2:
                i += value
            elif key == _NUM_MESSAGES_TAG:
                num = _signed(value, 32)
            elif key == _DELIVER_AT_TAG:
                deliver_at = _signed(value, 64)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            return None  # groups: let protobuf decide
    return (num, deliver_at) if i == end else None


def _long_varint(entry: bytes, i: int, end: int, value: int) -> tuple[int, int]:
    """The rest of a varint whose first seven bits are ``value``; index -1 when it is cut off or too long."""
    shift = 7
    while i < end and shift <= 63:
        b = entry[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
    return 0, -1
