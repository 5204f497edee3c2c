"""The storage layer: append-only ledgers of opaque entries (see ``api.py`` for the contract)."""

from magnetar.storage.api import (
    CountingLedgerIdAllocator,
    EntryCorrupted,
    EntryNotFound,
    LedgerFenced,
    LedgerIdAllocator,
    LedgerInfo,
    LedgerNotFound,
    LedgerSealed,
    LedgerStore,
    StorageError,
    StorageIOError,
    StoreClosed,
    WriteOutcomeUnknown,
)
from magnetar.storage.embedded import EmbeddedLedgerStore
from magnetar.storage.memory import MemoryLedgerStore

__all__ = [
    "CountingLedgerIdAllocator",
    "EmbeddedLedgerStore",
    "EntryCorrupted",
    "EntryNotFound",
    "LedgerFenced",
    "LedgerIdAllocator",
    "LedgerInfo",
    "LedgerNotFound",
    "LedgerSealed",
    "LedgerStore",
    "MemoryLedgerStore",
    "StorageError",
    "StorageIOError",
    "StoreClosed",
    "WriteOutcomeUnknown",
]
