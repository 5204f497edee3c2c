"""The byte format of an offloaded ledger: a data object of checksummed blocks, and an index object.

Data object: blocks one after the other. A block (little-endian)::

    [4s magic b"MGOB"][u8 version=1][3x pad][u64 ledger_id][u64 first_entry][u32 count][u32 payload_bytes]
    [u32 crc32c(header before it + payload)]
    payload: count times [u32 length][entry bytes]

Index object::

    [4s magic b"MGOI"][u8 version=1][3x pad][u32 crc32c(body)][u32 body_bytes] body: UTF-8 JSON
    {"ledger_id": n, "entries": n, "size_bytes": n, "data_bytes": n, "metadata": {..},
     "blocks": [[first_entry, offset, length], ...]}          # ascending first_entry, contiguous

The index maps an entry id to the block holding it (binary search on ``first_entry``) and that block's
offset and length in the data object; a block is read whole and checked before any entry of it is served.
Bytes in, values out: no I/O here.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import crc32c

from magnetar.storage.offload.api import OffloadCorrupted

BLOCK_MAGIC = b"MGOB"
INDEX_MAGIC = b"MGOI"
VERSION = 1
_BLOCK_HEADER = struct.Struct("<4sB3xQQII")
_CRC = struct.Struct("<I")
_LEN = struct.Struct("<I")
_INDEX_HEADER = struct.Struct("<4sB3xII")
BLOCK_HEADER_BYTES = _BLOCK_HEADER.size + _CRC.size
ENTRY_OVERHEAD_BYTES = _LEN.size
#: Largest index body accepted on read (a ledger of 50,000 entries in 64 KiB blocks is far below).
INDEX_BODY_BYTES_MAX = 64 * 1024 * 1024


def _crc(data: bytes | memoryview) -> int:
    return int(crc32c.crc32c(data))


def encode_block(ledger_id: int, first_entry: int, entries: list[bytes]) -> bytes:
    payload = b"".join(_LEN.pack(len(e)) + e for e in entries)
    header = _BLOCK_HEADER.pack(BLOCK_MAGIC, VERSION, ledger_id, first_entry, len(entries), len(payload))
    checksum = crc32c.crc32c(header)
    checksum = crc32c.crc32c(payload, checksum)
    return header + _CRC.pack(checksum) + payload


def decode_block(data: bytes, ledger_id: int, first_entry: int, count: int, where: str) -> list[bytes]:
    """The entries of one block, after checking its header, checksum and that it is the expected block."""

    def bad(reason: str) -> OffloadCorrupted:
        return OffloadCorrupted(f"{where}: block at entry {first_entry}: {reason}", ledger_id, first_entry)

    if len(data) < BLOCK_HEADER_BYTES:
        raise bad("truncated header")
    magic, version, got_ledger, got_first, got_count, payload_bytes = _BLOCK_HEADER.unpack_from(data, 0)
    if magic != BLOCK_MAGIC or version != VERSION:
        raise bad("not a block (bad magic or version)")
    (stored_crc,) = _CRC.unpack_from(data, _BLOCK_HEADER.size)
    payload = memoryview(data)[BLOCK_HEADER_BYTES:]
    if len(payload) != payload_bytes:
        raise bad(f"payload is {len(payload)} bytes, header says {payload_bytes}")
    checksum = crc32c.crc32c(memoryview(data)[: _BLOCK_HEADER.size])
    if crc32c.crc32c(payload, checksum) != stored_crc:
        raise bad("checksum mismatch")
    if (got_ledger, got_first, got_count) != (ledger_id, first_entry, count):
        raise bad(f"holds ledger {got_ledger} entries {got_first}+{got_count}, expected {count} entries")
    entries: list[bytes] = []
    offset = 0
    for _ in range(count):  # bounded by the checked count
        (length,) = _LEN.unpack_from(payload, offset)
        offset += _LEN.size
        entries.append(bytes(payload[offset : offset + length]))
        offset += length
    if offset != len(payload):
        raise bad("entry lengths do not add up to the payload")
    return entries


@dataclass(frozen=True, slots=True)
class BlockRef:
    first_entry: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Index:
    ledger_id: int
    entries: int
    size_bytes: int
    data_bytes: int
    blocks: tuple[BlockRef, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)

    def block_of(self, entry_id: int) -> int:
        """The position in ``blocks`` of the block holding ``entry_id`` (which must be < entries)."""
        firsts = [b.first_entry for b in self.blocks]
        return bisect.bisect_right(firsts, entry_id) - 1

    def block_count(self, i: int) -> int:
        end = self.blocks[i + 1].first_entry if i + 1 < len(self.blocks) else self.entries
        return end - self.blocks[i].first_entry


def encode_index(index: Index) -> bytes:
    body = json.dumps(
        {
            "ledger_id": index.ledger_id,
            "entries": index.entries,
            "size_bytes": index.size_bytes,
            "data_bytes": index.data_bytes,
            "metadata": dict(index.metadata),
            "blocks": [[b.first_entry, b.offset, b.length] for b in index.blocks],
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return _INDEX_HEADER.pack(INDEX_MAGIC, VERSION, _crc(body), len(body)) + body


def decode_index(data: bytes, ledger_id: int, where: str) -> Index:
    def bad(reason: str) -> OffloadCorrupted:
        return OffloadCorrupted(f"{where}: index: {reason}", ledger_id, None)

    if len(data) < _INDEX_HEADER.size:
        raise bad("truncated")
    magic, version, checksum, body_bytes = _INDEX_HEADER.unpack_from(data, 0)
    body = data[_INDEX_HEADER.size :]
    if magic != INDEX_MAGIC or version != VERSION or body_bytes != len(body) or body_bytes > INDEX_BODY_BYTES_MAX:
        raise bad("bad header")
    if _crc(body) != checksum:
        raise bad("checksum mismatch")
    try:
        obj: dict[str, Any] = json.loads(body)
        index = Index(
            int(obj["ledger_id"]), int(obj["entries"]), int(obj["size_bytes"]), int(obj["data_bytes"]),
            tuple(BlockRef(int(a), int(b), int(c)) for a, b, c in obj["blocks"]),
            {str(k): str(v) for k, v in obj.get("metadata", {}).items()},
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise bad(f"bad body: {exc}") from exc
    _check_index(index, ledger_id, bad)
    return index


def _check_index(index: Index, ledger_id: int, bad: Any) -> None:
    if index.ledger_id != ledger_id:
        raise bad(f"belongs to ledger {index.ledger_id}")
    if not index.blocks:
        if index.entries or index.data_bytes:
            raise bad("entries without blocks")
        return
    firsts = [b.first_entry for b in index.blocks]
    if firsts[0] != 0 or firsts != sorted(set(firsts)) or firsts[-1] >= index.entries:
        raise bad("block entry ids are not ascending from 0 within the ledger")
    offset = 0
    for block in index.blocks:
        if block.offset != offset or block.length < BLOCK_HEADER_BYTES:
            raise bad("blocks are not contiguous")
        offset += block.length
    if offset != index.data_bytes:
        raise bad("blocks do not cover the data object")
