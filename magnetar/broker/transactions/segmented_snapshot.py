"""PIP-178: a transaction buffer's snapshot spread over several keys of a compacted system topic.

Every namespace has the compacted topic ``__transaction_buffer_snapshot``. A topic's snapshot is written
there as keyed messages: ``{topic}-1``, ``{topic}-2``, ... each hold at most ``segment_size`` bytes of
aborted ids (oldest abort marker first), and ``{topic}-end``, written last, holds the remaining ids and the
only real ``maxReadPosition`` (the numbered segments carry "earliest"). A small index writes ``-end`` only.
After ``-end``, segment keys beyond the new count are deleted with tombstones.

Recovery reads the latest value of every key of the topic (the compacted view plus the live tail), unions
their ids and takes ``-end``'s ``maxReadPosition``. Why a snapshot cut short is still correct: the index is
ordered by marker position and only loses ids from the front (trimmed ledgers), so a rewritten segment
``-k`` holds the same ids as before or later ones; the union never loses an id that is still needed; and
``-end`` is written last, so its ``maxReadPosition`` never runs ahead of what the segments hold. Extra ids
(already trimmed) are harmless: their entries are gone. Segments with no ``-end`` at all (the first
snapshot was cut) recover with "earliest": the whole topic is replayed.

The topic is reached through :class:`KeyedTopic` (the broker supplies it over the loaded system topic).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.snapshot import AbortedSnapshot, SnapshotError, SnapshotInfo, SnapshotStore
from magnetar.ledger.api import Position

log = logging.getLogger("magnetar.broker.transactions.segmented_snapshot")

SNAPSHOT_TOPIC = "__transaction_buffer_snapshot"
END = "end"
FORMAT_VERSION = 1
_HEADER = struct.Struct(">BqqqI")  # version, maxReadPosition (ledger, entry), taken ms, id count
_ID = struct.Struct(">QQqq")  # txn most, least, abort marker (ledger, entry)
ID_BYTES = _ID.size
EARLIEST = Position(-1, -1)
DEFAULT_SEGMENT_SIZE = 256 * 1024


class KeyedTopic(Protocol):
    """The namespace's snapshot topic: keyed writes (None deletes a key) and the latest value per key."""

    async def write(self, key: str, value: bytes | None) -> None: ...

    async def latest(self, prefix: str) -> dict[str, bytes]: ...

    async def written(self) -> None:
        """A snapshot is complete: the place to compact the topic when enough was written."""


#: the snapshot topic of the namespace a topic (full name) belongs to; None when it does not exist and
#: ``create`` is False
KeyedTopics = Callable[[str, bool], Awaitable[KeyedTopic | None]]

Aborted = tuple[tuple[TxnId, Position], ...]


@dataclass(frozen=True, slots=True)
class Segment:
    max_read_position: Position
    taken_ms: int
    aborted: Aborted


def encode_segment(segment: Segment) -> bytes:
    mrp = segment.max_read_position
    head = _HEADER.pack(FORMAT_VERSION, mrp.ledger_id, mrp.entry_id, segment.taken_ms, len(segment.aborted))
    body = b"".join(_ID.pack(t.most, t.least, p.ledger_id, p.entry_id) for t, p in segment.aborted)
    return head + body


def decode_segment(data: bytes) -> Segment:
    """Raises ValueError for a value this code cannot read."""
    if len(data) < _HEADER.size:
        raise ValueError("transaction-buffer snapshot segment too short")
    version, ledger_id, entry_id, taken_ms, count = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ValueError(f"unknown snapshot segment version {version}")
    if len(data) != _HEADER.size + count * ID_BYTES:
        raise ValueError(f"snapshot segment of {len(data)} bytes does not hold {count} ids")
    aborted = tuple(
        (TxnId(most, least), Position(lid, eid))
        for most, least, lid, eid in _ID.iter_unpack(memoryview(data)[_HEADER.size:])
    )
    return Segment(Position(ledger_id, entry_id), taken_ms, aborted)


def split(snapshot: AbortedSnapshot, segment_size: int) -> tuple[list[Segment], Segment]:
    """The numbered segments (oldest ids first, each full) and ``-end`` (the rest, with the real
    maxReadPosition). At least one id goes in each segment, whatever the size."""
    per = max(1, segment_size // ID_BYTES)
    ids = snapshot.aborted
    full = max(0, (len(ids) - 1) // per)
    segments = [Segment(EARLIEST, snapshot.taken_ms, ids[i * per:(i + 1) * per]) for i in range(full)]
    return segments, Segment(snapshot.max_read_position, snapshot.taken_ms, ids[full * per:])


def segment_key(topic: str, suffix: int | str) -> str:
    return f"{topic}-{suffix}"


def parse_key(topic: str, key: str) -> int | str | None:
    """The segment number, END, or None for a key of another topic (``a-1-end`` is not ``a``'s)."""
    prefix = f"{topic}-"
    if not key.startswith(prefix):
        return None
    suffix = key[len(prefix):]
    if suffix == END:
        return END
    if suffix.isdigit() and suffix.isascii() and not suffix.startswith("0"):
        return int(suffix)
    return None


def merge(end: Segment | None, segments: Iterable[Segment]) -> AbortedSnapshot | None:
    """The union of the ids of every key, sorted by marker; ``-end``'s maxReadPosition (else earliest)."""
    union: dict[TxnId, Position] = {}
    parts = [*segments, *([end] if end is not None else [])]
    if not parts:
        return None
    for part in parts:
        for txn, marker in part.aborted:
            known = union.get(txn)
            union[txn] = marker if known is None else min(known, marker)
    ordered = tuple(sorted(union.items(), key=lambda item: item[1]))
    if end is None:
        return AbortedSnapshot(EARLIEST, ordered, 0)
    return AbortedSnapshot(end.max_read_position, ordered, end.taken_ms)


class SegmentedSnapshotStore:
    """A :class:`~magnetar.broker.transactions.snapshot.SnapshotStore` over the namespace's snapshot topic."""

    def __init__(self, topics: KeyedTopics, *, segment_size: int = DEFAULT_SEGMENT_SIZE) -> None:
        self._topics = topics
        self.segment_size = segment_size
        self._high: dict[str, int] = {}  # topic -> highest segment number that may hold a value
        self._info: dict[str, SnapshotInfo] = {}
        self._written: dict[str, dict[int, bytes]] = {}  # topic -> segment number -> value last written
        self.writes = 0  # keyed messages written (tests and the benchmark read it)
        # topic -> (op, status) -> count: Pulsar's pulsar_txn_tb_snapshot_segment_op_total
        self.ops: dict[str, dict[tuple[str, str], int]] = {}

    def _count(self, topic: str, op: str, ok: bool) -> None:
        counts = self.ops.setdefault(topic, {})
        key = (op, "success" if ok else "fail")
        counts[key] = counts.get(key, 0) + 1

    async def _keyed(self, topic: str) -> KeyedTopic:
        keyed = await self._topics(topic, True)
        if keyed is None:
            raise SnapshotError(f"no snapshot topic for {topic}")
        return keyed

    async def _write(self, keyed: KeyedTopic, key: str, value: bytes | None) -> None:
        topic, _, _ = key.rpartition("-")
        op = "add" if value is not None else "del"
        try:
            await keyed.write(key, value)
        except SnapshotError:
            self._count(topic, op, False)
            raise
        self._count(topic, op, True)
        self.writes += 1

    async def load(self, topic: str) -> AbortedSnapshot | None:
        keyed = await self._topics(topic, False)
        if keyed is None:
            return None
        try:
            latest = await keyed.latest(f"{topic}-")
        except SnapshotError:
            self._count(topic, "read", False)
            raise
        self._count(topic, "read", True)
        end: Segment | None = None
        segments: list[Segment] = []
        high = 0
        for key, value in latest.items():
            which = parse_key(topic, key)
            if which is None:
                continue
            segment = decode_segment(value)
            if which == END:
                end = segment
            else:
                assert isinstance(which, int)
                segments.append(segment)
                high = max(high, which)
        self._high[topic] = max(self._high.get(topic, 0), high)
        snapshot = merge(end, segments)
        if snapshot is not None:
            self._info[topic] = SnapshotInfo("multiple", len(segments), len(snapshot.aborted), snapshot.taken_ms)
        return snapshot

    async def save(self, topic: str, snapshot: AbortedSnapshot) -> None:
        """Segments oldest first, then ``-end``, then tombstones for keys past the new count."""
        keyed = await self._keyed(topic)
        segments, end = split(snapshot, self.segment_size)
        written = self._written.setdefault(topic, {})
        high = self._high.get(topic, 0)
        self._high[topic] = max(high, len(segments))
        if segments:
            log.info("%s: writing a transaction-buffer snapshot of %d segments and -end (%d aborted ids)",
                     topic, len(segments), len(snapshot.aborted))
        for number, segment in enumerate(segments, start=1):
            value = encode_segment(segment)
            if written.get(number) != value:  # unchanged since written (nothing trimmed): keep it
                written.pop(number, None)
                await self._write(keyed, segment_key(topic, number), value)
                written[number] = value
        await self._write(keyed, segment_key(topic, END), encode_segment(end))
        for number in range(len(segments) + 1, high + 1):
            written.pop(number, None)
            await self._write(keyed, segment_key(topic, number), None)
        self._high[topic] = len(segments)
        self._info[topic] = SnapshotInfo("multiple", len(segments), len(snapshot.aborted), snapshot.taken_ms)
        await keyed.written()

    async def delete(self, topic: str) -> None:
        """Tombstones for every key the topic has (or may have) in the snapshot topic."""
        self._info.pop(topic, None)
        self._written.pop(topic, None)
        self.ops.pop(topic, None)
        keyed = await self._topics(topic, False)
        if keyed is None:
            return
        latest = await keyed.latest(f"{topic}-")
        which = [parse_key(topic, k) for k in latest]
        high = max([self._high.pop(topic, 0), *(n for n in which if isinstance(n, int))])
        for number in range(1, high + 1):
            await self._write(keyed, segment_key(topic, number), None)
        if high or END in which:
            await self._write(keyed, segment_key(topic, END), None)
        await keyed.written()

    def info(self, topic: str) -> SnapshotInfo | None:
        return self._info.get(topic)


class SwitchedSnapshotStore:
    """``transactionBufferSegmentedSnapshotEnabled``: new snapshots go to the segmented store or the single
    one. A load reads both and merges them (ids unioned, the later maxReadPosition: each is complete up to its
    own), so a topic moves to the other scheme on its next snapshot without losing ids; that save then
    deletes the old scheme's copy. ``pinned`` topics (the snapshot topics themselves) always use ``single``."""

    def __init__(self, segmented: SegmentedSnapshotStore, single: SnapshotStore, *, segmented_enabled: bool,
                 pinned: Callable[[str], bool]) -> None:
        self.segmented_enabled = segmented_enabled
        self.segmented = segmented
        self._segmented: SnapshotStore = segmented
        self._single = single
        self._pinned = pinned
        self._stale: set[str] = set()  # topics whose other-scheme copy is still stored

    def _stores(self, topic: str) -> tuple[SnapshotStore, SnapshotStore | None]:
        if self._pinned(topic):
            return self._single, None
        if self.segmented_enabled:
            return self._segmented, self._single
        return self._single, self._segmented

    def info(self, topic: str) -> SnapshotInfo | None:
        return self._stores(topic)[0].info(topic)

    async def load(self, topic: str) -> AbortedSnapshot | None:
        current, other = self._stores(topic)
        mine = await current.load(topic)
        theirs = await other.load(topic) if other is not None else None
        if theirs is None:
            return mine
        self._stale.add(topic)
        if mine is None:
            return theirs
        union = dict(theirs.aborted)
        union.update(mine.aborted)
        ordered = tuple(sorted(union.items(), key=lambda item: item[1]))
        latest = max(mine, theirs, key=lambda s: s.max_read_position)
        return AbortedSnapshot(latest.max_read_position, ordered, latest.taken_ms)

    async def save(self, topic: str, snapshot: AbortedSnapshot) -> None:
        current, other = self._stores(topic)
        await current.save(topic, snapshot)
        if other is not None and topic in self._stale:
            await other.delete(topic)
            self._stale.discard(topic)

    async def delete(self, topic: str) -> None:
        current, other = self._stores(topic)
        await current.delete(topic)
        if other is not None:
            await other.delete(topic)
        self._stale.discard(topic)
