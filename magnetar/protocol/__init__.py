"""magnetar.protocol: the sans-IO codec for Pulsar's binary protocol.

Bytes in, objects out: frames, commands, entries (stored message bytes), batches, checksums and
compression. No sockets, no asyncio, no storage; the server layer drives it.
"""

from magnetar.protocol.checksum import crc32c
from magnetar.protocol.errors import (
    ChecksumMismatch,
    CompressionError,
    FrameTooLarge,
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
from magnetar.protocol.proto import PulsarApi_pb2 as pb
from magnetar.protocol.proto import PulsarMarkers_pb2 as markers_pb

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING_BYTES",
    "ChecksumMismatch",
    "CompressionError",
    "Frame",
    "FrameDecoder",
    "FrameTooLarge",
    "LocalProtocolError",
    "MalformedFrame",
    "PeerProtocolError",
    "ProtocolError",
    "crc32c",
    "encode_command",
    "encode_payload_command",
    "markers_pb",
    "max_frame_bytes_for",
    "pb",
]
