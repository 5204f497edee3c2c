"""The metadata layer: a versioned key-value tree with compare-and-set and watches (see ``api.py``)."""

from magnetar.metadata.api import (
    NEW_KEY,
    BadVersion,
    EventKind,
    InvalidKey,
    MetadataError,
    MetadataStore,
    MetadataStoreClosed,
    NotFound,
    Record,
    ValueTooLarge,
    WatchCallback,
    WatchEvent,
)
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.metadata.sqlite import SqliteMetadataStore

__all__ = [
    "NEW_KEY",
    "BadVersion",
    "EventKind",
    "InvalidKey",
    "MemoryMetadataStore",
    "MetadataError",
    "MetadataStore",
    "MetadataStoreClosed",
    "NotFound",
    "Record",
    "SqliteMetadataStore",
    "ValueTooLarge",
    "WatchCallback",
    "WatchEvent",
]
