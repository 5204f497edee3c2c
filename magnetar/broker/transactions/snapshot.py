"""Snapshots of a transaction buffer's aborted-transaction index, so a topic load need not replay the topic.

A snapshot holds the buffer's ``maxReadPosition`` when it was taken and every aborted transaction with the
position of its abort marker, sorted by that position. Recovery loads it and replays the topic from just
after that position (every transaction still open then has all its entries after it).

The single-entry scheme keeps one record per topic in the metadata store, rewritten whole
(:class:`MetadataSnapshotStore`); PIP-178's segments in a system topic (``segmented_snapshot``) plug in behind
the same :class:`SnapshotStore`. Knows nothing of topics or dispatch.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.transactions.api import TxnId
from magnetar.ledger.api import Position
from magnetar.metadata import api as md
from magnetar.resources.transactions import txn_buffer_snapshot_key

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class AbortedSnapshot:
    max_read_position: Position
    aborted: tuple[tuple[TxnId, Position], ...]  # sorted by abort-marker position
    taken_ms: int


class SnapshotError(Exception):
    """A snapshot could not be written or read where it is kept (the buffer logs it and carries on)."""


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What stats show of a topic's last snapshot written or loaded."""

    kind: str  # "single" or "multiple"
    segments: int  # numbered segments besides -end (0 for a single-entry snapshot)
    aborted: int
    taken_ms: int


class SnapshotStore(Protocol):
    """Where a topic's buffer keeps its latest snapshot."""

    def info(self, topic: str) -> SnapshotInfo | None: ...

    async def load(self, topic: str) -> AbortedSnapshot | None: ...

    async def save(self, topic: str, snapshot: AbortedSnapshot) -> None: ...

    async def delete(self, topic: str) -> None: ...


def encode_snapshot(snapshot: AbortedSnapshot) -> bytes:
    mrp = snapshot.max_read_position
    return json.dumps(
        {
            "version": FORMAT_VERSION,
            "maxReadPosition": [mrp.ledger_id, mrp.entry_id],
            "aborted": [[t.most, t.least, p.ledger_id, p.entry_id] for t, p in snapshot.aborted],
            "takenMs": snapshot.taken_ms,
        },
        separators=(",", ":"),
    ).encode()


def decode_snapshot(data: bytes) -> AbortedSnapshot:
    """Raises ValueError for a record this code cannot read."""
    try:
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown snapshot version {doc.get('version')!r}")
        ledger_id, entry_id = doc["maxReadPosition"]
        aborted = tuple(
            (TxnId(int(most), int(least)), Position(int(lid), int(eid))) for most, least, lid, eid in doc["aborted"]
        )
        return AbortedSnapshot(Position(int(ledger_id), int(entry_id)), aborted, int(doc.get("takenMs", 0)))
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable transaction-buffer snapshot: {exc}") from exc


class MetadataSnapshotStore:
    """One metadata record per topic; a snapshot replaces the previous one (last writer wins: one owner)."""

    def __init__(self, metadata: md.MetadataStore) -> None:
        self._metadata = metadata
        self._info: dict[str, SnapshotInfo] = {}

    def info(self, topic: str) -> SnapshotInfo | None:
        return self._info.get(topic)

    def _noted(self, topic: str, snapshot: AbortedSnapshot) -> AbortedSnapshot:
        self._info[topic] = SnapshotInfo("single", 0, len(snapshot.aborted), snapshot.taken_ms)
        return snapshot

    @staticmethod
    def key(topic: str) -> str:
        return txn_buffer_snapshot_key(topic)

    async def load(self, topic: str) -> AbortedSnapshot | None:
        record = await self._metadata.get(self.key(topic))
        return None if record is None else self._noted(topic, decode_snapshot(record.value))

    async def save(self, topic: str, snapshot: AbortedSnapshot) -> None:
        await self._metadata.put(self.key(topic), encode_snapshot(snapshot))
        self._noted(topic, snapshot)

    async def delete(self, topic: str) -> None:
        self._info.pop(topic, None)
        with contextlib.suppress(md.NotFound):
            await self._metadata.delete(self.key(topic))
