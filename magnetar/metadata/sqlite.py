"""The embedded metadata store: one SQLite table, compare-and-set inside one transaction.

Durability: the database runs in WAL mode with ``synchronous=NORMAL``; a committed transaction has reached
the OS when ``put``/``delete`` return, so killing the process (SIGKILL) never loses it (a power cut may lose
the last commits, which is SQLite's documented trade-off for NORMAL in WAL mode). The statements are fast
and run inline on the caller's thread; each write is ``BEGIN IMMEDIATE`` .. ``COMMIT`` so another process
opening the same file cannot interleave with a compare-and-set.

Schema: ``records(key TEXT PRIMARY KEY, value BLOB, version INTEGER, created_ms INTEGER, modified_ms
INTEGER)``. Children are found with a range scan over the key order (every key below ``/a`` sorts between
``/a/`` and ``/a0``, since ``0`` follows ``/``). SQLite errors surface as :class:`MetadataError`.

Watches tell this store's own writes inside the write, and the writes of every other connection to the file
(another process, or another store object) shortly after: each write also appends ``(key, kind, writer)`` to
``changes`` in its transaction, and while anything is watched a task looks every ``watch_poll_ms`` whether
another connection committed (``PRAGMA data_version``) and tells the rows it has not seen, in order. The
table keeps the last ``CHANGES_KEPT`` rows; a reader that fell further behind is told one ``MODIFIED``
event at each watched prefix (anything below it may have changed).

Coordination (one process, one session): ``ephemerals(key, session)`` marks the ephemeral records with the
session that made them, ``sequences(parent, next)`` keeps the counters of sequential keys. A session is this
store object; closing it deletes its ephemeral records, and a process that died leaves its own behind until
the next one calls ``purge_other_sessions`` (the standalone does at start: it is the file's only user).

This module knows nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.metadata import _local_session, _rules
from magnetar.metadata.api import (
    NEW_KEY,
    EventKind,
    MetadataError,
    MetadataStoreClosed,
    NotFound,
    Record,
    WatchCallback,
    WatchEvent,
)
from magnetar.metadata.coordination import CoordinationStore, Ownership, SessionEvent, SessionListener, sequential_key

logger = logging.getLogger("magnetar.metadata")

_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL
) WITHOUT ROWID
""", """
CREATE TABLE IF NOT EXISTS ephemerals (key TEXT PRIMARY KEY NOT NULL, session INTEGER NOT NULL) WITHOUT ROWID
""", """
CREATE TABLE IF NOT EXISTS sequences (parent TEXT PRIMARY KEY NOT NULL, next INTEGER NOT NULL) WITHOUT ROWID
""", """
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    writer INTEGER NOT NULL
)
""")
_BUSY_TIMEOUT_MS = 5000
CHANGES_KEPT = 10_000  # rows of ``changes`` kept for other connections' watches
_TRIM_EVERY = 100  # writes between two trims of ``changes``
WATCH_POLL_MS = 100  # how often a watched store looks for other connections' writes


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal" and str(path) != ":memory:":
            raise MetadataError(f"{path}: SQLite refused WAL mode (got {mode})")
        db.execute("PRAGMA synchronous = NORMAL")
        for statement in _SCHEMA:
            db.execute(statement)
    except BaseException:
        db.close()
        raise
    return db


class SqliteMetadataStore:
    """A :class:`~magnetar.metadata.api.MetadataStore` in one SQLite file."""

    def __init__(self, path: str | Path, *, clock: Clock | None = None, watch_poll_ms: int = WATCH_POLL_MS) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._poll_s = max(1, watch_poll_ms) / 1000
        self._poller: asyncio.Task[None] | None = None
        self._writer = _local_session.new_session_id()  # marks this store's rows of ``changes``
        try:
            self._db: sqlite3.Connection | None = _connect(Path(path))
        except sqlite3.Error as exc:
            raise MetadataError(f"cannot open metadata database {path}: {exc}") from exc
        self._watchers = _rules.Watchers()
        self._session = _local_session.LocalSession()
        try:
            rows = self._conn().execute("SELECT key, session FROM ephemerals").fetchall()
        except sqlite3.Error as exc:
            raise MetadataError(f"cannot read metadata database {path}: {exc}") from exc
        self._ephemerals: dict[str, int] = {str(key): int(session) for key, session in rows}
        try:
            self._seen = int(self._conn().execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])
            self._data_version = self._version()
        except sqlite3.Error as exc:
            raise MetadataError(f"cannot read metadata database {path}: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise MetadataStoreClosed("metadata store is closed")
        return self._db

    @contextmanager
    def _transaction(self, key: str) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise MetadataError(f"cannot start a transaction: {exc}", key=key) from exc
        try:
            yield db
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise MetadataError(f"write to {key} failed: {exc}", key=key) from exc
            raise

    def _read(self, key: str) -> Record | None:
        try:
            row = (
                self._conn()
                .execute(
                    "SELECT value, version, created_ms, modified_ms FROM records WHERE key = ?", (key,)
                )
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise MetadataError(f"read of {key} failed: {exc}", key=key) from exc
        if row is None:
            return None
        return Record(key, bytes(row[0]), int(row[1]), int(row[2]), int(row[3]))

    async def get(self, key: str) -> Record | None:
        self._conn()
        self._start_poller()
        _rules.validate_key(key, allow_root=True)
        return self._read(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        return self._put(key, bytes(value), expected_version, ephemeral=False)

    def _put(self, key: str, payload: bytes, expected_version: int | None, *, ephemeral: bool) -> Record:
        self._conn()
        _rules.validate_key(key, allow_root=False)
        with self._transaction(key) as db:
            current = self._read(key)
            _rules.check_put(key, None if current is None else current.version, expected_version)
            _local_session.check_no_ephemeral_ancestor(key, self._ephemerals)
            if ephemeral and current is None and self._has_children(key):
                raise MetadataError(f"{key} has children: it cannot become an ephemeral key", key=key)
            now_ms = self._clock.now_ms()
            if current is None:
                record = Record(key, payload, 0, now_ms, now_ms)
            else:
                record = Record(key, payload, current.version + 1, current.created_ms, now_ms)
            db.execute(
                "INSERT OR REPLACE INTO records (key, value, version, created_ms, modified_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, record.value, record.version, record.created_ms, record.modified_ms),
            )
            if ephemeral:
                db.execute("INSERT OR REPLACE INTO ephemerals (key, session) VALUES (?, ?)", (key, self._session.id))
            kind = EventKind.CREATED if current is None else EventKind.MODIFIED
            self._log_change(db, key, kind)
        if ephemeral:
            self._ephemerals[key] = self._session.id
        self._watchers.notify(WatchEvent(key, kind))
        return record

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        self._conn()
        _rules.validate_key(key, allow_root=False)
        with self._transaction(key) as db:
            current = self._read(key)
            _rules.check_delete(key, None if current is None else current.version, expected_version)
            db.execute("DELETE FROM records WHERE key = ?", (key,))
            if key in self._ephemerals:
                db.execute("DELETE FROM ephemerals WHERE key = ?", (key,))
            self._log_change(db, key, EventKind.DELETED)
        self._ephemerals.pop(key, None)
        self._watchers.notify(WatchEvent(key, EventKind.DELETED))

    async def children(self, key: str) -> list[str]:
        self._conn()
        _rules.validate_key(key, allow_root=True)
        prefix = _rules.children_prefix(key)
        return _rules.child_names(prefix, self._descendants(key, prefix))

    def _descendants(self, key: str, prefix: str, limit: int = -1) -> list[str]:
        upper = prefix[:-1] + "0"
        try:
            rows = (
                self._conn()
                .execute("SELECT key FROM records WHERE key >= ? AND key < ? LIMIT ?", (prefix, upper, limit))
                .fetchall()
            )
        except sqlite3.Error as exc:
            raise MetadataError(f"children of {key} failed: {exc}", key=key) from exc
        return [str(row[0]) for row in rows]

    def _has_children(self, key: str) -> bool:
        return bool(self._descendants(key, _rules.children_prefix(key), limit=1))

    async def exists(self, key: str) -> bool:
        """True when a record is stored at ``key`` (an implicit parent alone does not count)."""
        self._conn()
        _rules.validate_key(key, allow_root=True)
        return self._read(key) is not None

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        self._conn()
        unwatch = self._watchers.add(prefix, callback)
        with contextlib.suppress(RuntimeError):  # outside a running loop: the poller starts with the next read
            self._start_poller()
        return unwatch

    # -- other connections' writes --

    def _log_change(self, db: sqlite3.Connection, key: str, kind: EventKind) -> None:
        seq = db.execute("INSERT INTO changes (key, kind, writer) VALUES (?, ?, ?)",
                         (key, kind.value, self._writer)).lastrowid
        if seq is not None and seq % _TRIM_EVERY == 0:  # the newest rows stay, so seq only grows (no AUTOINCREMENT)
            db.execute("DELETE FROM changes WHERE seq <= ?", (seq - CHANGES_KEPT,))

    def _version(self) -> int:
        return int(self._conn().execute("PRAGMA data_version").fetchone()[0])

    def _start_poller(self) -> None:
        if self._poller is None and self._watchers and self._db is not None:
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="sqlite metadata watch")

    async def _poll(self) -> None:
        while self._db is not None and self._watchers:  # ends with the store, or the last unwatch
            await asyncio.sleep(self._poll_s)
            try:
                self.tell_other_writes()
            except MetadataStoreClosed:
                break
            except (MetadataError, sqlite3.Error):
                logger.exception("cannot read the metadata changes of other connections; trying again")
        self._poller = None

    def tell_other_writes(self) -> None:
        """Tell the watches every write another connection committed since the last look (the poller calls
        it every ``watch_poll_ms``)."""
        version = self._version()
        if version == self._data_version:
            return  # no other connection committed
        self._data_version = version
        rows = self._conn().execute(
            "SELECT seq, key, kind, writer FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
            (self._seen, CHANGES_KEPT + _TRIM_EVERY),
        ).fetchall()
        if not rows:
            return
        if int(rows[0][0]) > self._seen + 1:  # trimmed before this store saw them: say what may have changed
            for prefix in self._watchers.prefixes():
                self._watchers.notify(WatchEvent(prefix, EventKind.MODIFIED))
        self._seen = int(rows[-1][0])
        for _seq, key, kind, writer in rows:
            if int(writer) != self._writer:
                self._watchers.notify(WatchEvent(str(key), EventKind(kind)))

    # -- coordination --

    async def create(self, key: str, value: bytes, *, ephemeral: bool = False, sequential: bool = False) -> Record:
        self._conn()
        _rules.validate_key(key, allow_root=False)
        if sequential:
            parent = _local_session.parent_of(key)
            with self._transaction(key) as db:
                row = db.execute("SELECT next FROM sequences WHERE parent = ?", (parent,)).fetchone()
                counter = 0 if row is None else int(row[0])
                db.execute("INSERT OR REPLACE INTO sequences (parent, next) VALUES (?, ?)", (parent, counter + 1))
            key = sequential_key(key, counter)
        return self._put(key, bytes(value), NEW_KEY, ephemeral=ephemeral)

    async def get_owned(self, key: str) -> tuple[Record, Ownership] | None:
        record = await self.get(key)
        if record is None:
            return None
        return record, self._session.ownership(self._ephemerals.get(key))

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        return self._session.listen(listener)

    async def _delete_ephemerals(self, mine: bool) -> None:
        for key in sorted(k for k, owner in self._ephemerals.items() if (owner == self._session.id) == mine):
            try:
                await self.delete(key)
            except NotFound:
                self._ephemerals.pop(key, None)

    async def purge_other_sessions(self) -> None:
        """Delete the ephemeral records of other sessions: a process that died left them (call it only when
        this process is the file's one user)."""
        await self._delete_ephemerals(mine=False)
        try:
            with self._transaction("/") as db:
                db.execute("DELETE FROM ephemerals WHERE session != ?", (self._session.id,))
        except MetadataStoreClosed:
            return

    async def expire_session(self) -> None:
        """End this store's session as a ZooKeeper session ends (tests)."""
        await self._delete_ephemerals(mine=True)
        self._session.emit(SessionEvent.SESSION_LOST)
        self._session.renew()
        self._session.emit(SessionEvent.SESSION_REESTABLISHED)

    async def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(MetadataError):  # if it fails, they are left for the next purge
                await self._delete_ephemerals(mine=True)
        db, self._db = self._db, None
        self._session.clear()
        self._watchers.clear()
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        if db is not None:
            db.close()


if TYPE_CHECKING:
    _conforms: CoordinationStore = SqliteMetadataStore(":memory:")
