"""The in-memory metadata store: a dict of records, for tests and single-process experiments.

It is the reference twin of the SQLite store: same validation, same compare-and-set decisions (both use
``_rules``), same watch semantics, and the same coordination: ephemeral and sequential keys, one session per
store, which ``expire_session`` ends the way a ZooKeeper session ends. ``another_session()`` opens a second
store on the same records with a session of its own, so tests and the simulator can run several "brokers"
on one tree. It knows nothing of storage, ledgers or the broker, and keeps nothing across processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.metadata import _local_session, _rules
from magnetar.metadata.api import (
    NEW_KEY,
    EventKind,
    MetadataError,
    MetadataStoreClosed,
    Record,
    WatchCallback,
    WatchEvent,
)
from magnetar.metadata.coordination import CoordinationStore, Ownership, SessionEvent, SessionListener, sequential_key


class _Tree:
    """What every session on one in-memory tree shares."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.ephemerals: dict[str, int] = {}  # key -> the session that created it
        self.sequences: dict[str, int] = {}  # parent -> next counter
        self.stores: list[MemoryMetadataStore] = []  # the open ones, whose watchers hear every write

    def notify(self, event: WatchEvent) -> None:
        for store in list(self.stores):
            store._watchers.notify(event)


class MemoryMetadataStore:
    """A :class:`~magnetar.metadata.coordination.CoordinationStore` held in a dict."""

    def __init__(self, *, clock: Clock | None = None, _tree: _Tree | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._tree = _tree if _tree is not None else _Tree()
        self._records = self._tree.records
        self._watchers = _rules.Watchers()
        self._closed = False
        self._suspended = False
        self._session = _local_session.LocalSession()
        self._tree.stores.append(self)

    def another_session(self) -> MemoryMetadataStore:
        """A store on the same records with a session of its own (another broker, for tests)."""
        return MemoryMetadataStore(clock=self._clock, _tree=self._tree)

    def _check_open(self) -> None:
        if self._closed:
            raise MetadataStoreClosed("metadata store is closed")
        if self._suspended:
            raise MetadataError("connection to the metadata store lost (suspended session)")

    async def get(self, key: str) -> Record | None:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        return self._records.get(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        return self._put(key, value, expected_version, ephemeral=False)

    def _put(self, key: str, value: bytes, expected_version: int | None, *, ephemeral: bool) -> Record:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        current = self._records.get(key)
        _rules.check_put(key, None if current is None else current.version, expected_version)
        _local_session.check_no_ephemeral_ancestor(key, self._tree.ephemerals)
        if ephemeral and current is None and self._has_children(key):
            raise MetadataError(f"{key} has children: it cannot become an ephemeral key", key=key)
        now_ms = self._clock.now_ms()
        if current is None:
            record = Record(key, bytes(value), 0, now_ms, now_ms)
        else:
            record = Record(key, bytes(value), current.version + 1, current.created_ms, now_ms)
        self._records[key] = record
        if ephemeral:
            self._tree.ephemerals[key] = self._session.id
        self._tree.notify(WatchEvent(key, EventKind.CREATED if current is None else EventKind.MODIFIED))
        return record

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        current = self._records.get(key)
        _rules.check_delete(key, None if current is None else current.version, expected_version)
        del self._records[key]
        self._tree.ephemerals.pop(key, None)
        self._tree.notify(WatchEvent(key, EventKind.DELETED))

    def _has_children(self, key: str) -> bool:
        prefix = _rules.children_prefix(key)
        return any(k.startswith(prefix) for k in self._records)

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

    # -- coordination --

    async def create(self, key: str, value: bytes, *, ephemeral: bool = False, sequential: bool = False) -> Record:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        if sequential:
            parent = _local_session.parent_of(key)
            counter = self._tree.sequences.get(parent, 0)
            self._tree.sequences[parent] = counter + 1
            key = sequential_key(key, counter)
        return self._put(key, value, NEW_KEY, ephemeral=ephemeral)

    async def get_owned(self, key: str) -> tuple[Record, Ownership] | None:
        record = await self.get(key)
        if record is None:
            return None
        return record, self._session.ownership(self._tree.ephemerals.get(key))

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        return self._session.listen(listener)

    def _drop_ephemerals(self) -> None:
        for key in sorted(k for k, owner in self._tree.ephemerals.items() if owner == self._session.id):
            del self._records[key]
            del self._tree.ephemerals[key]
            self._tree.notify(WatchEvent(key, EventKind.DELETED))

    async def expire_session(self) -> None:
        """End this store's session as a ZooKeeper session ends: its ephemeral keys go, listeners hear
        SESSION_LOST, then SESSION_REESTABLISHED on a new session."""
        self._check_open()
        self._drop_ephemerals()
        self._session.emit(SessionEvent.SESSION_LOST)
        self._session.renew()
        self._session.emit(SessionEvent.SESSION_REESTABLISHED)

    def suspend(self) -> None:
        """The session ends while this side does not know it yet (a process paused past its session timeout,
        or cut off): its ephemeral keys go (other sessions see them deleted), and this store hears nothing and
        reaches nothing (operations fail as on a lost connection) until :meth:`resume`."""
        self._check_open()
        self._drop_ephemerals()
        self._tree.stores.remove(self)
        self._suspended = True

    def resume(self) -> None:
        """Back after :meth:`suspend`: listeners hear SESSION_LOST, then SESSION_REESTABLISHED on a new session
        (watchers missed the writes in between: they read again on that event, as on ZooKeeper)."""
        if not self._suspended or self._closed:
            return
        self._suspended = False
        self._tree.stores.append(self)
        self._session.emit(SessionEvent.SESSION_LOST)
        self._session.renew()
        self._session.emit(SessionEvent.SESSION_REESTABLISHED)

    async def close(self) -> None:
        """Close this session: its ephemeral keys go (other sessions on the tree see them deleted)."""
        if self._closed:
            return
        self._closed = True
        self._watchers.clear()
        self._session.clear()
        if not self._suspended:
            self._tree.stores.remove(self)
            self._drop_ephemerals()


if TYPE_CHECKING:
    _conforms: CoordinationStore = MemoryMetadataStore()
