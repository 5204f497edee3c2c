"""Fault injection for ledger stores: a wrapper that fails operations, and a store whose disk can crash.

Two pieces, used by the simulator (``tests/sim``) and by fault tests:

* :class:`FaultyLedgerStore` wraps any :class:`~magnetar.storage.api.LedgerStore` and, as its
  :class:`FaultPlan` decides (fail after N operations, fail at random with a probability), raises
  :class:`~magnetar.storage.api.StorageIOError` *instead of* performing the operation: exactly what the
  contract says a disk error does (the append did not happen).
* :class:`CrashableLedgerStore` keeps its ledgers on a :class:`SimDisk` that tells written entries from
  synced ones. An append writes at once and becomes durable (and visible) at the next group sync, a few
  event-loop turns later; :meth:`SimDisk.crash` is a power cut: every unsynced entry is dropped (or, if
  asked, a random prefix of them survives, as a disk may flush on its own), and every store opened on the
  disk before the crash is dead (all its operations raise StoreClosed). Ledger creation, seal and delete
  are durable when they return, as the embedded store's atomic sidecar replacement makes them. Given a
  plan, a sync may fail (op ``sync``, EIO): the ledger's writes not yet durable are cut off and it takes no
  more appends, as the embedded store does after a failed fsync.

Everything is deterministic for a given seed and operation order: no threads, no real time. This module
knows nothing of topics, cursors or the broker.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.core.faults import FaultPlan as _FaultPlan
from magnetar.storage import _rules
from magnetar.storage._rules import LedgerState
from magnetar.storage.api import LedgerInfo, LedgerNotFound, LedgerStore, StorageIOError, StoreClosed

#: Event-loop turns an append may wait before its sync round (drawn per append from the disk's rng).
SYNC_DELAY_TURNS_MAX = 3

STORAGE_OPS = frozenset({"create_ledger", "append", "read", "info", "seal", "delete", "list_ledgers", "sync"})


class FaultPlan(_FaultPlan):
    """A :class:`magnetar.core.faults.FaultPlan` counting the ledger store's operations by default."""

    def __init__(
        self,
        rng: random.Random,
        *,
        fail_after_ops: int | None = None,
        fail_probability: float = 0.0,
        ops: frozenset[str] = STORAGE_OPS,
    ) -> None:
        super().__init__(rng, fail_after_ops=fail_after_ops, fail_probability=fail_probability, ops=ops)

class FailingFsync:
    """An fsync that fails with EIO when its plan says (op ``fsync``), else calls the real one: the test-only
    ``magnetarTestingFsyncFailureProbability`` of a real process. Called from worker threads."""

    def __init__(self, plan: FaultPlan, fsync: Callable[[int], None] = os.fsync) -> None:
        self.plan = plan
        self._fsync = fsync

    def __call__(self, fd: int) -> None:
        if self.plan.should_fail("fsync"):
            raise OSError(errno.EIO, "injected fault: fsync failed (Input/output error)")
        self._fsync(fd)


class FaultyLedgerStore:
    """A :class:`~magnetar.storage.api.LedgerStore` that fails operations as its plan says."""

    def __init__(self, inner: LedgerStore, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan
        self._broken: set[int] = set()

    def _maybe_fail(self, op: str, ledger_id: int | None = None) -> None:
        if self.plan.should_fail(op):
            raise StorageIOError(f"injected fault: {op} failed (No space left on device)", ledger_id=ledger_id)

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        self._maybe_fail("create_ledger")
        return await self.inner.create_ledger(custom_metadata)

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        _rules.check_not_broken(ledger_id, ledger_id in self._broken)
        try:
            self._maybe_fail("append", ledger_id)
            return await self.inner.append(ledger_id, data)
        except StorageIOError:
            self._broken.add(ledger_id)  # the contract: nothing lands after a failed append
            raise

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        self._maybe_fail("read", ledger_id)
        return await self.inner.read(ledger_id, first_entry, last_entry)

    async def info(self, ledger_id: int) -> LedgerInfo:
        self._maybe_fail("info", ledger_id)
        return await self.inner.info(ledger_id)

    async def seal(self, ledger_id: int) -> LedgerInfo:
        self._maybe_fail("seal", ledger_id)
        return await self.inner.seal(ledger_id)

    async def delete(self, ledger_id: int) -> None:
        self._maybe_fail("delete", ledger_id)
        await self.inner.delete(ledger_id)

    async def list_ledgers(self) -> Sequence[int]:
        self._maybe_fail("list_ledgers")
        return await self.inner.list_ledgers()

    async def close(self) -> None:
        await self.inner.close()


# ---- a disk that can lose power ------------------------------------------------------------------------------


@dataclass(slots=True)
class _DiskLedger:
    ledger_id: int
    created_ms: int
    custom_metadata: dict[str, str]
    state: LedgerState = LedgerState.OPEN
    entries: list[bytes] = field(default_factory=list)
    synced: int = 0  # entries[:synced] are durable and visible
    broken: bool = False  # a sync failed: no append may land after the entries it dropped

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.ledger_id,
            entries=self.synced,
            size_bytes=sum(len(e) for e in self.entries[: self.synced]),
            sealed=self.state is LedgerState.SEALED,
            created_ms=self.created_ms,
            custom_metadata=dict(self.custom_metadata),
        )


class SimDisk:
    """What survives a crash: ledgers, their written and synced entries, the next ledger id."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ledgers: dict[int, _DiskLedger] = {}
        self.next_id = _rules.FIRST_LEDGER_ID
        self.generation = 0  # bumped by every crash; stores of an older generation are dead
        self.failed_syncs = 0

    def crash(self, *, keep_unsynced_probability: float = 0.0) -> int:
        """Power cut. Drops unsynced entries (each ledger may keep a random prefix of them with
        ``keep_unsynced_probability``); returns how many entries were dropped."""
        self.generation += 1
        dropped = 0
        for ledger in self.ledgers.values():
            keep = ledger.synced
            unsynced = len(ledger.entries) - keep
            if unsynced and self.rng.random() < keep_unsynced_probability:
                keep += self.rng.randint(0, unsynced)
            dropped += len(ledger.entries) - keep
            del ledger.entries[keep:]
            ledger.synced = keep
        return dropped

    def unsynced_entries(self) -> int:
        return sum(len(x.entries) - x.synced for x in self.ledgers.values())


class CrashableLedgerStore:
    """A :class:`~magnetar.storage.api.LedgerStore` on a :class:`SimDisk`, with group-commit-like syncs."""

    def __init__(self, disk: SimDisk, *, clock: Clock | None = None, sync_faults: FaultPlan | None = None) -> None:
        self._disk = disk
        self._sync_faults = sync_faults
        self._generation = disk.generation
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._closed = False

    def _check_alive(self) -> None:
        if self._closed or self._disk.generation != self._generation:
            raise StoreClosed("ledger store is closed (or its process crashed)")

    def _ledger(self, ledger_id: int) -> _DiskLedger:
        self._check_alive()
        ledger = self._disk.ledgers.get(ledger_id)
        if ledger is None:
            raise LedgerNotFound(f"no ledger {ledger_id}", ledger_id=ledger_id)
        return ledger

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        self._check_alive()
        metadata = _rules.copy_metadata(custom_metadata)
        ledger = _DiskLedger(self._disk.next_id, self._clock.now_ms(), metadata)
        self._disk.next_id += 1
        self._disk.ledgers[ledger.ledger_id] = ledger
        return ledger.info()

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        ledger = self._ledger(ledger_id)
        _rules.check_appendable(ledger_id, ledger.state)
        _rules.check_not_broken(ledger_id, ledger.broken)
        payload = bytes(data)
        _rules.check_entry_size(ledger_id, len(payload))
        ledger.entries.append(payload)
        entry_id = len(ledger.entries) - 1
        for _ in range(self._disk.rng.randint(1, SYNC_DELAY_TURNS_MAX)):  # bounded: the sync delay
            await asyncio.sleep(0)
        self._check_alive()  # a crash while waiting: the write may be lost, the append never completes
        if self._disk.ledgers.get(ledger_id) is not ledger or len(ledger.entries) <= entry_id:
            raise StorageIOError(f"ledger {ledger_id}: entry {entry_id} was lost before its sync", ledger_id)
        unsynced = entry_id >= ledger.synced  # else an earlier sync already covered it: nothing left to fail
        if unsynced and self._sync_faults is not None and self._sync_faults.should_fail("sync"):
            # EIO on fsync: what the page cache holds is unknown, so (as the embedded store does) every write
            # not yet durable is cut off and the ledger takes no more appends; a crash cannot bring them back
            del ledger.entries[ledger.synced :]
            ledger.broken = True
            self._disk.failed_syncs += 1
            raise StorageIOError(f"injected fault: ledger {ledger_id}: fsync failed (Input/output error)", ledger_id)
        ledger.synced = max(ledger.synced, len(ledger.entries))  # one sync covers every write so far
        return entry_id

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        ledger = self._ledger(ledger_id)
        _rules.check_range(ledger_id, first_entry, last_entry, ledger.synced)
        return ledger.entries[first_entry : last_entry + 1]

    async def info(self, ledger_id: int) -> LedgerInfo:
        return self._ledger(ledger_id).info()

    async def seal(self, ledger_id: int) -> LedgerInfo:
        ledger = self._ledger(ledger_id)
        if ledger.state is LedgerState.OPEN:
            ledger.state = LedgerState.SEALED
            ledger.synced = len(ledger.entries)  # sealing drains the pending writes
        return ledger.info()

    async def delete(self, ledger_id: int) -> None:
        self._ledger(ledger_id)
        del self._disk.ledgers[ledger_id]

    async def list_ledgers(self) -> Sequence[int]:
        self._check_alive()
        return sorted(self._disk.ledgers)

    async def close(self) -> None:
        if not self._closed and self._disk.generation == self._generation:
            for ledger in self._disk.ledgers.values():
                ledger.synced = len(ledger.entries)
        self._closed = True


if TYPE_CHECKING:
    _conforms: tuple[LedgerStore, LedgerStore] = (
        FaultyLedgerStore(CrashableLedgerStore(SimDisk(random.Random(0))), FaultPlan(random.Random(0))),
        CrashableLedgerStore(SimDisk(random.Random(0))),
    )
