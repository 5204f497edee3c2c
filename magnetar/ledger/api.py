"""The managed-ledger interface the broker programs against.

A managed ledger is one topic's storage: an ordered list of ledgers (the last one open for appends),
rolled over on size, entry count or age, with a small string map of properties, all kept in the metadata
store with compare-and-set. A cursor is a subscription's position in it: a mark-delete position (all at or
before it is acknowledged), individually deleted entries after it, and per-entry batch-index ack sets.
Durable cursors persist and are restored on restart; non-durable ones (readers) live in memory only.

Entries are opaque bytes here; this layer never parses a message. It imports only storage and metadata.

Errors::

    ManagedLedgerError        root of this layer
    ├── ManagedLedgerFenced   another writer took the ledger list (metadata version conflict)
    ├── ManagedLedgerClosed   operation on a closed ledger or cursor
    ├── CursorNotFound        no cursor with that name
    ├── InvalidPosition       a position that can never exist in this ledger (bad input from a client)
    ├── EntryCorruptedError   a stored entry failed its checksum (carries the position); never served as data
    └── OffloadReadError      the offload store failed a read of an offloaded ledger (retryable; carries it)
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from magnetar.storage.offload.api import OffloadContext


class ManagedLedgerError(Exception):
    """Root of the ledger layer's errors."""


class ManagedLedgerFenced(ManagedLedgerError):
    pass


class ManagedLedgerClosed(ManagedLedgerError):
    pass


class CursorNotFound(ManagedLedgerError):
    pass


class InvalidPosition(ManagedLedgerError):
    pass


class EntryCorruptedError(ManagedLedgerError):
    """A stored entry failed its checksum. ``position`` is the first damaged entry of the read; the
    entries before it in the same read were fine (the reader may retry from ``position``'s successor)."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(message)
        self.position = position


class OffloadReadError(ManagedLedgerError):
    """A read of an offloaded ledger failed in the offload store (down, object gone): nothing was served;
    the same read may succeed once the store heals."""

    def __init__(self, message: str, ledger_id: int, *, retryable: bool) -> None:
        super().__init__(message)
        self.ledger_id = ledger_id
        self.retryable = retryable


@dataclass(slots=True)
class OffloadReadHealth:
    """How reads of this managed ledger's offloaded copies fare: a cumulative error count, and the last
    error while it lasts (cleared by the next good read of that ledger from the store)."""

    errors: int = 0
    failing_ledger: int = -1  # -1: the last read from the store succeeded
    last_error: str = ""
    last_error_ms: int = 0

    def failed(self, ledger_id: int, error: str, now_ms: int) -> None:
        self.errors += 1
        self.failing_ledger, self.last_error, self.last_error_ms = ledger_id, error, now_ms

    def succeeded(self, ledger_id: int) -> None:
        if self.failing_ledger == ledger_id:
            self.failing_ledger = -1

    @property
    def failing(self) -> bool:
        return self.failing_ledger >= 0


class Position(NamedTuple):
    """An entry's place in a managed ledger. ``entry_id == -1`` means "before the first entry of ledger".

    A named tuple, not a dataclass: positions are made, compared and hashed per message on the dispatch and
    ack paths, and a tuple does all three in C (ordering is ``(ledger_id, entry_id)`` either way).
    """

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


class Entry(NamedTuple):
    position: Position
    data: bytes


class InitialPosition(enum.Enum):
    LATEST = 0
    EARLIEST = 1


@dataclass(frozen=True, slots=True)
class LedgerOffload:
    """A ledger's copy in the offload store (Pulsar's OffloadContext). Only a ``complete`` copy is ever read;
    ``local_deleted`` (Pulsar's bookkeeperDeleted) says the local copy is gone and reads go to the store."""

    context: OffloadContext
    complete: bool
    local_deleted: bool
    timestamp_ms: int  # when the copy completed (while incomplete: when the attempt began)


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """One ledger of a managed ledger, as internal stats show it."""

    ledger_id: int
    entries: int
    size_bytes: int
    created_ms: int
    offload: LedgerOffload | None = None

    @property
    def offloaded(self) -> bool:
        return self.offload is not None and self.offload.complete


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedLedgerConfig:
    max_entries_per_ledger: int = 50_000  # managedLedgerMaxEntriesPerLedger
    max_size_per_ledger_bytes: int = 2048 * 1024 * 1024  # managedLedgerMaxSizePerLedgerMbytes
    max_ledger_rollover_time_ms: int = 240 * 60 * 1000  # managedLedgerMaxLedgerRolloverTimeMinutes
    min_ledger_rollover_time_ms: int = 10 * 60 * 1000  # managedLedgerMinLedgerRolloverTimeMinutes
    cursor_persist_interval_ms: int = 100  # acks exposed to redelivery after a crash, at most
    # managedLedgerDefaultMarkDeleteRateLimit: cursor writes per second per cursor, applied where the metadata
    # store is shared (ZooKeeper), which then stretches cursor_persist_interval_ms to 1000 / this
    mark_delete_rate_limit: float = 1.0
    max_unacked_ranges_to_persist: int = 10_000  # managedLedgerMaxUnackedRangesToPersist


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """How long data every cursor has consumed is kept (Pulsar's retention). For each limit a negative
    value means unlimited and 0 means none; a consumed ledger goes once it is past either limit."""

    time_ms: int = 0  # defaultRetentionTimeInMinutes / retentionTimeInMinutes
    size_bytes: int = 0  # defaultRetentionSizeInMB / retentionSizeInMB


@dataclass(frozen=True, slots=True)
class TrimResult:
    """What one trim did: the ledgers that left the managed ledger, and those whose storage delete failed
    (they are no longer referenced; their custom metadata names the owner for a later clean-up)."""

    trimmed: tuple[LedgerSummary, ...] = ()
    delete_failed: tuple[int, ...] = ()

    @property
    def entries(self) -> int:
        return sum(x.entries for x in self.trimmed)

    @property
    def size_bytes(self) -> int:
        return sum(x.size_bytes for x in self.trimmed)


class Cursor(Protocol):
    """A subscription's position. Positions acked here are never returned by reads again."""

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete_position(self) -> Position: ...

    @property
    def read_position(self) -> Position:
        """The next position ``read_entries`` will return from (may point past the last entry)."""
        ...

    @property
    def properties(self) -> Mapping[str, int]: ...

    async def read_entries(
        self, max_entries: int, max_bytes: int | None = None, *, max_position: Position | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` confirmed entries from the read position on, skipping acked ones, and
        advance the read position past them. Returns [] when nothing new is confirmed (never waits).
        ``max_position`` (added for transaction isolation) caps the read: no entry after it is returned."""
        ...

    def rewind(self) -> None:
        """Move the read position back to just after the mark-delete position (redeliver everything unacked)."""
        ...

    def seek(self, position: Position) -> None:
        """Move the read position (only) to ``position``."""
        ...

    async def reset(self, position: Position) -> None:
        """Subscription seek: the next read is ``position``; everything before is acked, everything from
        it on unacked (individual acks and batch acks after it are forgotten). Persisted."""
        ...

    def acknowledge(self, positions: Iterable[Position]) -> None:
        """Individual acks of whole entries (idempotent; unknown or already-acked positions are ignored)."""
        ...

    def acknowledge_batch_indexes(self, position: Position, unacked_bits: Sequence[int], batch_size: int) -> None:
        """Partial ack of a batch entry: ``unacked_bits`` is a java.util.BitSet as int64 words whose set bits
        are the indexes still unacked. Bits accumulate (AND) with earlier partial acks; when none stay set the
        entry is acked whole."""
        ...

    def acknowledge_cumulative(self, position: Position) -> None:
        """Ack everything up to and including ``position``."""
        ...

    def batch_ack_set(self, position: Position) -> list[int] | None:
        """The unacked-bits words of a partially acked batch entry, or None if it has no partial ack."""
        ...

    def is_acknowledged(self, position: Position) -> bool:
        ...

    def backlog_entries(self) -> int:
        """Entries after the mark-delete position not individually acked."""
        ...

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Acked ranges after the mark-delete position, as (open-lower, closed-upper] pairs, like Pulsar."""
        ...

    async def set_properties(self, updates: Mapping[str, int]) -> None:
        """Merge ``updates`` into the cursor's properties and persist before returning (added by the ledger
        layer: ``properties`` had no way to be set)."""
        ...

    async def flush(self) -> None:
        """Persist the current state now (durable cursors; no-op for non-durable)."""
        ...

    async def close(self) -> None:
        """Flush and stop; later calls raise ManagedLedgerClosed."""
        ...


class ManagedLedger(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def last_confirmed(self) -> Position:
        """The last durable entry, or (current ledger, -1) when none has been written."""
        ...

    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def cursors(self) -> Mapping[str, Cursor]:
        """Durable cursors by name."""
        ...

    @property
    def entries_added(self) -> int:
        """Entries added since this ledger was opened (internal stats' entriesAddedCounter)."""
        ...

    def number_of_entries(self) -> int: ...

    def total_size_bytes(self) -> int: ...

    def ledgers(self) -> list[LedgerSummary]: ...

    def first_position(self) -> Position:
        """The position just before the first stored entry (what an Earliest cursor's mark-delete is)."""
        ...

    def next_valid_position(self, position: Position) -> Position:
        """The position of the entry after ``position``, crossing ledger boundaries (may be past the end)."""
        ...

    @property
    def writes_paused(self) -> bool:
        """True after a failed add: every later add fails until ``resume_writes``."""
        ...

    def resume_writes(self) -> bool:
        """Accept adds again (the owner has settled every add in flight); False while adds are in flight."""
        ...

    def add_entry_future(self, data: bytes | memoryview) -> asyncio.Future[Position]:
        """Start an add at once (its place is taken by this call) and return a future resolved once it is
        durable; the hot path of publishing, with no task per add."""
        ...

    async def add_entry(self, data: bytes | memoryview) -> Position:
        """Append and return once durable. Rolls over to a new ledger when a limit is reached."""
        ...

    async def read_entry(self, position: Position) -> Entry:
        """One confirmed entry (InvalidPosition if it does not exist)."""
        ...

    async def set_properties(self, updates: Mapping[str, str]) -> None:
        """Merge ``updates`` into the properties and persist (compare-and-set) before returning."""
        ...

    async def open_cursor(self, name: str, initial_position: InitialPosition = InitialPosition.LATEST) -> Cursor:
        """Open (or create and persist) a durable cursor."""
        ...

    def new_non_durable_cursor(self, start: Position, name: str) -> Cursor:
        """A cursor in memory only whose first read is ``start`` (clamped to the stored range)."""
        ...

    async def delete_cursor(self, name: str) -> None:
        ...

    async def trim(self, retention: RetentionPolicy) -> TrimResult:
        """Drop the ledgers every durable cursor has consumed and that are past ``retention`` (never the
        current one): the managed-ledger record first (compare-and-set), then storage. Added with retention."""
        ...

    @property
    def corrupted_entries(self) -> int:
        """Entries reads found damaged since this ledger was opened (each read of one counts once)."""
        ...

    @property
    def offload_enabled(self) -> bool:
        """True when an offload store is configured (tiered storage)."""
        ...

    @property
    def offload_reads(self) -> OffloadReadHealth:
        """Errors of reads from the offload store (tiered storage), for stats and metrics."""
        ...

    async def offload_ledger(self, ledger_id: int) -> LedgerSummary:
        """Copy a sealed ledger to the offload store, verify it and record it complete (idempotent). An
        earlier incomplete attempt's objects are deleted first; this attempt gets a fresh uuid. Added with
        tiered storage."""
        ...

    async def release_local(self, ledger_id: int) -> LedgerSummary:
        """Delete the local copy of a completely offloaded ledger, after checking the offloaded copy is
        readable; reads go to the offload store from then on."""
        ...

    async def close(self) -> None:
        """Flush cursors, seal nothing (the current ledger is sealed on the next open)."""
        ...

    async def delete(self) -> None:
        """Delete every ledger, every cursor and the metadata."""
        ...


class ManagedLedgerFactory(Protocol):
    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger:
        """Open (or create) the managed ledger ``name``; recovery seals the previous writer's last ledger."""
        ...

    async def exists(self, name: str) -> bool: ...

    async def list_names(self) -> list[str]: ...

    async def stored_record(self, name: str) -> tuple[Sequence[LedgerSummary], Mapping[str, str]] | None:
        """The ledger list and properties of ``name`` without opening it; None when it has no record."""
        ...

    async def close(self) -> None: ...
