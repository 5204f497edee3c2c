"""A persistent recursive watch on ZooKeeper, emulated with one-shot watches over a mirror of the subtree.

ZooKeeper 3.6+ has persistent recursive watches, but kazoo cannot ask for them, so this is the tree-cache
recipe: every znode below the watched path is read with a data watch and listed with a child watch; a fired
watch marks the znode dirty, and a worker task on the event loop re-reads dirty znodes (with a new watch,
which ZooKeeper sets atomically with the read, so no change slips between) and compares with the mirror:

    no record -> record: CREATED    record -> no record: DELETED    record -> newer record: MODIFIED
    record -> a record of another incarnation (deleted and re-created between two reads): DELETED, CREATED

Successive writes to one key may be told as one event (the mirror sees the latest state), never as none.
kazoo drops every watch when the connection drops, and changes made meanwhile fire nothing: on RECONNECTED
and SESSION_REESTABLISHED every mirrored znode is re-read, so a change during the outage is told then.

The mirror keeps per znode only its record identity, last modification and child names, no values.
Membership follows the parents' child lists (the watched root is always a member). This module knows the
record encoding only through ``zookeeper.decode``; nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from magnetar.metadata.api import EventKind, MetadataError, WatchCallback, WatchEvent
from magnetar.metadata.coordination import SessionEvent, SessionListener
from magnetar.metadata.zk_codec import decode, version_base
from magnetar.metadata.zk_session import RETRYABLE, ZkSession

logger = logging.getLogger("magnetar.metadata.zookeeper")

READS_IN_FLIGHT_MAX = 64  # reads one worker step sends at once
CALLBACKS_MAX = 10_000
_DATA, _CHILDREN, _EMIT = 1, 2, 4
_RESYNC_EVENTS = frozenset({SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED})


class _Store(Protocol):
    """What the mirror needs of the ZooKeeper store."""

    session: ZkSession

    def zk_path(self, key: str) -> str: ...

    def key_of(self, zk_path: str) -> str: ...

    def listen(self, listener: SessionListener) -> Callable[[], None]: ...

    async def read(self, path: str, watch: Callable[..., None] | None = None) -> tuple[bytes, ZnodeStat] | None:
        ...


@dataclass(slots=True)
class _Node:
    record: tuple[int, int] | None = None  # (czxid, version base) of the record it holds; None: no record
    mzxid: int = 0
    children: set[str] = field(default_factory=set)


class SubtreeWatch:
    """The mirror of one watched prefix, shared by every callback on that prefix."""

    def __init__(self, store: _Store, prefix: str) -> None:
        self._store = store
        self._root = store.zk_path(prefix)
        self._skip = "/zookeeper" if self._root == "/" else None  # ZooKeeper's own tree
        self._callbacks: dict[int, WatchCallback] = {}
        self._next_id = 0
        self._nodes: dict[str, _Node] = {self._root: _Node()}
        self._dirty: dict[str, int] = {}
        self._wake = asyncio.Event()
        loop = store.session.loop
        self.ready: asyncio.Future[None] = loop.create_future()
        self._stopped = False
        self._unlisten = store.listen(self._on_session)
        self._mark(self._root, _DATA | _CHILDREN)
        self._task = loop.create_task(self._run(), name=f"zk-watch {prefix}")

    @property
    def empty(self) -> bool:
        return not self._callbacks

    def add(self, callback: WatchCallback) -> Callable[[], None]:
        if len(self._callbacks) >= CALLBACKS_MAX:
            raise MetadataError(f"more than {CALLBACKS_MAX} watches on {self._root}")
        callback_id = self._next_id
        self._next_id += 1
        self._callbacks[callback_id] = callback

        def remove() -> None:
            self._callbacks.pop(callback_id, None)

        return remove

    def stop(self) -> None:
        self._stopped = True
        self._unlisten()
        self._task.cancel()
        if not self.ready.done():
            self.ready.set_result(None)

    # -- inputs (all on the loop) --

    def _mark(self, path: str, flags: int) -> None:
        self._dirty[path] = self._dirty.get(path, 0) | flags
        self._wake.set()

    def _kazoo_watch(self, event: WatchedEvent) -> None:  # on a kazoo thread
        self._store.session._threadsafe(self._on_event, event.type, event.path)

    def _on_event(self, kind: str, path: str | None) -> None:
        if self._stopped or path is None or kind == "NONE":
            return  # NONE: kazoo dropped its watches on a disconnection; the session event re-reads
        if path in self._nodes:
            # A znode created or deleted (and maybe re-created) needs both watches set again.
            flags = {"CHILD": _CHILDREN, "CHANGED": _DATA}.get(kind, _DATA | _CHILDREN)
            self._mark(path, flags | _EMIT)

    def _on_session(self, event: SessionEvent) -> None:
        if event in _RESYNC_EVENTS and not self._stopped:
            for path in self._nodes:
                self._mark(path, _DATA | _CHILDREN | _EMIT)

    # -- the worker --

    async def _run(self) -> None:
        session = self._store.session
        while not self._stopped:  # ends with stop()
            if not self._dirty:
                if not self.ready.done():
                    self.ready.set_result(None)
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = list(self._dirty.items())[:READS_IN_FLIGHT_MAX]
            for path, _ in batch:
                del self._dirty[path]
            results = await asyncio.gather(*(self._fetch(path, flags) for path, flags in batch),
                                           return_exceptions=True)
            failed = False
            for (path, flags), result in zip(batch, results, strict=True):
                if isinstance(result, BaseException):
                    if not isinstance(result, (MetadataError, *RETRYABLE)):
                        logger.error("watch on %s: reading %s failed", self._root, path, exc_info=result)
                    self._mark(path, flags)
                    failed = True
                    continue
                self._apply(path, flags, result)
            if failed and not await session.wait_connected(session.operation_timeout_s):
                logger.warning("watch on %s: ZooKeeper unreachable; will re-read when it is back", self._root)
                self._wake.clear()
                await self._wake.wait()  # the reconnection's session event marks everything again

    async def _fetch(self, path: str, flags: int) -> tuple[Any, Any]:
        data: Any = None
        children: Any = None
        if flags & _DATA:
            data = await self._store.read(path, self._kazoo_watch)
            # An absent root: an exists watch tells its creation; created meanwhile: read it again.
            if (data is None and path == self._root
                    and await self._store.session.call("exists", path, self._kazoo_watch) is not None):
                data = await self._store.read(path, self._kazoo_watch)
        if flags & _CHILDREN:
            try:
                children = await self._store.session.call("get_children", path, self._kazoo_watch)
            except NoNodeError:
                children = None
        return data, children

    def _apply(self, path: str, flags: int, result: tuple[Any, Any]) -> None:
        node = self._nodes.get(path)
        if node is None:
            return  # removed by its parent's listing meanwhile
        emit = bool(flags & _EMIT)
        data, children = result
        if flags & _DATA:
            if data is None:
                self._remove_below(path, keep=path == self._root)
                return
            self._apply_data(path, node, data, emit)
        if flags & _CHILDREN and children is not None:
            self._apply_children(path, node, children, emit)

    def _apply_data(self, path: str, node: _Node, data: tuple[bytes, Any], emit: bool) -> None:
        value, stat = data
        key = self._store.key_of(path)
        record = decode(key, value, stat)
        identity = None if record is None else (stat.czxid, version_base(value))
        before = node.record
        changed = stat.mzxid != node.mzxid
        node.record, node.mzxid = identity, stat.mzxid
        if before is not None and (identity is None or identity != before):
            self._notify(WatchEvent(key, EventKind.DELETED))
            before = None
        if identity is not None and emit:
            if before is None:
                self._notify(WatchEvent(key, EventKind.CREATED))
            elif changed:
                self._notify(WatchEvent(key, EventKind.MODIFIED))

    def _apply_children(self, path: str, node: _Node, names: list[str], emit: bool) -> None:
        base = "" if path == "/" else path
        listed = {f"{base}/{name}" for name in names} - ({self._skip} if self._skip else set())
        for gone in sorted(node.children - listed):
            self._remove_below(gone, keep=False)
        for new in sorted(listed - node.children):
            self._nodes[new] = _Node()
            self._mark(new, _DATA | _CHILDREN | (_EMIT if emit else 0))
        node.children = listed

    def _remove_below(self, path: str, *, keep: bool) -> None:
        """Drop ``path`` (or only what is below it, with ``keep``) from the mirror; a record that was
        there is told DELETED."""
        below = path.rstrip("/") + "/"
        for member in sorted(p for p in self._nodes if p == path or p.startswith(below)):
            node = self._nodes[member]
            if node.record is not None:
                self._notify(WatchEvent(self._store.key_of(member), EventKind.DELETED))
            if member == path and keep:
                self._nodes[member] = _Node()
            else:
                del self._nodes[member]
                self._dirty.pop(member, None)

    def _notify(self, event: WatchEvent) -> None:
        for callback in list(self._callbacks.values()):
            try:
                callback(event)
            except Exception:
                logger.exception("metadata watch callback on %s failed on %s", self._root, event)
