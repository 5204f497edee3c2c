"""MessageIdData helpers: uint64 on the wire, signed in magnetar.

Ledger and entry ids travel as proto uint64, but ``-1`` is meaningful (the earliest sentinel,
"no entry"), sent as 2^64-1. Convert at the edge with ``signed``/``unsigned``.
Knows nothing of cursors or positions beyond these conventions.
"""

from __future__ import annotations

from typing import Final

from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = [
    "EARLIEST",
    "LATEST",
    "is_earliest",
    "is_latest",
    "message_id",
    "signed",
    "unsigned",
]

_U64_RANGE: Final = 1 << 64
_I64_MAX: Final = (1 << 63) - 1

EARLIEST: Final = (-1, -1)
LATEST: Final = (_I64_MAX, _I64_MAX)


def signed(value: int) -> int:
    """Interpret a wire uint64 as int64 (2^64-1 becomes -1)."""
    return value - _U64_RANGE if value > _I64_MAX else value


def unsigned(value: int) -> int:
    """Encode an int64 as a wire uint64 (-1 becomes 2^64-1)."""
    return value % _U64_RANGE


def message_id(
    ledger_id: int, entry_id: int, *, partition: int | None = None, batch_index: int | None = None
) -> pb.MessageIdData:
    """Build a MessageIdData from signed ids; partition and batch index only when given."""
    mid = pb.MessageIdData(ledgerId=unsigned(ledger_id), entryId=unsigned(entry_id))
    if partition is not None:
        mid.partition = partition
    if batch_index is not None:
        mid.batch_index = batch_index
    return mid


def is_earliest(mid: pb.MessageIdData) -> bool:
    """The (-1, -1) sentinel: start from the first entry."""
    return (signed(mid.ledgerId), signed(mid.entryId)) == EARLIEST


def is_latest(mid: pb.MessageIdData) -> bool:
    """The (2^63-1, 2^63-1) sentinel: start after the last entry."""
    return (signed(mid.ledgerId), signed(mid.entryId)) == LATEST
