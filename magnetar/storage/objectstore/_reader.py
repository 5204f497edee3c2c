"""Reading entries back: a bounded cache of recent entries, each ledger's chunk index, ranged GETs.

Every entry a store instance acknowledges goes into :class:`EntryCache` (bounded in bytes, least recently
used out first), so a live topic's consumers, reading right behind its producers, are served from memory and
never cost a request per message. A miss finds the entry's chunk in :class:`ChunkIndex` (the first entry id
of every chunk: known to the writer, carried by its seal, else learnt by a binary search over chunk
headers, one ranged GET each, log2(chunks) at most) and then reads it:

* a chunk of at most ``whole_chunk_bytes_max`` bytes with one GET; the entries after the ones wanted are
  cached too, up to half the cache (a reader catching up reads its next entries from memory);
* a larger one with ranged GETs: its header and record table, then exactly the records wanted.

Every record's checksums are verified (``_format.decode_run``), as the embedded store does on every read;
a damaged record raises EntryCorrupted naming the entry. Knows nothing of topics or the broker.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict

from magnetar.storage.api import EntryCorrupted
from magnetar.storage.objectstore import _chunks
from magnetar.storage.objectstore._chunks import HEADER_BYTES, ChunkHeader
from magnetar.storage.objectstore._requests import Requests

#: Chunk tables (record offsets of big chunks read by range) kept, least recently used out first.
TABLES_CACHED_MAX = 64
UNKNOWN = -1


class EntryCache:
    """Entries by (ledger id, entry id), at most ``bytes_max`` bytes of them."""

    def __init__(self, bytes_max: int) -> None:
        self.bytes_max = bytes_max
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        if len(data) > self.bytes_max:
            return
        key = (ledger_id, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old)
        self._entries[key] = data
        self.bytes += len(data)
        while self.bytes > self.bytes_max:  # bounded: each turn drops one entry
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= len(dropped)

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        data = self._entries.get((ledger_id, entry_id))
        if data is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end((ledger_id, entry_id))
        return data


class ChunkIndex:
    """A ledger's data chunks ``0..chunks-1``: each one's first entry id and object size (UNKNOWN until
    learnt). Arrays, not objects: a ledger may have tens of thousands of chunks."""

    def __init__(self) -> None:
        self.firsts: array[int] = array("q")
        self.sizes: array[int] = array("q")

    @property
    def chunks(self) -> int:
        return len(self.firsts)

    def append(self, first_entry: int, size_bytes: int) -> None:
        self.firsts.append(first_entry)
        self.sizes.append(size_bytes)

    def cover(self, sizes: list[int]) -> None:
        """The chain is ``len(sizes)`` chunks long, with these object sizes (from a listing)."""
        for seq, size in enumerate(sizes):
            if seq < len(self.firsts):
                self.sizes[seq] = size
            else:
                self.append(UNKNOWN, size)

    def cut(self, chunks: int) -> None:
        """Only the first ``chunks`` chunks belong to the ledger (a seal's index covers no more)."""
        del self.firsts[chunks:]
        del self.sizes[chunks:]

    def learn(self, firsts: array[int]) -> None:
        for seq, first in enumerate(firsts[: len(self.firsts)]):
            self.firsts[seq] = first


class ChunkReader:
    def __init__(self, requests: Requests, prefix: str, cache: EntryCache, whole_chunk_bytes_max: int) -> None:
        self._requests = requests
        self._prefix = prefix
        self._cache = cache
        self._whole_max = whole_chunk_bytes_max
        self._tables: OrderedDict[tuple[int, int], tuple[ChunkHeader, array[int]]] = OrderedDict()
        self.chunk_gets = 0  # GETs that fetched entries (whole chunks or record ranges)

    async def read(self, ledger_id: int, index: ChunkIndex, entries: int, first: int, last: int) -> list[bytes]:
        """Entries ``first..last`` of a ledger of ``entries`` entries in the chunks of ``index``."""
        out: list[bytes | None] = [self._cache.get(ledger_id, e) for e in range(first, last + 1)]
        entry = first
        while entry <= last:  # bounded: each turn fills at least one entry
            if out[entry - first] is not None:
                entry += 1
                continue
            seq = await self._locate(ledger_id, index, entry)
            got = await self._fetch(ledger_id, index, entries, seq, entry, last)
            if not got:
                raise EntryCorrupted(f"ledger {ledger_id}: chunk {seq} lacks entry {entry}", ledger_id, entry)
            out[entry - first : entry - first + len(got)] = got
            entry += len(got)
        return [data for data in out if data is not None]

    def _key(self, ledger_id: int, seq: int) -> str:
        return _chunks.chunk_key(self._prefix, ledger_id, seq)

    async def header(self, ledger_id: int, seq: int) -> ChunkHeader:
        """The header of chunk ``seq`` (one ranged GET)."""
        raw = await self._requests.get(self._key(ledger_id, seq), f"reading chunk {seq}'s header", ledger_id,
                                       0, HEADER_BYTES - 1)
        return _chunks.decode_header(raw, ledger_id, seq)

    async def _first_of(self, ledger_id: int, index: ChunkIndex, seq: int) -> int:
        first = index.firsts[seq]
        if first == UNKNOWN:
            header = await self.header(ledger_id, seq)
            if header.kind != _chunks.DATA:
                raise EntryCorrupted(f"ledger {ledger_id}: chunk {seq} is a seal inside the chain", ledger_id)
            first = index.firsts[seq] = header.first_entry
        return first

    async def _locate(self, ledger_id: int, index: ChunkIndex, entry: int) -> int:
        """The seq of the chunk holding ``entry``: a binary search, fetching unknown headers on the way."""
        low, high = 0, index.chunks - 1
        while low < high:  # bounded: the range halves each turn
            middle = (low + high + 1) // 2
            if await self._first_of(ledger_id, index, middle) <= entry:
                low = middle
            else:
                high = middle - 1
        if high < 0 or await self._first_of(ledger_id, index, low) > entry:
            raise EntryCorrupted(f"ledger {ledger_id}: no chunk holds entry {entry}", ledger_id, entry)
        return low

    async def _fetch(
        self, ledger_id: int, index: ChunkIndex, entries: int, seq: int, entry: int, last: int
    ) -> list[bytes]:
        """Entries ``entry..`` (up to ``last`` or the chunk's end) of chunk ``seq``."""
        size = index.sizes[seq]
        if size == UNKNOWN or size <= self._whole_max:
            return await self._fetch_whole(ledger_id, index, seq, entry, last)
        header, offsets = await self._table(ledger_id, seq, self._count_of(index, entries, seq))
        local_first = entry - header.first_entry
        local_last = min(last - header.first_entry, header.count - 1)
        start = header.prefix_bytes + offsets[local_first]
        end = header.prefix_bytes + offsets[local_last + 1] - 1
        raw = await self._requests.get(self._key(ledger_id, seq), f"reading chunk {seq}", ledger_id, start, end)
        self.chunk_gets += 1
        return _chunks.decode_records(raw, offsets[local_first], offsets, local_first, local_last, ledger_id,
                                      header.first_entry)

    async def _fetch_whole(self, ledger_id: int, index: ChunkIndex, seq: int, entry: int, last: int) -> list[bytes]:
        """One GET for the whole chunk: the entries wanted, and the ones after them cached (read-ahead)."""
        body = await self._requests.get(self._key(ledger_id, seq), f"reading chunk {seq}", ledger_id)
        self.chunk_gets += 1
        header, offsets, records = _chunks.data_records(body, ledger_id, seq)
        index.firsts[seq], index.sizes[seq] = header.first_entry, len(body)
        local_first = entry - header.first_entry
        local_last = min(last - header.first_entry, header.count - 1)
        if not 0 <= local_first < header.count:
            raise EntryCorrupted(f"ledger {ledger_id}: chunk {seq} lacks entry {entry}", ledger_id, entry)
        wanted = _chunks.decode_records(records, 0, offsets, local_first, local_last, ledger_id, header.first_entry)
        for i, data in enumerate(wanted):
            self._cache.put(ledger_id, entry + i, data)
        budget = self._cache.bytes_max // 2  # read-ahead never pushes out more than half the cache
        ahead = local_last + 1
        while ahead < header.count and budget > 0:  # bounded by the chunk's entries
            try:
                (data,) = _chunks.decode_records(records, 0, offsets, ahead, ahead, ledger_id, header.first_entry)
            except EntryCorrupted:  # read-ahead only: a damaged record is reported when it is read
                break
            self._cache.put(ledger_id, header.first_entry + ahead, data)
            budget -= len(data)
            ahead += 1
        return wanted

    @staticmethod
    def _count_of(index: ChunkIndex, entries: int, seq: int) -> int | None:
        """The chunk's entry count if the index tells it (its first and the next chunk's, or the ledger's end)."""
        first = index.firsts[seq]
        following = index.firsts[seq + 1] if seq + 1 < index.chunks else entries
        return following - first if first != UNKNOWN and following != UNKNOWN else None

    async def _table(self, ledger_id: int, seq: int, count: int | None) -> tuple[ChunkHeader, array[int]]:
        """The chunk's header and record offsets: one ranged GET when the count is known, else two."""
        known = self._tables.get((ledger_id, seq))
        if known is not None:
            self._tables.move_to_end((ledger_id, seq))
            return known
        if count is None:
            prefix_bytes = (await self.header(ledger_id, seq)).prefix_bytes
        else:
            prefix_bytes = HEADER_BYTES + 4 * (count + 1) + 4
        raw = await self._requests.get(self._key(ledger_id, seq), f"reading chunk {seq}'s table", ledger_id,
                                       0, prefix_bytes - 1)
        header = _chunks.decode_header(raw, ledger_id, seq)
        if header.kind == _chunks.DATA and header.prefix_bytes != prefix_bytes:  # the hint was off: read it right
            raw = await self._requests.get(self._key(ledger_id, seq), f"reading chunk {seq}'s table", ledger_id,
                                           0, header.prefix_bytes - 1)
        table = header, _chunks.data_offsets(raw, header, ledger_id, seq)
        self._tables[(ledger_id, seq)] = table
        if len(self._tables) > TABLES_CACHED_MAX:
            self._tables.popitem(last=False)
        return table
