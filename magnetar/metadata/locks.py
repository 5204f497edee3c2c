"""Resource locks on a coordination store (Pulsar's ``LockManager`` and ``ResourceLock``).

A lock is an ephemeral key holding the holder's value (a bundle's owner URLs, say). Acquiring creates it;
a key already there is judged by :meth:`LockManager._revalidate`, the same judgement made again whenever the
lock might have changed hands without this side doing anything:

- on a watch event for the key (someone deleted or changed it),
- on SESSION_REESTABLISHED (every ephemeral of the old session is gone or going), and
- on RECONNECTED, for the locks whose last revalidation could not reach the store.

The judgement (Pulsar's ``ResourceLockImpl.revalidate``):

    absent                                   -> create it again: still ours
    our value, this session                  -> ours
    our value, another (older) session       -> delete that one (compare-and-set) and create ours
    another value, this session              -> delete it and create ours
    another value, another session           -> LOST: another holder has it; ``on_lost`` is called
    not ephemeral                            -> LOST

A store that cannot be reached leaves the lock held (Pulsar: "continue assuming we hold the lock"): safety
is the data fence's job, never the lock's. Lifecycle: ``HELD -> RELEASING -> RELEASED``, ``HELD -> LOST``.
Knows nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

from magnetar.core.lifecycle import Transitions
from magnetar.metadata import _rules
from magnetar.metadata.api import BadVersion, MetadataError, MetadataStoreClosed, NotFound, WatchEvent
from magnetar.metadata.coordination import CoordinationStore, LockBusy, Ownership, SessionEvent

logger = logging.getLogger("magnetar.metadata.locks")

REVALIDATE_ATTEMPTS_MAX = 8  # one judgement; each attempt follows a concurrent change of the key
REVALIDATIONS_QUEUED_MAX = 64  # triggers arriving during one revalidation run it again, this often at most
LOCKS_MAX = 1_000_000


class LockState(enum.Enum):
    HELD = "held"
    RELEASING = "releasing"
    RELEASED = "released"
    LOST = "lost"


LOCK_TRANSITIONS = Transitions(LockState, {
    LockState.HELD: {LockState.RELEASING, LockState.LOST},
    LockState.RELEASING: {LockState.RELEASED},
    LockState.RELEASED: set(),
    LockState.LOST: set(),
})


class ResourceLock:
    """A held lock. ``expired`` completes when it is released or lost (``state`` says which)."""

    def __init__(self, manager: LockManager, key: str, value: bytes, version: int) -> None:
        self.key = key
        self.value = value
        self.version = version
        self.state = LockState.HELD
        self.expired: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._manager = manager
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self.revalidate_on_reconnect = False

    @property
    def held(self) -> bool:
        return self.state is LockState.HELD

    def _transition_to(self, state: LockState) -> None:
        self.state = LOCK_TRANSITIONS.check(self.state, state, f"lock {self.key}")
        if state in LOCK_TRANSITIONS.terminal() and not self.expired.done():
            self.expired.set_result(None)

    async def update_value(self, value: bytes) -> None:
        """Replace the lock's value (compare-and-set on the lock's version). LockBusy if it was lost."""
        if not self.held:
            raise LockBusy(f"lock {self.key} is {self.state.value}", key=self.key)
        try:
            self.version = (await self._manager.store.put(self.key, value, self.version)).version
            self.value = value
            return
        except (BadVersion, NotFound):
            pass
        self.value = value
        await self._manager._revalidate(self)
        if not self.held:
            raise LockBusy(f"lock {self.key} was taken by another holder", key=self.key)

    async def release(self) -> None:
        """Delete the key if it is still ours. Idempotent."""
        if not self.held:
            return
        self._transition_to(LockState.RELEASING)
        try:
            await self._manager.store.delete(self.key, self.version)
        except (NotFound, BadVersion):
            pass  # gone already, or someone else's by now: not ours to delete
        finally:
            self._transition_to(LockState.RELEASED)
            self._manager._forget(self)


class LockManager:
    """The locks this process holds below ``prefix`` on one store, kept valid across session changes."""

    def __init__(
        self, store: CoordinationStore, prefix: str, *, on_lost: Callable[[ResourceLock], None] | None = None
    ) -> None:
        _rules.validate_key(prefix, allow_root=True)
        self.store = store
        self.prefix = prefix
        self._on_lost = on_lost
        self._locks: dict[str, ResourceLock] = {}
        self._finished_tasks: list[asyncio.Task[None]] = []  # revalidations of locks no longer held
        self._closed = False
        self._unwatch = store.watch(prefix, self._on_watch)
        self._unlisten = store.listen(self._on_session)

    @property
    def locks(self) -> dict[str, ResourceLock]:
        return dict(self._locks)

    async def acquire(self, key: str, value: bytes) -> ResourceLock:
        """Take the lock at ``key`` with ``value``. LockBusy when another session holds it."""
        if self._closed:
            raise MetadataStoreClosed("lock manager is closed", key=key)
        _rules.validate_key(key, allow_root=False)
        if not (self.prefix == "/" or key.startswith(self.prefix + "/")):
            raise ValueError(f"{key} is not below this lock manager's prefix {self.prefix}")
        if key in self._locks:
            raise LockBusy(f"{key} is already held here", key=key)
        if len(self._locks) >= LOCKS_MAX:
            raise MetadataError(f"more than {LOCKS_MAX} locks held", key=key)
        try:
            record = await self.store.create(key, value, ephemeral=True)
            lock = ResourceLock(self, key, value, record.version)
        except BadVersion:
            lock = ResourceLock(self, key, value, -1)
            await self._revalidate(lock)
            if not lock.held:
                raise LockBusy(f"{key} is held by another session", key=key) from None
        if self._closed:  # closed while acquiring: give it back
            await lock.release()
            raise MetadataStoreClosed("lock manager is closed", key=key)
        self._locks[key] = lock
        logger.info("acquired lock %s", key)
        return lock

    async def revalidations_done(self, timeout_s: float) -> None:
        """Wait (bounded) until no revalidation is running (tests, orderly shutdown)."""
        tasks = [lock._task for lock in self._locks.values() if lock._task is not None and not lock._task.done()]
        tasks += [t for t in self._finished_tasks if not t.done()]
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout_s)

    async def read(self, key: str) -> bytes | None:
        """The value at a lock's key (whoever holds it), or None."""
        record = await self.store.get(key)
        return None if record is None else record.value

    # -- revalidation --

    def _on_watch(self, event: WatchEvent) -> None:
        lock = self._locks.get(event.key)
        if lock is not None:
            self._schedule(lock)

    def _on_session(self, event: SessionEvent) -> None:
        for lock in list(self._locks.values()):
            if event is SessionEvent.SESSION_REESTABLISHED or (
                event is SessionEvent.RECONNECTED and lock.revalidate_on_reconnect
            ):
                self._schedule(lock)

    def _schedule(self, lock: ResourceLock) -> None:
        if not lock.held or self._closed:
            return
        if lock._task is not None and not lock._task.done():
            lock._again = True
            return
        lock._task = asyncio.get_running_loop().create_task(self._revalidate_queued(lock))

    async def _revalidate_queued(self, lock: ResourceLock) -> None:
        for _ in range(REVALIDATIONS_QUEUED_MAX):
            lock._again = False
            await self._revalidate(lock)
            if not lock._again or not lock.held:
                return
        logger.warning("lock %s: revalidation keeps being triggered; the next change runs it again", lock.key)

    async def _revalidate(self, lock: ResourceLock) -> None:
        """Judge the key against the lock (table in the module docstring); a lost lock is told."""
        try:
            for _ in range(REVALIDATE_ATTEMPTS_MAX):
                if lock.state is not LockState.HELD:
                    return
                if await self._judge(lock):
                    lock.revalidate_on_reconnect = False
                    return
            raise MetadataError(f"lock {lock.key}: the key keeps changing under revalidation", key=lock.key)
        except LockBusy as exc:
            self._lost(lock, str(exc))
        except MetadataStoreClosed:
            return
        except MetadataError as exc:
            lock.revalidate_on_reconnect = True
            logger.warning("lock %s: cannot revalidate now (%s); still assumed held, retried on reconnection",
                           lock.key, exc)

    async def _judge(self, lock: ResourceLock) -> bool:
        """One look at the key: True when settled (ours), False when it changed meanwhile (look again)."""
        found = await self.store.get_owned(lock.key)
        try:
            if found is None:
                lock.version = (await self.store.create(lock.key, lock.value, ephemeral=True)).version
                return True
            record, owner = found
            if owner is Ownership.PERSISTENT:
                raise LockBusy(f"{lock.key} is a persistent key, not a lock", key=lock.key)
            if owner is Ownership.THIS_SESSION and record.value == lock.value:
                lock.version = record.version
                return True
            if owner is Ownership.OTHER_SESSION and record.value != lock.value:
                raise LockBusy(f"{lock.key} is held by another session", key=lock.key)
            # Ours by value from an older session (it may expire any moment), or this session's with another
            # value: replace it with this lock.
            await self.store.delete(lock.key, record.version)
            lock.version = (await self.store.create(lock.key, lock.value, ephemeral=True)).version
            return True
        except (BadVersion, NotFound):
            return False

    def _lost(self, lock: ResourceLock, why: str) -> None:
        if not lock.held:
            return
        logger.warning("lock %s lost: %s", lock.key, why)
        lock._transition_to(LockState.LOST)
        self._forget(lock)
        if self._on_lost is not None:
            try:
                self._on_lost(lock)
            except Exception:
                logger.exception("lock-lost callback failed for %s", lock.key)

    def _forget(self, lock: ResourceLock) -> None:
        if self._locks.get(lock.key) is lock:
            del self._locks[lock.key]
        if lock._task is not None and not lock._task.done():
            self._finished_tasks = [t for t in self._finished_tasks if not t.done()] + [lock._task]

    async def close(self) -> None:
        """Release every lock (their keys are deleted) and stop watching."""
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        self._unlisten()
        for lock in list(self._locks.values()):
            if lock._task is not None:
                lock._task.cancel()
            try:
                await lock.release()
            except MetadataError as exc:
                logger.warning("releasing lock %s on close failed: %s (its session's end removes it)",
                               lock.key, exc)
