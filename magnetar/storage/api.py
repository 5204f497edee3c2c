"""The ledger store interface: append-only ledgers of opaque entries, sealed on close.

A ledger is an ordered sequence of entries (opaque bytes) numbered from 0, owned by one writer, sealed
once closed, deleted whole. Each ledger carries custom metadata saying who owns it (``application``,
``component``, the managed-ledger name, the cursor name) so later services (two-phase deletion, audits)
can check before deleting. Ledger ids are unique for the life of a store and never reused; a store shared
by several brokers takes them from an injected :class:`LedgerIdAllocator` (one counter for the cluster).

An append returns only once the entry is durable under the store's sync policy (fsync with group commit
by default). This layer knows nothing of topics, cursors, the protocol or the broker.

Errors::

    StorageError            root of this layer
    ├── LedgerNotFound      no ledger with that id
    ├── LedgerSealed        append to a sealed ledger
    │   └── LedgerFenced    another writer sealed the ledger under this one (a shared store's fence)
    ├── EntryNotFound       read beyond the last entry
    ├── EntryCorrupted      a stored record failed its checksum (carries ledger_id, entry_id)
    ├── StorageIOError      the disk failed (full, I/O error); the append did not happen
    │   └── WriteOutcomeUnknown  a shared store's write got no answer: it may have happened
    └── StoreClosed         the store was closed
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class StorageError(Exception):
    """Root of the storage layer's errors."""

    def __init__(self, message: str, ledger_id: int | None = None, entry_id: int | None = None) -> None:
        super().__init__(message)
        self.ledger_id = ledger_id
        self.entry_id = entry_id


class LedgerNotFound(StorageError):
    pass


class LedgerSealed(StorageError):
    pass


class LedgerFenced(LedgerSealed):
    """Another writer sealed the ledger while this one was appending: the appends from the fenced point on
    did not happen. A kind of :class:`LedgerSealed`, so callers treat it as "sealed by another opener"."""


class EntryNotFound(StorageError):
    pass


class EntryCorrupted(StorageError):
    pass


class StorageIOError(StorageError):
    pass


class WriteOutcomeUnknown(StorageIOError):
    """A write to a shared store failed without an answer (timeouts, the endpoint gone): its object may exist
    after all. An append that fails so is never acknowledged, and the ledger takes no more appends; its entry
    stays out of the ledger once the writer seals it, but may be counted if another owner seals it first."""


class StoreClosed(StorageError):
    pass


@dataclass(frozen=True, slots=True)
class LedgerInfo:
    ledger_id: int
    entries: int  # number of entries; the last entry id is entries - 1
    size_bytes: int  # sum of entry payload sizes
    sealed: bool
    created_ms: int
    custom_metadata: Mapping[str, str] = field(default_factory=dict)


class LedgerStore(Protocol):
    """What every ledger backend offers (embedded segment files, in-memory for tests, later offload)."""

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        """Create an empty open ledger; its creation is durable when this returns."""
        ...

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        """Append one entry and return its entry id once durable. Concurrent appends to one ledger get
        consecutive ids in call order. Once an append to a ledger has failed, every later append to it fails
        too (StorageIOError): no entry ever lands after one that did not, so a writer never finds a stored
        entry behind a failed one (the writer seals the ledger and moves on to a new one)."""
        ...

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        """Entries first..last inclusive. EntryNotFound past the end, EntryCorrupted on a bad checksum."""
        ...

    async def info(self, ledger_id: int) -> LedgerInfo:
        ...

    async def seal(self, ledger_id: int) -> LedgerInfo:
        """Close the ledger for appends (idempotent); returns the final info."""
        ...

    async def delete(self, ledger_id: int) -> None:
        """Delete the ledger and its data. LedgerNotFound if absent."""
        ...

    async def list_ledgers(self) -> Sequence[int]:
        """Ids of every ledger in the store, ascending."""
        ...

    async def close(self) -> None:
        ...


class LedgerIdAllocator(Protocol):
    """Hands out ledger ids: each id once, ever, across every process sharing one ledger store."""

    async def next_id(self) -> int:
        """A new id (>= 1), never returned before by this allocator or any other sharing its counter."""
        ...


class CountingLedgerIdAllocator:
    """The allocator for one process: ids ``start``, ``start + 1``, ... from an in-memory counter (a store
    that persists its own counter, or a test, says where to start)."""

    def __init__(self, start: int = 1) -> None:
        if start < 1:
            raise ValueError("ledger ids start at 1 or above")
        self._next = start

    async def next_id(self) -> int:
        allocated, self._next = self._next, self._next + 1
        return allocated


@runtime_checkable
class StartsAppends(Protocol):
    """A store whose appends can start without a task: the entry takes its place at the call."""

    def start_append(self, ledger_id: int, data: bytes | memoryview) -> asyncio.Future[int]:
        """What ``append`` does, as a future started now (same order, same errors, through the future)."""
        ...
