"""Framing: split a byte stream into Pulsar frames, and encode commands into frames.

A frame is ``u32 totalSize | u32 commandSize | BaseCommand | [payload]`` (big-endian sizes); only
SEND and MESSAGE carry a payload, which this module hands over untouched (``entry.py`` parses it).

The decoder is sans-IO: ``feed`` bytes in, ``next_frame`` frames out. It validates each size
header as soon as its four bytes arrive, so an oversized frame is refused before its body is
buffered. Contract that keeps the buffer bounded: drain ``next_frame()`` until it returns None
before feeding again; then the decoder never retains more than one incomplete frame
(at most ``max_frame_bytes + 4`` bytes) between calls.

Knows nothing of sockets, connections, or what a command means.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError, EncodeError

from magnetar.protocol.errors import FrameTooLarge, LocalProtocolError, MalformedFrame
from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_BYTES_MIN",
    "FRAME_PADDING_BYTES",
    "Frame",
    "FrameDecoder",
    "encode_command",
    "encode_payload_command",
    "max_frame_bytes_for",
]

DEFAULT_MAX_MESSAGE_SIZE: Final = 5 * 1024 * 1024
FRAME_PADDING_BYTES: Final = 10 * 1024
# Smallest totalSize that can hold a commandSize and a BaseCommand with its type (tag + varint).
FRAME_BYTES_MIN: Final = 4 + 2

_SIZE_BYTES: Final = 4
_U32: Final = struct.Struct(">I")
_U32_PAIR: Final = struct.Struct(">II")
_PAYLOAD_TYPES: Final = frozenset({pb.BaseCommand.SEND, pb.BaseCommand.MESSAGE})
# BaseCommand's sub-message field number equals its type number.
_FIELD_BY_TYPE: Final[dict[int, str]] = {
    field.number: field.name for field in pb.BaseCommand.DESCRIPTOR.fields if field.number >= 2
}


def max_frame_bytes_for(max_message_size: int) -> int:
    """Largest ``totalSize`` to accept when messages may be ``max_message_size`` bytes."""
    return max_message_size + FRAME_PADDING_BYTES


@dataclass(slots=True)  # not frozen: one per frame, and a frozen init costs about three times as much
class Frame:
    """One decoded frame: the command, and for SEND/MESSAGE the bytes after it."""

    command: pb.BaseCommand
    payload: memoryview | None = None


class FrameDecoder:
    """Incremental frame decoder over a bounded buffer of received chunks."""

    __slots__ = ("_buffered", "_chunks", "_head", "_max_frame_bytes", "_need")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < FRAME_BYTES_MIN:
            raise ValueError(f"max_frame_bytes must be at least {FRAME_BYTES_MIN}")
        self._max_frame_bytes = max_frame_bytes
        self._chunks: deque[bytes] = deque()
        self._head = 0  # read offset into self._chunks[0]
        self._buffered = 0  # unconsumed bytes across all chunks
        self._need: int | None = None  # totalSize of the frame at the head, once known

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._buffered

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes. Raises FrameTooLarge/MalformedFrame on a bad size header."""
        if self._complete_frame_pending():
            raise LocalProtocolError("drain next_frame() until None before feeding more data")
        if not data:
            return
        self._chunks.append(bytes(data))
        self._buffered += len(data)
        self._read_header()

    def next_frame(self) -> Frame | None:
        """Return the next complete frame, or None when more bytes are needed."""
        need = self._read_header()
        if need is None or self._buffered < _SIZE_BYTES + need:
            return None
        body = self._take(_SIZE_BYTES + need)[_SIZE_BYTES:]
        self._need = None
        return decode_frame_body(body)

    def _complete_frame_pending(self) -> bool:
        return self._need is not None and self._buffered >= _SIZE_BYTES + self._need

    def _read_header(self) -> int | None:
        if self._need is None and self._buffered >= _SIZE_BYTES:
            size: int = _U32.unpack(self._peek(_SIZE_BYTES))[0]
            if size > self._max_frame_bytes:
                raise FrameTooLarge(size, self._max_frame_bytes)
            if size < FRAME_BYTES_MIN:
                raise MalformedFrame(f"frame size {size} is below the minimum of {FRAME_BYTES_MIN}")
            self._need = size
        return self._need

    def _peek(self, n: int) -> bytes:
        first = self._chunks[0]
        if len(first) - self._head >= n:
            return first[self._head : self._head + n]
        return bytes(self._gather(n, consume=False))

    def _take(self, n: int) -> memoryview:
        first = self._chunks[0]
        if len(first) - self._head >= n:
            # Zero copy: a view into the received chunk.
            view = memoryview(first)[self._head : self._head + n]
            self._advance_first(n)
            return view
        return memoryview(self._gather(n, consume=True))

    def _advance_first(self, n: int) -> None:
        self._head += n
        self._buffered -= n
        if self._head == len(self._chunks[0]):
            self._chunks.popleft()
            self._head = 0

    def _gather(self, n: int, *, consume: bool) -> bytearray:
        out = bytearray()
        head = self._head
        for chunk in self._chunks:
            piece = memoryview(chunk)[head : head + n - len(out)]
            out += piece
            head = 0
            if len(out) == n:
                break
        if consume:
            while n:
                step = min(n, len(self._chunks[0]) - self._head)
                self._advance_first(step)
                n -= step
        return out


def decode_frame_body(body: memoryview) -> Frame:
    """Decode the bytes after ``totalSize``: command size, command, optional payload."""
    if len(body) < _SIZE_BYTES:
        raise MalformedFrame("frame too short for a command size")
    command_size: int = _U32.unpack_from(body)[0]
    command_end = _SIZE_BYTES + command_size
    if command_end > len(body):
        raise MalformedFrame(f"command size {command_size} exceeds frame size {len(body)}")
    command = _parse_command(body[_SIZE_BYTES:command_end])
    rest = body[command_end:]
    if command.type in _PAYLOAD_TYPES:
        if not rest:
            raise MalformedFrame(f"{pb.BaseCommand.Type.Name(command.type)} frame without a payload")
        return Frame(command, rest)
    if rest:
        raise MalformedFrame(f"{len(rest)} unexpected bytes after a command without payload")
    return Frame(command, None)


def _parse_command(raw: memoryview) -> pb.BaseCommand:
    command = pb.BaseCommand()
    try:
        command.ParseFromString(raw)  # type: ignore[arg-type]  # upb parses any buffer, no copy
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise MalformedFrame(f"invalid BaseCommand: {exc}") from exc
    if not command.IsInitialized():
        raise MalformedFrame("BaseCommand is missing required fields")
    field = _FIELD_BY_TYPE.get(command.type)
    if field is None or not command.HasField(field):  # type: ignore[arg-type]
        raise MalformedFrame(f"command of type {command.type} lacks its sub-message")
    return command


def _serialize(command: pb.BaseCommand) -> bytes:
    try:
        return command.SerializeToString()
    except EncodeError as exc:
        raise LocalProtocolError(f"cannot encode command: {exc}") from exc


def encode_command(command: pb.BaseCommand) -> bytes:
    """Encode a command without payload as a complete frame."""
    raw = _serialize(command)
    return _U32_PAIR.pack(_SIZE_BYTES + len(raw), len(raw)) + raw


def encode_payload_command(command: pb.BaseCommand, entry: bytes | memoryview) -> bytes:
    """Encode a SEND or MESSAGE frame whose payload is a stored entry (magic+crc onwards)."""
    if command.type not in _PAYLOAD_TYPES:
        raise LocalProtocolError("only SEND and MESSAGE carry a payload")
    raw = _serialize(command)
    header = _U32_PAIR.pack(_SIZE_BYTES + len(raw) + len(entry), len(raw))
    return b"".join((header, raw, entry))
