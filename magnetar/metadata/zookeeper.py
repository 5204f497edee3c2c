"""The ZooKeeper metadata store: the API's versioned tree on znodes, shared by every broker of a cluster.

Layout: a key is the znode at the same path (below an optional chroot), so Pulsar's keys and JSON values are
what ``zkCli`` shows. ZooKeeper needs parents to exist, the API does not: parents are created on demand as
*implicit* znodes with no data, and pruned again when a delete leaves them empty (a crash between the delete
and the prune may leave an empty one, which ``children`` then lists). A record whose key already has
children (``delete`` of a key with children, ``put`` on an implicit parent) lives in a znode that cannot be
deleted or re-created: it is emptied (deleted) or filled (created) in place.

Data encoding (``zk_codec``): empty data is an implicit parent; JSON values are stored as they are; a small
header marks the rest, and records created in a znode that already existed (whose version did not start at 0).

Versions: compare-and-set reads the znode, decides with :mod:`_rules` (the same decision as every backend)
and writes with the znode's exact version, so a concurrent writer makes the write fail and the loop decides
again on fresh data. Two round trips per write; the price of implicit parents the API promises.

Failures: reads are retried across a reconnection within ``metadataStoreOperationTimeoutSeconds``. A write
whose connection dropped in flight is *uncertain*: after reconnecting the store reads the key back, and a
znode holding exactly what it wrote at the version it wrote counts as its own write. Values larger than
ZooKeeper's packet limit (``jute.maxbuffer``, 1 MiB) are refused with :class:`ValueTooLarge` before sending.

Watches are emulated below ``zk_watch`` (kazoo has no persistent recursive watches). This module knows
nothing of storage, ledgers or the broker; coordination (ephemeral keys, locks) builds on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import ZnodeStat

from magnetar.core.clock import Clock, SystemClock
from magnetar.metadata import _rules
from magnetar.metadata.api import (
    NEW_KEY,
    MetadataError,
    MetadataStoreClosed,
    Record,
    ValueTooLarge,
    WatchCallback,
)
from magnetar.metadata.coordination import CoordinationStore, Ownership, SessionListener
from magnetar.metadata.zk_codec import decode, encode, parse_zk_url, version_base
from magnetar.metadata.zk_session import RETRYABLE, ZkSession
from magnetar.metadata.zk_watch import SubtreeWatch

PACKET_BYTES_MAX = 0xFFFFF  # ZooKeeper's default jute.maxbuffer: one request or reply
PACKET_OVERHEAD_BYTES = 1024  # request header, path length, ACL
WRITE_ATTEMPTS_MAX = 64  # a write lost to concurrent writers this often reports contention
_CONFLICTS = (NodeExistsError, NoNodeError, BadVersionError, NotEmptyError)


class ZooKeeperMetadataStore:
    """A :class:`~magnetar.metadata.api.MetadataStore` on a ZooKeeper ensemble. Call :meth:`start` first."""

    def __init__(
        self,
        hosts: str,
        *,
        chroot: str = "",
        session_timeout_ms: int = 30_000,
        operation_timeout_s: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        if chroot:
            _rules.validate_key(chroot, allow_root=False)
        self.chroot = chroot
        self.session = ZkSession(hosts, session_timeout_ms=session_timeout_ms, operation_timeout_s=operation_timeout_s)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._watches: dict[str, SubtreeWatch] = {}

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> ZooKeeperMetadataStore:
        hosts, chroot = parse_zk_url(url)
        return cls(hosts, chroot=chroot, **kwargs)

    async def start(self) -> ZooKeeperMetadataStore:
        await self.session.start()
        if self.chroot:
            await self._retrying(self.session.call, "ensure_path", self.chroot)
        return self

    # -- paths --

    def zk_path(self, key: str) -> str:
        if key == _rules.ROOT:
            return self.chroot or "/"
        return self.chroot + key

    def key_of(self, zk_path: str) -> str:
        return zk_path[len(self.chroot) :] or "/"

    # -- calls --

    async def _retrying(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A read (or an idempotent call), retried across reconnections within the operation timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.session.operation_timeout_s
        for _ in range(WRITE_ATTEMPTS_MAX):
            try:
                return await fn(*args, **kwargs)
            except RETRYABLE as exc:
                remaining = deadline - loop.time()
                if remaining <= 0 or not await self.session.wait_connected(remaining):
                    raise MetadataError(f"ZooKeeper unreachable: {type(exc).__name__}") from exc
        raise MetadataError("ZooKeeper connection keeps dropping")

    async def read(self, path: str, watch: Callable[..., None] | None = None) -> tuple[bytes, ZnodeStat] | None:
        """The znode's data and stat, or None when it does not exist."""
        try:
            data, stat = await self._retrying(self.session.call, "get", path, watch)
        except NoNodeError:
            return None
        return bytes(data), stat

    async def watches_in_place(self) -> None:
        """Return once every watch registered so far has read its subtree: from then on every change by
        any client is told. Every operation of this store waits for it first, so this store's own writes
        after ``watch`` are always told; a reader of other clients' writes awaits it after ``watch``."""
        pending = [w.ready for w in self._watches.values() if not w.ready.done()]
        if pending:
            try:
                await asyncio.wait_for(asyncio.gather(*pending), self.session.operation_timeout_s)
            except TimeoutError:
                raise MetadataError("ZooKeeper unreachable: watches not in place") from None

    _barrier = watches_in_place

    # -- the API --

    async def get(self, key: str) -> Record | None:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        await self._barrier()
        if key == _rules.ROOT:
            return None
        node = await self.read(self.zk_path(key))
        return None if node is None else decode(key, *node)

    async def exists(self, key: str) -> bool:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        await self._barrier()
        if key == _rules.ROOT:
            return False
        stat = await self._retrying(self.session.call, "exists", self.zk_path(key))
        return stat is not None and stat.dataLength > 0

    async def children(self, key: str) -> list[str]:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        await self._barrier()
        try:
            names = await self._retrying(self.session.call, "get_children", self.zk_path(key))
        except NoNodeError:
            return []
        if key == _rules.ROOT and not self.chroot:
            names = [n for n in names if n != "zookeeper"]
        return sorted(names)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        return await self._put(key, bytes(value), expected_version, ephemeral=False)

    async def _put(self, key: str, value: bytes, expected_version: int | None, *, ephemeral: bool) -> Record:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        path = self.zk_path(key)
        self._check_size(path, value)
        await self._barrier()
        wrote: tuple[bytes, int] | None = None  # (data, znode version) of a write whose outcome is unknown
        for _ in range(WRITE_ATTEMPTS_MAX):
            node = await self.read(path)
            if wrote is not None and node is not None and (node[0], node[1].version) == wrote:
                record = decode(key, *node)
                assert record is not None
                return record
            wrote = None
            current = None if node is None else decode(key, *node)
            _rules.check_put(key, None if current is None else current.version, expected_version)
            try:
                if node is None:
                    data = encode(value, 0, 0)
                    wrote = (data, 0)
                    _, stat = await self.session.call(
                        "create", path, data, ephemeral=ephemeral, makepath=True, include_data=True
                    )
                    return Record(key, value, 0, stat.ctime, stat.mtime)
                old, old_stat = node
                if current is None:  # an implicit parent becomes a record
                    if ephemeral:
                        raise MetadataError(f"{key} has children: it cannot become an ephemeral key", key=key)
                    base, created_ms = old_stat.version + 1, self._clock.now_ms()
                else:
                    base, created_ms = version_base(old), current.created_ms
                data = encode(value, base, created_ms)
                wrote = (data, old_stat.version + 1)
                stat = await self.session.call("set", path, data, old_stat.version)
                return Record(key, value, stat.version - base, created_ms or stat.ctime, stat.mtime)
            except _CONFLICTS:
                wrote = None
                continue
            except NoChildrenForEphemeralsError as exc:
                raise MetadataError(f"{key}: a parent is an ephemeral key, which cannot have children",
                                    key=key) from exc
            except RETRYABLE:
                if not await self.session.wait_connected(self.session.operation_timeout_s):
                    raise MetadataError(f"put of {key}: ZooKeeper unreachable (outcome unknown)", key=key) from None
        raise MetadataError(f"put of {key} lost to concurrent writers {WRITE_ATTEMPTS_MAX} times", key=key)

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        path = self.zk_path(key)
        await self._barrier()
        uncertain = False
        for _ in range(WRITE_ATTEMPTS_MAX):
            node = await self.read(path)
            current = None if node is None else decode(key, *node)
            if uncertain and current is None:
                break
            uncertain = False
            _rules.check_delete(key, None if current is None else current.version, expected_version)
            assert node is not None
            stat = node[1]
            try:
                if stat.numChildren == 0:
                    await self.session.call("delete", path, stat.version)
                else:  # the znode stays for its children: the record goes
                    await self.session.call("set", path, b"", stat.version)
                break
            except _CONFLICTS:
                continue
            except RETRYABLE:
                uncertain = True
                if not await self.session.wait_connected(self.session.operation_timeout_s):
                    raise MetadataError(f"delete of {key}: ZooKeeper unreachable (outcome unknown)",
                                        key=key) from None
        else:
            raise MetadataError(f"delete of {key} lost to concurrent writers {WRITE_ATTEMPTS_MAX} times", key=key)
        await self._prune(path)

    async def _prune(self, path: str) -> None:
        """Delete the implicit parents above ``path`` that are left with no child (best effort: a parent
        someone writes below meanwhile stays, as ZooKeeper refuses to delete it)."""
        stop = self.chroot or ""
        parent = path.rsplit("/", 1)[0]
        for _ in range(path.count("/")):  # one step per level
            if len(parent) <= len(stop):
                return
            try:
                stat = await self._retrying(self.session.call, "exists", parent)
                if stat is None or stat.dataLength > 0 or stat.numChildren > 0:
                    return
                await self.session.call("delete", parent, stat.version)
            except (*_CONFLICTS, *RETRYABLE):
                return
            parent = parent.rsplit("/", 1)[0]

    # -- coordination --

    async def create(self, key: str, value: bytes, *, ephemeral: bool = False, sequential: bool = False) -> Record:
        if not sequential:
            return await self._put(key, bytes(value), NEW_KEY, ephemeral=ephemeral)
        self._check_open()
        _rules.validate_key(key, allow_root=False)
        path = self.zk_path(key)
        value = bytes(value)
        self._check_size(path, value)
        await self._barrier()
        try:
            made, stat = await self.session.call("create", path, encode(value, 0, 0), ephemeral=ephemeral,
                                                 sequence=True, makepath=True, include_data=True)
        except NoChildrenForEphemeralsError as exc:
            raise MetadataError(f"{key}: a parent is an ephemeral key, which cannot have children", key=key) from exc
        except RETRYABLE as exc:
            # The name it would have had is unknown: the caller decides (Pulsar's callers retry).
            raise MetadataError(f"sequential create of {key}: connection lost (outcome unknown)", key=key) from exc
        return Record(self.key_of(made), value, 0, stat.ctime, stat.mtime)

    async def get_owned(self, key: str) -> tuple[Record, Ownership] | None:
        self._check_open()
        _rules.validate_key(key, allow_root=True)
        await self._barrier()
        if key == _rules.ROOT:
            return None
        node = await self.read(self.zk_path(key))
        record = None if node is None else decode(key, *node)
        if record is None:
            return None
        assert node is not None
        owner = node[1].ephemeralOwner
        if not owner:
            return record, Ownership.PERSISTENT
        return record, Ownership.THIS_SESSION if owner == self.session.session_id else Ownership.OTHER_SESSION

    def _check_size(self, path: str, value: bytes) -> None:
        size = len(encode(value, 1, self._clock.now_ms())) + len(path.encode()) + PACKET_OVERHEAD_BYTES
        if size > PACKET_BYTES_MAX:
            raise ValueTooLarge(
                f"{len(value)} bytes at {path}: ZooKeeper holds at most about "
                f"{PACKET_BYTES_MAX - PACKET_OVERHEAD_BYTES - len(path)} bytes in one znode (jute.maxbuffer)",
                key=self.key_of(path),
            )

    # -- watches and session --

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        self._check_open()
        _rules.validate_key(prefix, allow_root=True)
        subtree = self._watches.get(prefix)
        if subtree is None:
            if len(self._watches) >= _rules.WATCHES_MAX:
                raise MetadataError(f"more than {_rules.WATCHES_MAX} watched prefixes", key=prefix)
            subtree = SubtreeWatch(self, prefix)
            self._watches[prefix] = subtree
        unwatch_one = subtree.add(callback)

        def unwatch() -> None:
            unwatch_one()
            if subtree.empty and self._watches.get(prefix) is subtree:
                del self._watches[prefix]
                subtree.stop()

        return unwatch

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        """Session events (connection lost, reconnected, session lost, re-established)."""
        return self.session.listen(listener)

    def _check_open(self) -> None:
        if self.session.closed:
            raise MetadataStoreClosed("metadata store is closed")

    async def close(self) -> None:
        for subtree in self._watches.values():
            subtree.stop()
        self._watches.clear()
        await self.session.close()


if TYPE_CHECKING:
    _conforms: CoordinationStore = ZooKeeperMetadataStore("127.0.0.1:2181")
