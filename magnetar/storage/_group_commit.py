"""Group commit: many appends share one fsync round.

An append writes its record at once, then waits here. One background flusher runs rounds: a round takes
every waiter registered so far, fsyncs each of their files once in a worker thread, and completes them
all; waiters registered while a round runs wait for the next one. So the fsync count follows the number of
rounds, not the number of appends. A file whose fsync fails fails every waiter of that file, including
those already queued for the next round (their records were written after the failed point); the owner's
``on_failure`` callback cuts the file back.

This module knows nothing of the record format, ledgers' lifecycles, topics or the broker.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

from magnetar.storage.api import StorageIOError

logger = logging.getLogger("magnetar.storage")


class SyncTarget(Hashable, Protocol):
    """A file whose written records become durable together."""

    ledger_id: int

    def sync_snapshot(self) -> tuple[int, int, int] | None:
        """``(fd, entries written, bytes written)`` at round start, or None if the file is closed."""
        ...

    def confirm(self, entries: int, end: int) -> None:
        """Everything up to ``entries`` / ``end`` is durable."""
        ...


@dataclass(slots=True)
class _Waiter:
    target: SyncTarget
    future: asyncio.Future[None]


def _fsync_all(fsync: Callable[[int], None], fds: list[int]) -> list[OSError | None]:
    errors: list[OSError | None] = []
    for fd in fds:
        try:
            fsync(fd)
            errors.append(None)
        except OSError as exc:
            errors.append(exc)
    return errors


class GroupCommit:
    """The background flusher; ``wait_durable`` is what an append awaits."""

    def __init__(
        self, fsync: Callable[[int], None], on_failure: Callable[[SyncTarget, OSError], None]
    ) -> None:
        self._fsync = fsync
        self._on_failure = on_failure
        self._waiters: list[_Waiter] = []
        self._wake = asyncio.Event()
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="magnetar-group-commit")
        self.rounds = 0

    async def wait_durable(self, target: SyncTarget) -> None:
        """Return once a round that started after this call has synced ``target``."""
        if self._stopping:
            raise AssertionError("group commit is stopped")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(_Waiter(target, future))
        self._wake.set()
        await future

    async def stop(self) -> None:
        """Finish every waiting round, then end the flusher."""
        self._stopping = True
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        while True:  # lives as long as the store; each turn is one round or the exit
            await self._wake.wait()
            self._wake.clear()
            if not self._waiters:
                if self._stopping:
                    return
                continue
            batch, self._waiters = self._waiters, []
            try:
                await self._round(batch)
            except Exception as exc:  # a bug must fail the appends, not hang them
                logger.exception("group commit round failed")
                for waiter in batch:
                    _complete(waiter, OSError(errno.EIO, f"group commit round failed: {exc}"))

    async def _round(self, batch: list[_Waiter]) -> None:
        targets = list(dict.fromkeys(w.target for w in batch))
        snapshots = [(t, t.sync_snapshot()) for t in targets]
        live = [(t, snap) for t, snap in snapshots if snap is not None]
        failed: dict[SyncTarget, OSError] = {
            t: OSError(errno.EBADF, "file closed before it was synced") for t, snap in snapshots if snap is None
        }
        errors = await asyncio.to_thread(_fsync_all, self._fsync, [snap[0] for _, snap in live])
        self.rounds += 1
        for (target, snap), error in zip(live, errors, strict=True):
            if error is None:
                target.confirm(snap[1], snap[2])
            else:
                failed[target] = error
                self._on_failure(target, error)
        if failed:
            still_waiting = [w for w in self._waiters if w.target not in failed]
            batch = batch + [w for w in self._waiters if w.target in failed]
            self._waiters = still_waiting
        for waiter in batch:
            _complete(waiter, failed.get(waiter.target))


def _complete(waiter: _Waiter, error: OSError | None) -> None:
    if waiter.future.done():  # the appender was cancelled; its record stays
        return
    if error is None:
        waiter.future.set_result(None)
    else:
        message = f"ledger {waiter.target.ledger_id}: fsync failed: {error}"
        waiter.future.set_exception(StorageIOError(message, ledger_id=waiter.target.ledger_id))
