"""Message deduplication per producer name, surviving restarts and crashes (Pulsar's design).

The topic remembers, per producer name, the highest sequence id accepted ("pushed") and stored
("persisted"). A SEND at or below the pushed id is a resend: it is answered after the original settles,
with the duplicate receipt (-1, -1) if the original landed. The persisted map is snapshotted into the
properties of a system cursor (``pulsar.dedup``) every ``snapshot_interval_entries`` entries, with the
cursor's mark-delete at the snapshot point; recovery loads the snapshot and replays the entries after it,
so a crash between a store and its receipt never lets the client's resend land twice.

A topic that holds no entry and no ``pulsar.dedup`` cursor has nothing to recover: its cursor (a metadata
write) is created when the first producer is admitted (``ensure_cursor``), before anything it sends can land,
so the many topics that are only subscribed to never pay for it.
"""

from __future__ import annotations

import asyncio
import logging

from magnetar import protocol as proto
from magnetar.broker.errors import PersistenceError, ServiceNotReady
from magnetar.ledger.api import (
    Cursor,
    EntryCorruptedError,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerError,
    Position,
)

log = logging.getLogger("magnetar.broker.dedup")

CURSOR_NAME = "pulsar.dedup"
DUPLICATE_POSITION = Position(-1, -1)
PRODUCERS_MAX = 100_000  # producer names remembered per topic
REPLAY_BATCH_ENTRIES = 500


def is_partial_chunk(metadata: proto.pb.MessageMetadata) -> bool:
    return metadata.HasField("chunk_id") and metadata.chunk_id < metadata.num_chunks_from_msg - 1


def last_sequence_id_of(metadata: proto.pb.MessageMetadata) -> int | None:
    """The sequence id an entry settles for its producer (None for all but the last chunk)."""
    if is_partial_chunk(metadata):
        return None
    if metadata.HasField("highest_sequence_id"):
        return int(metadata.highest_sequence_id)
    count = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
    return int(metadata.sequence_id) + max(count, 1) - 1


#: the name prefix of the producers replicators create on remote clusters (``pulsar.repl.<local>--><remote>``)
REPLICATOR_PREFIX = "pulsar.repl"


def is_replicator_producer(name: str) -> bool:
    """A replicator's producer: what it sends is deduplicated by the original producer (``dedup_key``)."""
    return name.startswith(REPLICATOR_PREFIX)


def dedup_key(metadata: proto.pb.MessageMetadata) -> str:
    """Whose sequence ids an entry continues: its producer, or for a geo-replicated copy the original
    producer in its source cluster (two clusters may each have a producer of the same name)."""
    if metadata.replicated_from:
        return f"{metadata.replicated_from}/{metadata.producer_name}"
    return metadata.producer_name


class Deduplication:
    def __init__(
        self,
        ledger: ManagedLedger,
        *,
        enabled: bool,
        snapshot_interval_entries: int = 1000,
        snapshot_interval_s: float = 120.0,
    ) -> None:
        self._ledger = ledger
        self.enabled = enabled
        self._snapshot_interval = max(1, snapshot_interval_entries)
        self._snapshot_interval_s = max(0.01, snapshot_interval_s)
        self._timer: asyncio.TimerHandle | None = None
        self._pushed: dict[str, int] = {}
        self._persisted: dict[str, int] = {}
        self._tail: dict[str, asyncio.Future[Position]] = {}
        self._cursor: Cursor | None = None
        self._since_snapshot = 0
        self._snapshotting = False

    async def recover(self) -> None:
        """Load the last snapshot and replay the entries stored after it."""
        if not self.enabled:
            return
        if CURSOR_NAME not in self._ledger.cursors and self._ledger.number_of_entries() == 0:
            return  # nothing stored, nothing to replay: ensure_cursor opens it for the first producer
        self._cursor = await self._ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
        self._persisted = {name: int(seq) for name, seq in self._cursor.properties.items()}
        replayed = 0
        while True:  # bounded by the entries stored; each round consumes a batch or skips one entry
            try:
                entries = await self._cursor.read_entries(REPLAY_BATCH_ENTRIES)
            except EntryCorruptedError as exc:
                # a damaged entry cannot tell whose sequence id it held: skip it, keep the topic usable
                log.error("%s: deduplication replay skips corrupted entry %s", self._ledger.name, exc.position)
                self._cursor.seek(self._ledger.next_valid_position(exc.position))
                continue
            if not entries:
                break
            for entry in entries:
                meta = proto.parse_entry_metadata(entry.data)
                last = last_sequence_id_of(meta)
                if last is not None and not meta.HasField("marker_type"):
                    key = dedup_key(meta)
                    self._persisted[key] = max(self._persisted.get(key, -1), last)
            replayed += len(entries)
        self._pushed = dict(self._persisted)
        self._since_snapshot = replayed
        if replayed:
            log.info("%s: deduplication state rebuilt from %d entries", self._ledger.name, replayed)

    async def ensure_cursor(self) -> None:
        """Open (creating if needed) the ``pulsar.dedup`` cursor; before a producer may send."""
        if self.enabled and self._cursor is None:
            try:
                self._cursor = await self._ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
            except ManagedLedgerError as exc:
                raise ServiceNotReady(f"{self._ledger.name}: deduplication cursor not opened: {exc}") from exc

    def last_sequence_id(self, name: str) -> int:
        return self._persisted.get(name, -1) if self.enabled else -1

    def is_duplicate(self, name: str, sequence_id: int) -> bool:
        return self.enabled and sequence_id <= self._pushed.get(name, -1)

    def pushed(self, name: str, last_seq: int, future: asyncio.Future[Position]) -> None:
        if self.enabled:
            self._pushed[name] = last_seq
            self._tail[name] = future

    def failed(self, name: str) -> None:
        """The append did not happen: a resend of it must be accepted again."""
        if self.enabled:
            self._pushed[name] = self._persisted.get(name, -1)

    def reset_after_failure(self) -> None:
        """Every publish has settled after a failed write: what was accepted but not stored may come again."""
        self._pushed = dict(self._persisted)

    def persisted(self, name: str, last_seq: int, position: Position) -> None:
        if not self.enabled:
            return
        self._persisted[name] = max(self._persisted.get(name, -1), last_seq)
        self._trim()
        self.entry_stored(position)

    def entry_stored(self, position: Position) -> None:
        """Count an entry toward the next snapshot: every ``snapshot_interval_entries`` entries, and at
        most ``snapshot_interval_s`` after the first one since the last (the dedup cursor holds back
        trimming until it moves, so a quiet topic must still snapshot)."""
        if not self.enabled:
            return
        self._since_snapshot += 1
        if self._since_snapshot >= self._snapshot_interval:
            self._start_snapshot(position)
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._snapshot_interval_s, self._snapshot_due)

    def _snapshot_due(self) -> None:
        self._timer = None
        last = self._ledger.last_confirmed
        if self._since_snapshot and last.entry_id >= 0:
            self._start_snapshot(last)

    def _start_snapshot(self, position: Position) -> None:
        if self._snapshotting:
            return
        self._snapshotting = True
        asyncio.get_running_loop().create_task(self._snapshot(position))

    async def answer_duplicate(self, name: str, sequence_id: int) -> Position:
        tail = self._tail.get(name)
        if tail is not None and not tail.done():
            await asyncio.wait([tail])
        if sequence_id <= self._persisted.get(name, -1):
            return DUPLICATE_POSITION
        raise PersistenceError("The original of this resent message was not persisted; send it again")

    async def _snapshot(self, position: Position) -> None:
        try:
            if self._cursor is not None:
                # properties first: a crash before the mark-delete only means a longer (idempotent) replay
                await self._cursor.set_properties(dict(self._persisted))
                self._cursor.acknowledge_cumulative(position)
                self._since_snapshot = 0
        except Exception:
            log.exception("%s: deduplication snapshot failed; it will be retried", self._ledger.name)
        finally:
            self._snapshotting = False

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._cursor is not None and self.enabled and self._since_snapshot:
            last = self._ledger.last_confirmed
            if last.entry_id >= 0:
                self._snapshotting = True
                await self._snapshot(last)

    def _trim(self) -> None:
        while len(self._persisted) > PRODUCERS_MAX:
            oldest = next(iter(self._persisted))
            del self._persisted[oldest]
            self._pushed.pop(oldest, None)
            self._tail.pop(oldest, None)
