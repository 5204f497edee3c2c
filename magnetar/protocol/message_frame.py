"""MESSAGE frames written without building a protobuf object per entry.

Dispatch sends one MESSAGE frame per stored entry: the BaseCommand (type MESSAGE, the consumer id, the
entry's message id, the consumer's partition) followed by the stored bytes unchanged. Building and
serializing that command through protobuf costs more than everything else dispatch does per entry, and
all but two of its fields are the same for every frame a consumer receives. :class:`MessageFrames` keeps
the constant parts per consumer and writes the varints of the entry's ledger and entry id around them.

The bytes are exactly what ``encode_payload_command(commands.message(...), entry)`` produces (fields in
number order, ``partition`` always present, as an int32 sign-extended to ten bytes when negative); a unit
test holds the two to byte equality. A redelivery count or a batch ack set goes through protobuf.
:meth:`MessageFrames.header` gives the bytes before the entry, so the entry itself is never copied into a
frame: the connection writes both with one ``writev``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from magnetar.protocol import commands
from magnetar.protocol.ids import unsigned

_U64_MASK: Final = (1 << 64) - 1
_FRAME_SIZES: Final = struct.Struct(">II")
_BASE_MESSAGE: Final = b"\x08\x09\x4a"  # BaseCommand.type = MESSAGE (9), then field 9 (message), length-delimited
_SMALL: Final = tuple(bytes((n,)) for n in range(0x80))


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int below 2**64."""
    if value < 0x80:
        return _SMALL[value]
    if value < 0x4000:  # the common sizes of entry ids, unrolled
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x20_0000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value >= 0x80:  # bounded: at most ten turns for a 64-bit value
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class MessageFrames:
    """MESSAGE frames for one consumer: the constant fields encoded once."""

    __slots__ = ("_consumer_id", "_head", "_ledger_field", "_ledger_id", "_partition", "_partition_field")

    def __init__(self, consumer_id: int, partition: int) -> None:
        self._consumer_id = consumer_id
        self._partition = partition
        self._head = b"\x08" + varint(consumer_id) + b"\x12"  # CommandMessage.consumer_id, then message_id
        self._partition_field = b"\x18" + varint(partition & _U64_MASK)  # MessageIdData.partition (int32)
        self._ledger_id: int | None = None  # the ledger whose id field is cached
        self._ledger_field = b""

    def frame(
        self, ledger_id: int, entry_id: int, entry: bytes, redelivery_count: int = 0,
        ack_set: Sequence[int] | None = None,
    ) -> bytes:
        """The complete frame: sizes, command, then ``entry`` (the stored bytes, magic onwards)."""
        return self.header(ledger_id, entry_id, len(entry), redelivery_count, ack_set) + entry

    def header(
        self, ledger_id: int, entry_id: int, entry_size: int, redelivery_count: int = 0,
        ack_set: Sequence[int] | None = None,
    ) -> bytes:
        """Everything of the frame before the entry's bytes (which can then go out without a copy)."""
        if redelivery_count or ack_set:
            raw = commands.message(self._consumer_id, ledger_id, entry_id, self._partition,
                                   redelivery_count=redelivery_count, ack_set=ack_set).SerializeToString()
            return _FRAME_SIZES.pack(4 + len(raw) + entry_size, len(raw)) + raw
        if ledger_id != self._ledger_id:  # every entry of a ledger shares its id's encoding
            self._ledger_id, self._ledger_field = ledger_id, b"\x08" + varint(unsigned(ledger_id))
        entry_field = varint(unsigned(entry_id))
        # each length below is under 128 (a message id is at most 33 bytes), so it is one varint byte
        id_size = len(self._ledger_field) + 1 + len(entry_field) + len(self._partition_field)
        body_size = len(self._head) + 1 + id_size
        command_size = len(_BASE_MESSAGE) + 1 + body_size
        return b"".join((
            _FRAME_SIZES.pack(4 + command_size + entry_size, command_size), _BASE_MESSAGE, _SMALL[body_size],
            self._head, _SMALL[id_size], self._ledger_field, b"\x10", entry_field, self._partition_field,
        ))
