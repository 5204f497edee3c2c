"""Building what a producer sends: message metadata, batches, compression and chunks.

Pure logic over ``magnetar.protocol``: no asyncio, no connection. A ``BatchBuilder`` collects
messages up to ``max_messages`` / ``max_bytes`` and turns them into one entry whose outer metadata
takes key, ordering key and sequence id from the first message, as the reference client does. A batch holds
the messages of one transaction (or of none): a message of another one does not fit, and the entry's
metadata carries the transaction's id, as the Java client batches transactional sends.
Each message carries an opaque ``token`` (the producer's future) that comes back out in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from magnetar.client._config import BatchingConfig
from magnetar.protocol import build_batch, compress, make_entry, pb

__all__ = ["BatchBuilder", "OutgoingMessage", "build_entry", "message_metadata", "split_chunks"]

K = TypeVar("K")


@dataclass(slots=True)
class OutgoingMessage(Generic[K]):
    body: bytes
    sequence_id: int
    token: K
    key: str | None = None
    ordering_key: bytes | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    event_time_ms: int = 0
    deliver_at_ms: int | None = None
    txn_id: tuple[int, int] | None = None  # (most, least): batched only with messages of the same transaction

    @property
    def size_bytes(self) -> int:
        return len(self.body) + sum(len(k) + len(v) for k, v in self.properties.items()) + 16


def message_metadata(msg: OutgoingMessage[K], producer_name: str, publish_time_ms: int) -> pb.MessageMetadata:
    """Metadata for one unbatched message: the three required fields plus what the user set."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=msg.sequence_id, publish_time=publish_time_ms
    )
    for k, v in msg.properties.items():
        meta.properties.add(key=k, value=v)
    if msg.key is not None:
        meta.partition_key = msg.key
    if msg.ordering_key is not None:
        meta.ordering_key = msg.ordering_key
    if msg.event_time_ms:
        meta.event_time = msg.event_time_ms
    if msg.deliver_at_ms is not None:
        meta.deliver_at_time = msg.deliver_at_ms
    if msg.txn_id is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = msg.txn_id
    return meta


def _single(msg: OutgoingMessage[K]) -> pb.SingleMessageMetadata:
    single = pb.SingleMessageMetadata(sequence_id=msg.sequence_id)
    for k, v in msg.properties.items():
        single.properties.add(key=k, value=v)
    if msg.key is not None:
        single.partition_key = msg.key
    if msg.ordering_key is not None:
        single.ordering_key = msg.ordering_key
    if msg.event_time_ms:
        single.event_time = msg.event_time_ms
    return single


def build_entry(meta: pb.MessageMetadata, body: bytes, compression: int) -> bytes:
    """Compress ``body`` if asked (recording codec and size in ``meta``) and frame the entry."""
    if compression != pb.NONE:
        meta.compression = compression  # type: ignore[assignment]
        meta.uncompressed_size = len(body)
        body = compress(compression, body)
    return make_entry(meta, body)


class BatchBuilder(Generic[K]):
    """Accumulates messages for one batch; bounded by ``max_messages`` and ``max_bytes``."""

    def __init__(self, config: BatchingConfig) -> None:
        self._config = config
        self._messages: list[OutgoingMessage[K]] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    @property
    def txn_id(self) -> tuple[int, int] | None:
        """The transaction of the messages in the batch (None: none, or the batch is empty)."""
        return self._messages[0].txn_id if self._messages else None

    def has_room_for(self, msg: OutgoingMessage[K]) -> bool:
        if not self._messages:
            return True
        return (
            msg.txn_id == self._messages[0].txn_id
            and len(self._messages) < self._config.max_messages
            and self._bytes + msg.size_bytes <= self._config.max_bytes
        )

    def add(self, msg: OutgoingMessage[K]) -> bool:
        """Add a message (caller checked ``has_room_for``); True when the batch is now full."""
        assert self.has_room_for(msg), "batch overflow"
        self._messages.append(msg)
        self._bytes += msg.size_bytes
        return len(self._messages) >= self._config.max_messages or self._bytes >= self._config.max_bytes

    def take(
        self, producer_name: str, publish_time_ms: int, compression: int
    ) -> tuple[bytes, list[OutgoingMessage[K]]]:
        """The batch entry and its messages in order; the builder is empty afterwards."""
        messages, self._messages, self._bytes = self._messages, [], 0
        assert messages, "take() on an empty batch"
        first = messages[0]
        meta = pb.MessageMetadata(
            producer_name=producer_name,
            sequence_id=first.sequence_id,
            publish_time=publish_time_ms,
            num_messages_in_batch=len(messages),
        )
        if first.txn_id is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = first.txn_id
        if first.key is not None:
            meta.partition_key = first.key
        if first.ordering_key is not None:
            meta.ordering_key = first.ordering_key
        payload = build_batch([(_single(m), m.body) for m in messages])
        return build_entry(meta, payload, compression), messages


def split_chunks(
    meta: pb.MessageMetadata, body: bytes, max_message_size: int, uuid: str
) -> list[bytes]:
    """Entries for a chunked message: ``body`` (already compressed) sliced to fit the limit."""
    room = max_message_size - meta.ByteSize() - 64  # the chunk fields and the frame header
    assert room > 0, "max_message_size too small for chunking"
    pieces = [body[i : i + room] for i in range(0, len(body), room)] or [b""]
    entries = []
    for chunk_id, piece in enumerate(pieces):
        chunk_meta = pb.MessageMetadata()
        chunk_meta.CopyFrom(meta)
        chunk_meta.uuid = uuid
        chunk_meta.num_chunks_from_msg = len(pieces)
        chunk_meta.total_chunk_msg_size = len(body)
        chunk_meta.chunk_id = chunk_id
        entries.append(make_entry(chunk_meta, piece))
    return entries
