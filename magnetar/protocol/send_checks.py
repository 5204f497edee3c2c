"""Checks on a SEND's batch and chunk fields before the entry is stored.

A stored entry is delivered to every consumer of the topic, so a batch whose ``num_messages_in_batch``
is absurd, or chunk fields that no chunk could carry, would be receipted and then hurt each consumer that
reads it (the C++ client allocates by those counts). The rules are what an honest producer cannot break:

- ``SEND.num_messages`` is at least 1;
- a batch (``num_messages_in_batch`` present) holds at least one message and exactly ``num_messages``;
  each message of an uncompressed batch takes at least ``SINGLE_MESSAGE_BYTES_MIN`` bytes of the
  payload; a compressed batch declares an ``uncompressed_size`` within ``max_message_size`` that can
  hold them;
- a chunk is not a batch, carries a uuid, ``0 <= chunk_id < num_chunks_from_msg``, at least one byte
  per chunk and a total size within ``chunked_message_bytes_max``;
- every text field (``partition_key``, ``producer_name``, ``replicated_from``, properties, ...) is UTF-8:
  the protobuf runtime hands an invalid one back as bytes where every reader expects text (a Key_Shared
  dispatcher hashing the key stalled on one for ever).
"""

from __future__ import annotations

from typing import Literal

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from magnetar.protocol.errors import InvalidMessageMetadata
from magnetar.protocol.proto import PulsarApi_pb2 as pb

# a 4-byte size, then a SingleMessageMetadata holding at least its required payload_size (2 bytes)
SINGLE_MESSAGE_BYTES_MIN = 6
CHUNK_FIELDS: tuple[Literal["num_chunks_from_msg", "total_chunk_msg_size", "chunk_id"], ...] = (
    "num_chunks_from_msg", "total_chunk_msg_size", "chunk_id",
)


def check_send_metadata(
    metadata: pb.MessageMetadata,
    *,
    num_messages: int,
    payload_bytes: int,
    max_message_size: int,
    chunked_message_bytes_max: int,
) -> None:
    """Raise InvalidMessageMetadata when the batch or chunk fields cannot describe this payload, or a text
    field is not UTF-8."""
    check_text(metadata)
    if num_messages < 1:
        raise InvalidMessageMetadata(f"SEND num_messages must be at least 1, got {num_messages}")
    batched = metadata.HasField("num_messages_in_batch")
    if batched:
        _check_batch(metadata, num_messages, payload_bytes, max_message_size)
    if metadata.HasField("num_chunks_from_msg") or metadata.HasField("total_chunk_msg_size") or metadata.HasField(
        "chunk_id"
    ):  # CHUNK_FIELDS, spelled out: this runs once per SEND
        if batched and metadata.num_messages_in_batch != 1:
            raise InvalidMessageMetadata("a chunk cannot be a batch")
        _check_chunk(metadata, payload_bytes, chunked_message_bytes_max)


def check_text(message: Message) -> None:
    """InvalidMessageMetadata unless every string field set in ``message`` (nested messages too) is UTF-8."""
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            for text in (value if field.is_repeated else (value,)):
                if isinstance(text, bytes):  # how the runtime returns a string field that is not UTF-8
                    raise InvalidMessageMetadata(f"{field.name} is not valid UTF-8")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in (value if field.is_repeated else (value,)):
                check_text(item)


def _check_batch(metadata: pb.MessageMetadata, num_messages: int, payload_bytes: int, max_message_size: int) -> None:
    count = metadata.num_messages_in_batch
    if count < 1:
        raise InvalidMessageMetadata(f"num_messages_in_batch must be at least 1, got {count}")
    if count != num_messages:
        raise InvalidMessageMetadata(
            f"num_messages_in_batch {count} disagrees with the SEND's num_messages {num_messages}")
    if metadata.compression == pb.NONE:
        holds = payload_bytes // SINGLE_MESSAGE_BYTES_MIN
        if count > holds:
            raise InvalidMessageMetadata(
                f"a batch of {count} messages cannot fit an uncompressed payload of {payload_bytes} bytes")
        return
    size = metadata.uncompressed_size
    if size > max_message_size:
        raise InvalidMessageMetadata(f"uncompressed_size {size} exceeds the maximum message size {max_message_size}")
    if count > size // SINGLE_MESSAGE_BYTES_MIN:
        raise InvalidMessageMetadata(f"a batch of {count} messages cannot fit {size} uncompressed bytes")


def _check_chunk(metadata: pb.MessageMetadata, payload_bytes: int, chunked_message_bytes_max: int) -> None:
    chunks, total, chunk_id = metadata.num_chunks_from_msg, metadata.total_chunk_msg_size, metadata.chunk_id
    if not metadata.HasField("uuid") or not all(metadata.HasField(f) for f in CHUNK_FIELDS):
        raise InvalidMessageMetadata("a chunk needs uuid, num_chunks_from_msg, total_chunk_msg_size and chunk_id")
    if not 0 < total <= chunked_message_bytes_max:
        raise InvalidMessageMetadata(
            f"total_chunk_msg_size {total} is outside 1..{chunked_message_bytes_max} bytes")
    if not 0 < chunks <= total:
        raise InvalidMessageMetadata(f"num_chunks_from_msg {chunks} is outside 1..{total} (one byte per chunk)")
    if not 0 <= chunk_id < chunks:
        raise InvalidMessageMetadata(f"chunk_id {chunk_id} is outside 0..{chunks - 1}")
    if payload_bytes > total:
        raise InvalidMessageMetadata(f"a chunk of {payload_bytes} bytes exceeds total_chunk_msg_size {total}")
