"""Records read often and written rarely (tenants' and namespaces' policies, read on every topic creation),
kept in memory once read and dropped when the metadata store reports a write below their prefix.

The store's watch sees every writer of the store: this process, and for a shared store (ZooKeeper, or two
brokers in one process over one store) the others, so a second broker's write is seen. A read that was in
flight while a write was reported is not kept (it may hold the old value). An event at the prefix itself (a
store that fell behind says so: anything below may have changed) empties the cache. Bounded: past
``entries_max`` the cache starts over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from magnetar.metadata import api as md

T = TypeVar("T")

ENTRIES_MAX = 4096


class WatchedCache(Generic[T]):
    """``key -> decoded record or None (absent)`` for the keys below one prefix."""

    def __init__(self, store: md.MetadataStore, prefix: str, *, entries_max: int = ENTRIES_MAX) -> None:
        self._store = store
        self._prefix = prefix
        self._entries: dict[str, T | None] = {}
        self._entries_max = entries_max
        self._writes_seen = 0  # reported writes: a read that spans one is not kept
        self._unwatch: Callable[[], None] | None = store.watch(prefix, self._written)

    def _written(self, event: md.WatchEvent) -> None:
        self._writes_seen += 1
        if event.key == self._prefix:
            self._entries.clear()
        else:
            self._entries.pop(event.key, None)

    async def get(self, key: str, read: Callable[[md.Record], T]) -> T | None:
        """The decoded record at ``key`` (None when absent), from memory or read (and decoded) once."""
        try:
            return self._entries[key]
        except KeyError:
            pass
        return await self.refresh(key, read)

    async def refresh(self, key: str, read: Callable[[md.Record], T]) -> T | None:
        seen = self._writes_seen
        record = await self._store.get(key)
        value = None if record is None else read(record)
        if seen == self._writes_seen and self._unwatch is not None:
            if len(self._entries) >= self._entries_max:
                self._entries.clear()
            self._entries[key] = value
        return value

    def forget(self, key: str) -> None:
        """Drop ``key`` (a write of ours failed: the next read asks the store)."""
        self._entries.pop(key, None)

    def close(self) -> None:
        unwatch, self._unwatch = self._unwatch, None
        self._entries.clear()
        if unwatch is not None:
            unwatch()

