"""Turning a MESSAGE frame into application messages: checksum, decompression, batches, chunks.

Pure logic over ``magnetar.protocol``: verifies the CRC, decompresses, splits batches (skipping
indexes cleared in the broker's ``ack_set``), reassembles chunks (at most
``max_pending_chunked_messages`` in progress, oldest dropped) and drops messages before a start
id. Reports how many permits the dropped ones free. Knows nothing of queues or connections.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from magnetar.client._messages import Message, MessageId
from magnetar.protocol import (
    ProtocolError,
    decompress,
    entry_payload,
    parse_entry_metadata,
    pb,
    split_batch,
    verify_entry,
)

__all__ = ["ChunkAssembler", "Decoded", "StartFilter", "decode_entry", "decode_stored_entry"]


@dataclass(slots=True)
class Decoded:
    messages: list[Message] = field(default_factory=list)
    discarded: int = 0  # messages the application will never see (their permits come back)
    validation_error: int | None = None  # for ACK(validation_error) of a corrupt entry
    entry_id: MessageId | None = None


@dataclass(frozen=True, slots=True)
class StartFilter:
    """Drop what lies before ``start`` (or at it, unless inclusive); a batch-less start covers its entry."""

    start: MessageId
    inclusive: bool

    def drops(self, mid: MessageId) -> bool:
        s = self.start
        if s.batch_index < 0 or mid.batch_index < 0:
            return mid.entry < s.entry or (mid.entry == s.entry and not self.inclusive)
        key, start_key = (mid.ledger_id, mid.entry_id, mid.batch_index), (s.ledger_id, s.entry_id, s.batch_index)
        return key < start_key or (key == start_key and not self.inclusive)


@dataclass(slots=True)
class _Partial:
    metadata: pb.MessageMetadata
    parts: list[bytes]
    ids: list[MessageId]


class ChunkAssembler:
    def __init__(self, max_pending: int) -> None:
        assert max_pending > 0
        self._max_pending = max_pending
        self._partial: OrderedDict[str, _Partial] = OrderedDict()

    def add(self, meta: pb.MessageMetadata, body: bytes, mid: MessageId) -> _Partial | None:
        """Add one chunk; the completed message when this was its last chunk."""
        if meta.chunk_id == 0:
            self._partial.pop(meta.uuid, None)
            while len(self._partial) >= self._max_pending:  # bounded: evict the oldest
                self._partial.popitem(last=False)
            self._partial[meta.uuid] = _Partial(meta, [], [])
        partial = self._partial.get(meta.uuid)
        if partial is None or len(partial.parts) != meta.chunk_id:
            self._partial.pop(meta.uuid, None)  # a gap: the message cannot be rebuilt
            return None
        partial.parts.append(body)
        partial.ids.append(mid)
        if len(partial.parts) < meta.num_chunks_from_msg:
            return None
        return self._partial.pop(meta.uuid)


def decode_entry(
    topic: str,
    cmd: pb.CommandMessage,
    entry: memoryview,
    *,
    partition: int,
    max_message_bytes: int,
    chunks: ChunkAssembler,
    start: StartFilter | None,
) -> Decoded:
    out = Decoded()
    entry_id = MessageId.from_pb(cmd.message_id, partition=partition)
    entry_id = MessageId(entry_id.ledger_id, entry_id.entry_id, -1, partition)
    out.entry_id = entry_id
    if not verify_entry(entry):
        out.validation_error = pb.CommandAck.ChecksumMismatch
        out.discarded = 1
        return out
    meta = parse_entry_metadata(entry)
    body = bytes(entry_payload(entry))
    if meta.HasField("uuid") and meta.num_chunks_from_msg > 1:
        done = chunks.add(meta, body, entry_id)
        if done is None:
            out.discarded = 1
            return out
        meta, body = done.metadata, b"".join(done.parts)
        chunk_ids = tuple(done.ids)
        entry_id = chunk_ids[-1]
    else:
        chunk_ids = ()
    try:
        if meta.HasField("compression") and meta.compression != pb.NONE:
            body = decompress(meta.compression, body, meta.uncompressed_size, max_message_bytes)
        if meta.HasField("num_messages_in_batch"):
            _split(topic, cmd, meta, body, entry_id, start, out)
        else:
            _single(topic, cmd, meta, body, entry_id, chunk_ids, start, out)
    except ProtocolError:
        out.validation_error = pb.CommandAck.DecompressionError
        out.discarded = max(meta.num_messages_in_batch, 1)
        out.messages.clear()
    return out


def decode_stored_entry(topic: str, ledger_id: int, entry_id: int, entry: bytes | memoryview, *, partition: int,
                        max_message_bytes: int) -> Decoded:
    """An entry read from storage rather than from a MESSAGE frame (as a reader that reads ledgers directly
    does): checked and decoded as a delivered one would be. Chunks are not reassembled (one entry is one chunk:
    the caller decides what to do with chunked messages)."""
    cmd = pb.CommandMessage(consumer_id=0)
    cmd.message_id.ledgerId, cmd.message_id.entryId = ledger_id, entry_id
    return decode_entry(topic, cmd, memoryview(entry), partition=partition, max_message_bytes=max_message_bytes,
                        chunks=ChunkAssembler(1), start=None)


def _single(
    topic: str, cmd: pb.CommandMessage, meta: pb.MessageMetadata, body: bytes, mid: MessageId,
    chunk_ids: tuple[MessageId, ...], start: StartFilter | None, out: Decoded,
) -> None:
    if start is not None and start.drops(mid):
        out.discarded += 1
        return
    out.messages.append(Message(
        topic=topic,
        message_id=mid,
        data=body,
        properties={p.key: p.value for p in meta.properties},
        key=meta.partition_key if meta.HasField("partition_key") else None,
        ordering_key=meta.ordering_key if meta.HasField("ordering_key") else None,
        event_time_ms=meta.event_time,
        publish_time_ms=meta.publish_time,
        producer_name=meta.producer_name,
        sequence_id=meta.sequence_id,
        redelivery_count=cmd.redelivery_count,
        chunk_ids=chunk_ids,
    ))


def _split(
    topic: str, cmd: pb.CommandMessage, meta: pb.MessageMetadata, body: bytes, entry_id: MessageId,
    start: StartFilter | None, out: Decoded,
) -> None:
    count = meta.num_messages_in_batch
    acked_mask = _unacked_mask(cmd.ack_set)
    for index, (single, payload) in enumerate(split_batch(body, count)):
        mid = MessageId(entry_id.ledger_id, entry_id.entry_id, index, entry_id.partition)
        if (acked_mask is not None and not acked_mask >> index & 1) or (start is not None and start.drops(mid)):
            out.discarded += 1
            continue
        out.messages.append(Message(
            topic=topic,
            message_id=mid,
            data=bytes(payload),
            properties={p.key: p.value for p in single.properties},
            key=single.partition_key if single.HasField("partition_key") else None,
            ordering_key=single.ordering_key if single.HasField("ordering_key") else None,
            event_time_ms=single.event_time,
            publish_time_ms=meta.publish_time,
            producer_name=meta.producer_name,
            sequence_id=single.sequence_id if single.HasField("sequence_id") else meta.sequence_id + index,
            redelivery_count=cmd.redelivery_count,
            batch_size=count,
        ))


def _unacked_mask(words: object) -> int | None:
    """The broker's ack_set as one integer (bit set = still unacked), or None for "deliver all"."""
    values = list(words)  # type: ignore[call-overload]
    if not values:
        return None
    mask = 0
    for i, w in enumerate(values):
        mask |= (w % (1 << 64)) << (64 * i)
    return mask
