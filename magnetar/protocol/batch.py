"""Batch payloads: several messages in one entry, each with its SingleMessageMetadata.

Layout (uncompressed): repeated ``u32 singleMetaSize | SingleMessageMetadata | body``, where the
body length is ``SingleMessageMetadata.payload_size``. The outer MessageMetadata's
``num_messages_in_batch`` says how many; its mere presence marks a batch.

Knows nothing of compression (decompress first) or of the outer metadata.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from google.protobuf.message import DecodeError

from magnetar.protocol.errors import LocalProtocolError, MalformedFrame
from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = ["BATCH_MESSAGES_MAX", "build_batch", "split_batch"]

# Far above any client's batching_max_messages; bounds the work a hostile count can ask for.
BATCH_MESSAGES_MAX: Final = 1_000_000
_U32: Final = struct.Struct(">I")


def build_batch(messages: Sequence[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    """Serialise messages into a batch payload; ``payload_size`` is set from each body."""
    parts: list[bytes] = []
    for single, body in messages:
        meta = pb.SingleMessageMetadata()
        meta.CopyFrom(single)
        meta.payload_size = len(body)
        raw = meta.SerializeToString()
        parts += (_U32.pack(len(raw)), raw, body)
    if not parts:
        raise LocalProtocolError("a batch needs at least one message")
    return b"".join(parts)


def split_batch(
    payload: bytes | bytearray | memoryview, count: int
) -> list[tuple[pb.SingleMessageMetadata, memoryview]]:
    """Split an uncompressed batch of ``count`` messages; bodies are views into ``payload``."""
    if not 0 < count <= BATCH_MESSAGES_MAX:
        raise MalformedFrame(f"batch message count {count} outside 1..{BATCH_MESSAGES_MAX}")
    view = memoryview(payload)
    out: list[tuple[pb.SingleMessageMetadata, memoryview]] = []
    pos = 0
    for index in range(count):
        single, pos = _read_one(view, pos, index)
        end = pos + single.payload_size
        out.append((single, view[pos:end]))
        pos = end
    if pos != len(view):
        raise MalformedFrame(f"{len(view) - pos} bytes left after {count} batched messages")
    return out


def _read_one(view: memoryview, pos: int, index: int) -> tuple[pb.SingleMessageMetadata, int]:
    if pos + _U32.size > len(view):
        raise MalformedFrame(f"batch truncated before message {index}")
    size: int = _U32.unpack_from(view, pos)[0]
    start = pos + _U32.size
    end = start + size
    if end > len(view):
        raise MalformedFrame(f"metadata of batched message {index} overruns the payload")
    single = pb.SingleMessageMetadata()
    try:
        single.ParseFromString(view[start:end])  # type: ignore[arg-type]  # upb parses any buffer
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise MalformedFrame(f"invalid metadata of batched message {index}: {exc}") from exc
    if not single.IsInitialized():
        raise MalformedFrame(f"batched message {index} lacks payload_size")
    if not 0 <= single.payload_size <= len(view) - end:
        raise MalformedFrame(f"body of batched message {index} overruns the payload")
    return single, end
