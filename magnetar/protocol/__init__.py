"""magnetar.protocol: the sans-IO codec for Pulsar's binary protocol.

Bytes in, objects out: frames, commands, entries (stored message bytes), batches, checksums,
compression and markers. No sockets, no asyncio, no storage; the server layer drives it.

    decoder = FrameDecoder(max_frame_bytes_for(max_message_size))
    decoder.feed(data)
    while (frame := decoder.next_frame()) is not None: ...
    encode_command(commands.pong())

``commands`` and ``txn_commands`` (command builders), ``ids`` (MessageIdData helpers), ``compression`` and ``markers``
are exposed as modules; ``pb`` and ``markers_pb`` are the generated protobuf modules. ``ServerErrorCode`` is the one
registry of the wire's error codes (name, retriable, look up again).
"""

from magnetar.protocol import commands, compression, ids, markers, txn_commands
from magnetar.protocol.batch import build_batch, split_batch
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.compression import compress, decompress
from magnetar.protocol.entry import (
    SendPayload,
    entry_payload,
    make_entry,
    parse_entry_metadata,
    parse_send_payload,
    split_broker_entry_metadata,
    verify_entry,
)
from magnetar.protocol.errors import (
    ChecksumMismatch,
    CompressionError,
    FrameTooLarge,
    InvalidMessageMetadata,
    LocalProtocolError,
    MalformedFrame,
    PeerProtocolError,
    ProtocolError,
)
from magnetar.protocol.frames import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING_BYTES,
    Frame,
    FrameDecoder,
    encode_command,
    encode_payload_command,
    max_frame_bytes_for,
)
from magnetar.protocol.markers import is_marker, make_marker_entry
from magnetar.protocol.proto import PulsarApi_pb2 as pb
from magnetar.protocol.proto import PulsarMarkers_pb2 as markers_pb
from magnetar.protocol.send_checks import check_send_metadata
from magnetar.protocol.server_errors import ServerErrorCode

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING_BYTES",
    "ChecksumMismatch",
    "CompressionError",
    "Frame",
    "FrameDecoder",
    "FrameTooLarge",
    "InvalidMessageMetadata",
    "LocalProtocolError",
    "MalformedFrame",
    "PeerProtocolError",
    "ProtocolError",
    "SendPayload",
    "ServerErrorCode",
    "build_batch",
    "check_send_metadata",
    "commands",
    "compress",
    "compression",
    "crc32c",
    "decompress",
    "encode_command",
    "encode_payload_command",
    "entry_payload",
    "ids",
    "is_marker",
    "make_entry",
    "make_marker_entry",
    "markers",
    "markers_pb",
    "max_frame_bytes_for",
    "parse_entry_metadata",
    "parse_send_payload",
    "pb",
    "split_batch",
    "split_broker_entry_metadata",
    "txn_commands",
    "verify_entry",
]
