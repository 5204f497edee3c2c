"""The record format of a ledger data file, and the scan that rebuilds its index at open.

A data file is a sequence of records, each::

    [u32 length][u32 crc32c(data)][u32 crc32c(the 8 bytes before)][data: length bytes]

all little-endian. The header checksum lets a scan trust a record's length before reading its data, so a
damaged record in the middle does not hide the records after it.

Telling a torn tail from damage in the middle (the rule the scan applies):

* A record whose header checksum passes but which runs past the end of the file, or that is the last
  record and fails its data checksum, is a torn tail: the write never completed, it was never
  acknowledged (acknowledgement follows fsync, which follows every earlier write), so it is cut off.
* A header that fails its checksum is damage of unknown extent. The scan looks for the next complete,
  valid record (header and data checksums) within ``RESYNC_BYTES_MAX`` bytes. If none exists up to the end
  of the file, it is a torn tail and cut off. If one exists, the damage is in the middle: nothing is cut,
  the damaged span counts as ONE entry whose reads raise EntryCorrupted, and the scan resumes there.
  If the window is exhausted with file left beyond it, the rest is kept as one damaged entry (never
  destroy what cannot be classified).
* A bad data checksum in a record followed by others is not looked at by the scan; reads find it.
* A sealed ledger records its entry count at seal time: nothing before that count is ever cut (damage
  there becomes damaged entries), and records beyond it (appends that failed) are cut.

This module knows nothing of the store, asyncio, topics or the broker; it works on bytes.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from magnetar.storage._rules import ENTRY_BYTES_MAX
from magnetar.storage.api import EntryCorrupted

_HEADER = struct.Struct("<III")
_PREFIX = struct.Struct("<II")
HEADER_BYTES = _HEADER.size
#: How far past a damaged header the scan searches for the next valid record.
RESYNC_BYTES_MAX = ENTRY_BYTES_MAX + HEADER_BYTES


def _checksum(data: bytes | memoryview) -> int:
    return int(crc32c.crc32c(data))


def encode(data: bytes) -> bytes:
    """One record holding ``data``."""
    prefix = _PREFIX.pack(len(data), _checksum(data))
    return prefix + struct.pack("<I", _checksum(prefix)) + data


def _length_if_header_ok(buf: memoryview, offset: int) -> int | None:
    """The record length at ``offset`` if its header is whole and passes its checksum."""
    if offset + HEADER_BYTES > len(buf):
        return None
    length, _data_crc, header_crc = _HEADER.unpack_from(buf, offset)
    if _checksum(buf[offset : offset + _PREFIX.size]) != header_crc:
        return None
    return int(length)


def _data_ok(buf: memoryview, offset: int, length: int) -> bool:
    data_crc = _PREFIX.unpack_from(buf, offset)[1]
    start = offset + HEADER_BYTES
    return bool(_checksum(buf[start : start + length]) == data_crc)


def decode(buf: memoryview, offset: int, end: int, ledger_id: int, entry_id: int) -> bytes:
    """The data of the record spanning exactly ``offset..end`` in ``buf``; EntryCorrupted otherwise."""
    length = _length_if_header_ok(buf, offset)
    if length is None or offset + HEADER_BYTES + length != end or not _data_ok(buf, offset, length):
        raise EntryCorrupted(
            f"ledger {ledger_id} entry {entry_id} failed its checksum", ledger_id=ledger_id, entry_id=entry_id
        )
    return bytes(buf[offset + HEADER_BYTES : end])


def decode_run(buf: memoryview, starts: Sequence[int], end: int, ledger_id: int, first_entry: int) -> list[bytes]:
    """The data of consecutive records: record ``i`` spans ``starts[i]..starts[i + 1]`` (the last one ends at
    ``end``). The same checks as :func:`decode`, inlined: a read of many entries pays one call, not six each."""
    out: list[bytes] = []
    unpack_header, checksum, append = _HEADER.unpack_from, crc32c.crc32c, out.append
    bounds = [*starts[1:], end]
    for i, offset in enumerate(starts):
        record_end = bounds[i]
        if record_end - offset >= HEADER_BYTES:
            length, data_crc, header_crc = unpack_header(buf, offset)
            data = buf[offset + HEADER_BYTES : record_end]
            if (
                offset + HEADER_BYTES + length == record_end
                and checksum(buf[offset : offset + _PREFIX.size]) == header_crc
                and checksum(data) == data_crc
            ):
                append(bytes(data))
                continue
        append(decode(buf, offset, record_end, ledger_id, first_entry + i))  # raises EntryCorrupted
    return out


def _next_valid_record(buf: memoryview, start: int) -> int | None:
    """Offset of the first complete, fully valid record at or after ``start`` within the window."""
    size = len(buf)
    for offset in range(start, min(size - HEADER_BYTES, start + RESYNC_BYTES_MAX) + 1):
        length = _PREFIX.unpack_from(buf, offset)[0]
        if offset + HEADER_BYTES + length > size:
            continue
        if _length_if_header_ok(buf, offset) is not None and _data_ok(buf, offset, length):
            return offset
    return None


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a scan found: record offsets (one per entry), the length to keep, and the damage."""

    offsets: array[int]
    end: int
    damaged_entries: tuple[int, ...]

    def torn_bytes(self, size: int) -> int:
        return size - self.end


def _damaged_span_end(buf: memoryview, offset: int) -> int | None:
    """Where valid records resume after damage at ``offset`` (end of file if unclassifiable), or
    None when nothing valid follows (a torn tail)."""
    resume = _next_valid_record(buf, offset + 1)
    if resume is not None:
        return resume
    if len(buf) - offset > RESYNC_BYTES_MAX:
        return len(buf)
    return None


def scan(buf: memoryview, sealed_entries: int | None) -> ScanResult:
    """Index the records of one data file (see the module docstring for the rules)."""
    size = len(buf)
    offsets: array[int] = array("Q")
    damaged: list[int] = []
    offset = 0
    while offset < size:  # bounded: offset strictly grows each turn
        length = _length_if_header_ok(buf, offset)
        whole = length is not None and offset + HEADER_BYTES + length <= size
        if whole and length is not None:
            record_end = offset + HEADER_BYTES + length
            if record_end < size or _data_ok(buf, offset, length):
                offsets.append(offset)
                offset = record_end
                continue
            resume = None  # a last record failing its data checksum: a torn tail
        else:
            resume = None if length is not None else _damaged_span_end(buf, offset)
        keep_for_seal = sealed_entries is not None and len(offsets) < sealed_entries
        if resume is None and not keep_for_seal:
            break
        damaged.append(len(offsets))
        offsets.append(offset)
        offset = size if resume is None else resume
    end = offset
    if sealed_entries is not None and len(offsets) > sealed_entries:
        end = offsets[sealed_entries]
        del offsets[sealed_entries:]
    return ScanResult(offsets, end, tuple(d for d in damaged if d < len(offsets)))
