"""The in-memory metadata store: a dict of records, for tests and single-process experiments.

It is the reference twin of the SQLite store: same validation, same compare-and-set decisions (both use
``_rules``), same watch semantics. It knows nothing of storage, ledgers or the broker, and keeps nothing
across processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.metadata import _rules
from magnetar.metadata.api import (
    EventKind,
    MetadataStore,
    MetadataStoreClosed,
    Record,
    WatchCallback,
    WatchEvent,
)


class MemoryMetadataStore:
    """A :class:`~magnetar.metadata.api.MetadataStore` held in a dict."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._records: dict[str, Record] = {}
        self._watchers = _rules.Watchers()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise MetadataStoreClosed("metadata store is closed")

    async def get(self, key: str) -> Record | None:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        return self._records.get(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        current = self._records.get(key)
        _rules.check_put(key, None if current is None else current.version, expected_version)
        now_ms = self._clock.now_ms()
        if current is None:
            record = Record(key, bytes(value), 0, now_ms, now_ms)
        else:
            record = Record(key, bytes(value), current.version + 1, current.created_ms, now_ms)
        self._records[key] = record
        kind = EventKind.CREATED if current is None else EventKind.MODIFIED
        self._watchers.notify(WatchEvent(key, kind))
        return record

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        current = self._records.get(key)
        _rules.check_delete(key, None if current is None else current.version, expected_version)
        del self._records[key]
        self._watchers.notify(WatchEvent(key, EventKind.DELETED))

    async def children(self, key: str) -> list[str]:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        prefix = _rules.children_prefix(key)
        return _rules.child_names(prefix, [k for k in self._records if k.startswith(prefix)])

    async def exists(self, key: str) -> bool:
        """True when a record is stored at ``key`` (an implicit parent alone does not count)."""
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        return key in self._records

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        self._check_open()
        return self._watchers.add(prefix, callback)

    async def close(self) -> None:
        self._closed = True
        self._watchers.clear()


if TYPE_CHECKING:
    _conforms: MetadataStore = MemoryMetadataStore()
