"""The protocol layer's exception tree: one root, two sides, data carried on the exception.

    ProtocolError
    ├── PeerProtocolError          the peer sent bytes we cannot accept
    │   ├── FrameTooLarge          a frame size above the configured limit
    │   ├── MalformedFrame         bad sizes, bad protobuf, missing required fields
    │   ├── ChecksumMismatch       CRC32C over metadata+payload does not match
    │   ├── CompressionError       a payload that cannot be (de)compressed within limits
    │   └── InvalidMessageMetadata batch or chunk fields that contradict the SEND or the payload
    └── LocalProtocolError         we tried to send something invalid

This module knows nothing of connections or of how errors are reported to the peer: the server
layer decides whether a PeerProtocolError closes the connection or becomes a SEND_ERROR.
"""

from __future__ import annotations

__all__ = [
    "ChecksumMismatch",
    "CompressionError",
    "FrameTooLarge",
    "InvalidMessageMetadata",
    "LocalProtocolError",
    "MalformedFrame",
    "PeerProtocolError",
    "ProtocolError",
]


class ProtocolError(Exception):
    """Root of every error raised by magnetar.protocol."""


class PeerProtocolError(ProtocolError):
    """The peer sent bytes that violate the protocol."""


class FrameTooLarge(PeerProtocolError):
    """A frame announced more bytes than the configured limit allows."""

    def __init__(self, frame_bytes: int, frame_bytes_max: int) -> None:
        super().__init__(f"frame of {frame_bytes} bytes exceeds the limit of {frame_bytes_max} bytes")
        self.frame_bytes = frame_bytes
        self.frame_bytes_max = frame_bytes_max


class MalformedFrame(PeerProtocolError):
    """A frame, entry or batch whose structure is invalid."""


class ChecksumMismatch(PeerProtocolError):
    """The CRC32C carried in a payload does not match the bytes it covers."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"checksum mismatch: carried 0x{expected:08x}, computed 0x{actual:08x}")
        self.expected = expected
        self.actual = actual


class CompressionError(PeerProtocolError):
    """A payload could not be decompressed, or its size is wrong or above the limit."""

    def __init__(self, message: str, *, codec: int | None = None, size_bytes: int | None = None) -> None:
        super().__init__(message)
        self.codec = codec
        self.size_bytes = size_bytes


class LocalProtocolError(ProtocolError):
    """We tried to encode something the protocol does not allow."""


class InvalidMessageMetadata(PeerProtocolError):
    """Message metadata whose batch or chunk fields contradict the SEND command or the payload."""
