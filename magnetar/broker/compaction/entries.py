"""What compaction sees in a stored entry, and the compacted ledger's own entry format.

A stored entry holds one message or a batch. :func:`messages_of` lists its messages with their key and
whether each is a tombstone (the ``null_value`` flag the official client sets on ``send(None)``); an
empty body is a value like any other. :func:`compact_entry` rewrites a batch so only the chosen indexes
keep their bodies: the others stay in place as empty ``compacted_out`` messages, so every message keeps
its batch index (its id) and clients that ignore ``compacted_out`` still skip them through the ack set the
broker sends (a cleared bit means "already acknowledged", facts §5.4).

A compacted-ledger entry is ``i64 ledgerId | i64 entryId | u32 words | words x i64 | stored entry``: the
original position (acks and ids keep meaning the topic's positions) and, for a compacted batch, the
retained indexes as a java.util.BitSet (set bit = retained; no words = every message retained).

Pure functions over bytes: no storage, no asyncio.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from magnetar import protocol as proto
from magnetar.ledger.api import Position

_HEADER: Final = struct.Struct(">qqI")
_WORD: Final = struct.Struct(">q")
WORDS_MAX: Final = (proto.batch.BATCH_MESSAGES_MAX + 63) // 64


class CompactedEntryError(Exception):
    """A compacted-ledger entry that does not parse (a bug or damage: never served as data)."""


@dataclass(frozen=True, slots=True)
class KeyedMessage:
    """One message of an entry as compaction sees it."""

    batch_index: int  # -1 for an unbatched entry
    key: str | None  # None: no key (dropped from the compacted view)
    null_value: bool  # a tombstone: deletes the key
    body: bytes
    properties: dict[str, str]


def is_batch(meta: proto.pb.MessageMetadata) -> bool:
    return meta.HasField("num_messages_in_batch") and not meta.encryption_keys


def _batch_payload(entry: bytes, meta: proto.pb.MessageMetadata, max_size: int) -> bytes:
    body = proto.entry_payload(entry)
    if meta.compression:
        return proto.decompress(meta.compression, body, meta.uncompressed_size, max_size)
    return bytes(body)


def messages_of(
    entry: bytes, meta: proto.pb.MessageMetadata, max_size: int, *, bodies: bool = True
) -> list[KeyedMessage]:
    """Every message of a (non-marker) entry; without ``bodies`` only keys and flags are filled in.
    Raises the protocol's errors on a damaged payload."""
    if not is_batch(meta):
        key = meta.partition_key if meta.HasField("partition_key") else None
        if not bodies:
            return [KeyedMessage(-1, key, meta.null_value, b"", {})]
        props = {kv.key: kv.value for kv in meta.properties}
        return [KeyedMessage(-1, key, meta.null_value, bytes(proto.entry_payload(entry)), props)]
    count = max(meta.num_messages_in_batch, 1)
    out = []
    for index, (single, view) in enumerate(proto.split_batch(_batch_payload(entry, meta, max_size), count)):
        if single.compacted_out:
            continue
        key = single.partition_key if single.HasField("partition_key") else None
        if not bodies:
            out.append(KeyedMessage(index, key, single.null_value, b"", {}))
            continue
        props = {kv.key: kv.value for kv in single.properties}
        out.append(KeyedMessage(index, key, single.null_value, bytes(view), props))
    return out


def compact_entry(entry: bytes, meta: proto.pb.MessageMetadata, keep: Collection[int], max_size: int) -> bytes:
    """The entry with only the batch indexes in ``keep`` retained (an unbatched entry is kept as it is)."""
    if not is_batch(meta):
        return entry
    count = max(meta.num_messages_in_batch, 1)
    singles = proto.split_batch(_batch_payload(entry, meta, max_size), count)
    if all(i in keep for i in range(len(singles))):
        return entry
    rebuilt: list[tuple[proto.pb.SingleMessageMetadata, bytes]] = []
    for index, (single, body) in enumerate(singles):
        if index in keep:
            rebuilt.append((single, bytes(body)))
            continue
        out = proto.pb.SingleMessageMetadata(payload_size=0, compacted_out=True, sequence_id=single.sequence_id)
        if single.HasField("partition_key"):
            out.partition_key = single.partition_key
        rebuilt.append((out, b""))
    payload = proto.build_batch(rebuilt)
    new_meta = proto.pb.MessageMetadata()
    new_meta.CopyFrom(meta)
    if meta.compression:
        new_meta.uncompressed_size = len(payload)
        payload = proto.compress(meta.compression, payload)
    return proto.make_entry(new_meta, payload)


def retained_words(keep: Collection[int], count: int) -> list[int]:
    """The retained indexes as signed 64-bit BitSet words; [] when all ``count`` are retained."""
    if count <= 0 or all(i in keep for i in range(count)):
        return []
    words = [0] * ((count + 63) // 64)
    for i in keep:
        if 0 <= i < count:
            words[i // 64] |= 1 << (i % 64)
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]


def encode_compacted(position: Position, words: list[int], entry: bytes) -> bytes:
    head = _HEADER.pack(position.ledger_id, position.entry_id, len(words))
    return b"".join((head, *(_WORD.pack(w) for w in words), entry))


@dataclass(frozen=True, slots=True)
class CompactedEntry:
    position: Position
    words: list[int]  # retained batch indexes ([] = all)
    data: bytes  # the stored entry as dispatch sends it
    index: int = -1  # its index in the compacted ledger it was read from; -1 for a topic entry


def decode_compacted(raw: bytes, index: int = -1) -> CompactedEntry:
    if len(raw) < _HEADER.size:
        raise CompactedEntryError("compacted entry shorter than its header")
    ledger_id, entry_id, nwords = _HEADER.unpack_from(raw)
    start = _HEADER.size + nwords * _WORD.size
    if nwords > WORDS_MAX or start > len(raw):
        raise CompactedEntryError(f"compacted entry claims {nwords} ack-set words")
    words = [_WORD.unpack_from(raw, _HEADER.size + i * _WORD.size)[0] for i in range(nwords)]
    return CompactedEntry(Position(ledger_id, entry_id), words, raw[start:], index)


def highest_retained(words: list[int], count: int) -> int:
    """The last retained batch index of a compacted batch of ``count`` messages."""
    if not words:
        return count - 1
    for i in range(min(count, len(words) * 64) - 1, -1, -1):
        if (words[i // 64] >> (i % 64)) & 1:
            return i
    return -1
