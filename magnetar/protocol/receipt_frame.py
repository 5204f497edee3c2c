"""SEND_RECEIPT frames written without building a protobuf object per receipt.

Every stored SEND is answered by one receipt; building the BaseCommand and serializing it through protobuf
cost more than the rest of the answer. The bytes here are exactly what
``encode_command(commands.send_receipt(...))`` produces (fields in number order; a unit test holds the two
to byte equality). Every length in a receipt is under 128 (the largest command is 59 bytes), so each is one
varint byte.
"""

from __future__ import annotations

import struct
from typing import Final

from magnetar.protocol.ids import unsigned
from magnetar.protocol.message_frame import varint

_FRAME_SIZES: Final = struct.Struct(">II")
_BASE_RECEIPT: Final = b"\x08\x07\x3a"  # BaseCommand.type = SEND_RECEIPT (7), then field 7, length-delimited


def send_receipt_frame(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int | None = None
) -> bytes:
    """The complete frame (sizes and command) of a receipt for an entry stored at ``ledger_id:entry_id``."""
    message_id = b"\x08" + varint(unsigned(ledger_id)) + b"\x10" + varint(unsigned(entry_id))
    body = b"".join((
        b"\x08", varint(producer_id), b"\x10", varint(sequence_id), b"\x1a", bytes((len(message_id),)), message_id,
        b"" if highest_sequence_id is None else b"\x20" + varint(highest_sequence_id),
    ))
    command_size = len(_BASE_RECEIPT) + 1 + len(body)
    return b"".join((_FRAME_SIZES.pack(4 + command_size, command_size), _BASE_RECEIPT, bytes((len(body),)), body))
