"""The metadata store interface: a versioned key-value tree with compare-and-set and watches.

Keys are absolute paths (``/managed-ledgers/public/default/persistent/t``). Parents exist implicitly: a key
``/a/b/c`` makes ``b`` a child of ``/a``. Every write is compare-and-set on a version when the caller
asks for it; a conflict raises :class:`BadVersion` and the caller decides what to do. This module knows
nothing of storage, ledgers or the broker: the broker, the ledger layer and later services use it.

Errors::

    MetadataError            root of this layer
    ├── BadVersion           expected version did not match (or the key exists when it must not)
    ├── NotFound             the key does not exist (delete, or put with an expected version >= 0)
    ├── InvalidKey           the key is not an absolute, normalised path
    ├── ValueTooLarge        the value exceeds what the backend can hold (ZooKeeper: about 1 MiB)
    └── MetadataStoreClosed  the store was closed
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

#: ``put(..., expected_version=NEW_KEY)`` succeeds only if the key does not exist yet.
NEW_KEY = -1


class MetadataError(Exception):
    """Root of the metadata layer's errors."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class BadVersion(MetadataError):
    """A compare-and-set failed: the stored version is not the expected one."""


class NotFound(MetadataError):
    """The key does not exist."""


class InvalidKey(MetadataError):
    """The key is not an absolute path without empty segments or a trailing slash."""


class ValueTooLarge(MetadataError):
    """The value is larger than the backend holds in one record (ZooKeeper's znode limit)."""


class MetadataStoreClosed(MetadataError):
    """The store is closed."""


@dataclass(frozen=True, slots=True)
class Record:
    """A stored value with its version (0 after creation, +1 per put)."""

    key: str
    value: bytes
    version: int
    created_ms: int
    modified_ms: int


class EventKind(enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    key: str
    kind: EventKind


WatchCallback = Callable[[WatchEvent], None]


class MetadataStore(Protocol):
    """What every metadata backend offers (SQLite embedded, in-memory for tests, ZooKeeper for a cluster)."""

    async def get(self, key: str) -> Record | None:
        """The record at ``key``, or None."""
        ...

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        """Write ``value``. ``expected_version``: None = unconditional, NEW_KEY = must not exist,
        n >= 0 = the stored version must be n. Returns the new record."""
        ...

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        """Delete ``key`` (not its children). NotFound if absent, BadVersion on a version mismatch."""
        ...

    async def children(self, key: str) -> list[str]:
        """Sorted names of the direct children of ``key`` (implicit parents included)."""
        ...

    async def exists(self, key: str) -> bool:
        ...

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        """Call ``callback`` after each write to a key equal to or below ``prefix``.

        The embedded stores call it inside their own writes, once per write; SQLite tells the writes of other
        connections to its file (other processes) too, in order, within ``watch_poll_ms`` of their commit.
        ZooKeeper calls it on the event loop shortly after the write (its own writes and every other
        client's), at least once after the last of quick successive writes to one key (they may be told as
        one event) and never for a write that happened before ``watch`` returned control to the loop.
        Returns an unwatch function."""
        ...

    async def close(self) -> None:
        ...
