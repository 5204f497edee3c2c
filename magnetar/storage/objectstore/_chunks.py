"""Where a ledger's objects live and what they hold: keys, the chunk and seal format, the metadata JSON.

Keys under the store's prefix::

    ledger-meta/<ledger id, 20 digits>          JSON: id, created_ms, custom metadata (written once)
    ledgers/<ledger id, 20 digits>/<seq, 10>    chunk ``seq`` of the ledger: data, or the seal
    ledger-ids/<block, 20 digits>               a claimed block of ledger ids (``ids.py``)

A chunk is one group-commit flush: a 48-byte header, a table, then records in the embedded store's record
format (``magnetar.storage._format``: length, crc32c of the data, crc32c of the header, data)::

    header  magic "MGLC", version, kind (data | seal), first_entry u64, count u32, bytes_end u64,
            token (16 bytes: which store instance wrote it), crc32c of the 44 bytes before
    data    table: count + 1 u32 offsets of the records (the last is the records' length) + its crc32c;
            first_entry is the first record's entry id, bytes_end the ledger's payload bytes through it
    seal    (by the ledger's writer) table: count u64, the first entry id of each data chunk below it + its
            crc32c; first_entry is the ledger's entry count, bytes_end its payload bytes: what the writer
            acknowledged (a chunk below the seal whose PUT failed yet landed is beyond that count)
    fence   (a seal by anyone else) no table; the ledger holds every data chunk below it

A ledger's chunks are ``0, 1, 2, ...`` up to the first missing seq: data chunks, then (once sealed) one or
more seals or fences, the lowest of which is the ledger's seal (a sealer that loses a race for a seq tries
the next one without looking, so several may stack up; nothing but seals ever lands above a seal). Nothing
past the first gap is part of the ledger. This module works on bytes and strings only: no I/O, no asyncio.
"""

from __future__ import annotations

import json
import struct
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import crc32c

from magnetar.storage import _format
from magnetar.storage.api import EntryCorrupted, StorageError

MAGIC = b"MGLC"
VERSION = 1
DATA = 0
SEAL = 1
FENCE = 2
SEALS = frozenset({SEAL, FENCE})
TOKEN_BYTES = 16
_HEADER = struct.Struct("<4sBBxxQIQ16s")
_CRC = struct.Struct("<I")
HEADER_BYTES = _HEADER.size + _CRC.size  # 48
FENCE_BYTES = HEADER_BYTES + _CRC.size  # a fence: its header and an empty table
SEQ_DIGITS = 10
ID_DIGITS = 20


def _crc(data: bytes | memoryview) -> int:
    return int(crc32c.crc32c(data))


# ---- keys ------------------------------------------------------------------------------------------------------


def ledger_prefix(prefix: str, ledger_id: int) -> str:
    return f"{prefix}ledgers/{ledger_id:0{ID_DIGITS}d}/"


def chunk_key(prefix: str, ledger_id: int, seq: int) -> str:
    return f"{ledger_prefix(prefix, ledger_id)}{seq:0{SEQ_DIGITS}d}"


def meta_prefix(prefix: str) -> str:
    return f"{prefix}ledger-meta/"


def meta_key(prefix: str, ledger_id: int) -> str:
    return f"{meta_prefix(prefix)}{ledger_id:0{ID_DIGITS}d}"


def seq_of(key: str, ledger_prefix_: str) -> int | None:
    """The chunk seq a listed key names, or None for anything else under the ledger's prefix."""
    tail = key[len(ledger_prefix_) :]
    return int(tail) if key.startswith(ledger_prefix_) and len(tail) == SEQ_DIGITS and tail.isdigit() else None


def id_of(key: str, prefix_: str) -> int | None:
    tail = key[len(prefix_) :]
    return int(tail) if key.startswith(prefix_) and len(tail) == ID_DIGITS and tail.isdigit() else None


# ---- chunk headers ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    kind: int
    first_entry: int
    count: int
    bytes_end: int
    token: bytes

    @property
    def table_bytes(self) -> int:
        width = 4 * (self.count + 1) if self.kind == DATA else 8 * self.count
        return width + _CRC.size

    @property
    def prefix_bytes(self) -> int:
        """Header and table: where the records of a data chunk start."""
        return HEADER_BYTES + self.table_bytes


def _corrupt(ledger_id: int, entry_id: int | None, what: str) -> EntryCorrupted:
    return EntryCorrupted(f"ledger {ledger_id}: {what}", ledger_id=ledger_id, entry_id=entry_id)


def decode_header(buf: bytes | memoryview, ledger_id: int, seq: int) -> ChunkHeader:
    """The header at the start of ``buf``; EntryCorrupted if it is short, foreign or fails its checksum."""
    if len(buf) < HEADER_BYTES:
        raise _corrupt(ledger_id, None, f"chunk {seq} is shorter than its header")
    magic, version, kind, first, count, bytes_end, token = _HEADER.unpack_from(buf, 0)
    (crc,) = _CRC.unpack_from(buf, _HEADER.size)
    if magic != MAGIC or version != VERSION or kind not in (DATA, SEAL, FENCE) or _crc(buf[: _HEADER.size]) != crc:
        raise _corrupt(ledger_id, None, f"chunk {seq} has a bad header")
    return ChunkHeader(kind, first, count, bytes_end, bytes(token))


def _pack_header(kind: int, first: int, count: int, bytes_end: int, token: bytes) -> bytes:
    assert len(token) == TOKEN_BYTES
    head = _HEADER.pack(MAGIC, VERSION, kind, first, count, bytes_end, token)
    return head + _CRC.pack(_crc(head))


def _decode_table(buf: bytes | memoryview, header: ChunkHeader, ledger_id: int, seq: int) -> array[int]:
    end = header.prefix_bytes
    if len(buf) < end:
        raise _corrupt(ledger_id, header.first_entry if header.kind == DATA else None, f"chunk {seq}: short table")
    raw = buf[HEADER_BYTES : end - _CRC.size]
    (crc,) = _CRC.unpack_from(buf, end - _CRC.size)
    if _crc(raw) != crc:
        raise _corrupt(ledger_id, header.first_entry if header.kind == DATA else None, f"chunk {seq}: bad table")
    table = array("I" if header.kind == DATA else "Q")
    table.frombytes(bytes(raw))
    return table


# ---- data chunks -----------------------------------------------------------------------------------------------


def encode_data(first_entry: int, bytes_end: int, token: bytes, payloads: Sequence[bytes]) -> bytes:
    """One data chunk holding ``payloads`` as entries ``first_entry...``."""
    records = [_format.encode(p) for p in payloads]
    offsets = array("I", [0])
    for record in records:
        offsets.append(offsets[-1] + len(record))
    table = offsets.tobytes()
    header = _pack_header(DATA, first_entry, len(payloads), bytes_end, token)
    return b"".join([header, table, _CRC.pack(_crc(table)), *records])


def data_offsets(buf: bytes | memoryview, header: ChunkHeader, ledger_id: int, seq: int) -> array[int]:
    """The record offsets of a data chunk (``count + 1`` of them, relative to ``header.prefix_bytes``)."""
    return _decode_table(buf, header, ledger_id, seq)


def decode_records(
    buf: bytes | memoryview, base: int, offsets: Sequence[int], first: int, last: int, ledger_id: int,
    first_entry: int,
) -> list[bytes]:
    """Entries ``first..last`` (chunk-local indexes) of a data chunk; ``buf`` holds its records' bytes from
    record offset ``base`` on. Every record's checksums are verified (EntryCorrupted names the entry)."""
    starts = [offsets[i] - base for i in range(first, last + 1)]
    end = offsets[last + 1] - base
    view = memoryview(buf)
    if starts[0] < 0 or len(view) < end:
        raise _corrupt(ledger_id, first_entry + first, "chunk shorter than its table says")
    return _format.decode_run(view[:end], starts, end, ledger_id, first_entry + first)


def data_records(buf: bytes, ledger_id: int, seq: int) -> tuple[ChunkHeader, array[int], memoryview]:
    """A whole data chunk's header, record offsets and records region (header and table verified)."""
    header = decode_header(buf, ledger_id, seq)
    if header.kind != DATA:
        raise _corrupt(ledger_id, None, f"chunk {seq} is a seal, not data")
    return header, data_offsets(buf, header, ledger_id, seq), memoryview(buf)[header.prefix_bytes :]


def decode_data(buf: bytes, ledger_id: int, seq: int) -> tuple[ChunkHeader, list[bytes]]:
    """A whole data chunk: its header and every entry, all checksums verified."""
    header, offsets, records = data_records(buf, ledger_id, seq)
    if not header.count:
        return header, []
    return header, decode_records(records, 0, offsets, 0, header.count - 1, ledger_id, header.first_entry)


# ---- seals -----------------------------------------------------------------------------------------------------


def encode_seal(entries: int, size_bytes: int, token: bytes, firsts: Sequence[int]) -> bytes:
    """A seal saying the ledger holds ``entries`` entries of ``size_bytes`` payload bytes; ``firsts`` (the
    first entry id of each data chunk below it) lets readers find an entry's chunk without a search."""
    table = array("Q", firsts).tobytes()
    return _pack_header(SEAL, entries, len(firsts), size_bytes, token) + table + _CRC.pack(_crc(table))


def encode_fence(token: bytes) -> bytes:
    """A seal by someone other than the writer: the ledger holds every data chunk below it."""
    table = b""
    return _pack_header(FENCE, 0, 0, 0, token) + table + _CRC.pack(_crc(table))


def seal_index(buf: bytes, header: ChunkHeader, ledger_id: int, seq: int) -> array[int]:
    return _decode_table(buf, header, ledger_id, seq)


# ---- ledger metadata -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerMeta:
    ledger_id: int
    created_ms: int
    custom_metadata: Mapping[str, str]

    def to_json(self) -> bytes:
        doc = {"ledgerId": self.ledger_id, "createdMs": self.created_ms, "customMetadata": dict(self.custom_metadata)}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, ledger_id: int) -> LedgerMeta:
        try:
            doc = json.loads(data)
            meta = cls(int(doc["ledgerId"]), int(doc["createdMs"]), dict(doc["customMetadata"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"ledger {ledger_id}: unreadable metadata object: {exc}", ledger_id=ledger_id) from exc
        if meta.ledger_id != ledger_id:
            raise StorageError(f"ledger {ledger_id}: metadata object names ledger {meta.ledger_id}", ledger_id)
        return meta
