"""Group commit: many appends share one write and one fsync round.

An append hands its record to its file (not yet written), then registers here. A round takes every
waiter registered so far and, for each of their files, writes the records handed over since the last round
in one write (on the loop), has one long-lived flusher thread fsync the file once, and completes them all;
waiters registered while a round runs wait for the next one, which starts as soon as the round ends. So
the write and fsync counts follow the number of rounds, not the number of appends, and a lone append
waits for one write and one fsync, never for a timer.

The hand-off costs one queue put per round on the loop side and one ``call_soon_threadsafe`` per round on
the thread side (not a worker-pool job, a context copy and a future chain per round as
``asyncio.to_thread`` would). A file whose write or fsync fails fails every waiter of that file, including
those already queued for the next round (their records come after the failed point); the owner's
``on_failure`` callback cuts the file back.

This module knows nothing of the record format, ledgers' lifecycles, topics or the broker.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import queue
import threading
from collections.abc import Callable, Hashable
from typing import Protocol

from magnetar.storage.api import StorageIOError

logger = logging.getLogger("magnetar.storage")


class SyncTarget(Hashable, Protocol):
    """A file whose written records become durable together."""

    ledger_id: int

    def take_round(self) -> tuple[int, int, int, list[bytes]] | None:
        """At round start: ``(fd, entries, end, records)``, where ``records`` are the records not yet
        written (the round writes them, in order, at the end of the file) and ``entries`` / ``end`` what the
        file holds once they are; None if the file is closed."""
        ...

    def confirm(self, entries: int, end: int) -> None:
        """Everything up to ``entries`` / ``end`` is durable."""
        ...


class _Waiter:
    __slots__ = ("future", "result", "slot", "target")

    def __init__(self, target: SyncTarget, future: asyncio.Future[int], result: int, slot: bool) -> None:
        self.target = target
        self.future = future
        self.result = result
        self.slot = slot  # an append holding one of the owner's pending slots (drains hold none)


_Live = list[tuple[SyncTarget, tuple[int, int, int, list[bytes]]]]
Write = Callable[[int, memoryview], int]
_Outcome = list[OSError | None] | BaseException


def write_all(write: Write, fd: int, data: bytes) -> None:
    """Write all of ``data`` (the file is opened for appending); OSError if the disk refuses."""
    view = memoryview(data)
    while view:  # bounded: each turn writes at least one byte or raises
        written = write(fd, view)
        if written <= 0:
            raise OSError(f"write returned {written}")
        view = view[written:]


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
    """The flusher; ``register`` is what an append waits on."""

    def __init__(
        self,
        fsync: Callable[[int], None],
        write: Write,
        on_failure: Callable[[SyncTarget, OSError], None],
        release: Callable[[int], None] = lambda slots: None,
    ) -> None:
        self._fsync = fsync
        self._write = write
        self._on_failure = on_failure
        self._release = release
        self._loop = asyncio.get_running_loop()
        self._waiters: list[_Waiter] = []
        self._round_due = False  # a round is scheduled or running
        self._stopping = False
        self._idle: asyncio.Future[None] | None = None  # stop() waits on it for the last round
        self._jobs: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self._round: tuple[list[_Waiter], _Live, dict[SyncTarget, OSError]] | None = None
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def register(
        self, target: SyncTarget, result: int = 0, future: asyncio.Future[int] | None = None, *, slot: bool = False
    ) -> asyncio.Future[int]:
        """``future`` (a new one if None), resolved with ``result`` once a round that started after this call
        synced ``target``, or failed with StorageIOError if that fsync failed. With ``slot``, the round
        hands the append's pending slot back through ``release`` once it completed it."""
        if self._stopping:
            raise AssertionError("group commit is stopped")
        if future is None:
            future = self._loop.create_future()
        self._waiters.append(_Waiter(target, future, result, slot))
        if not self._round_due:
            self._round_due = True
            self._loop.call_soon(self._start_round)  # after this loop pass: its appends join the round
        return future

    async def wait_durable(self, target: SyncTarget) -> None:
        """Return once a round that started after this call has synced ``target``."""
        await self.register(target)

    async def stop(self) -> None:
        """Finish every waiting round, then end the flusher thread."""
        self._stopping = True
        if self._round_due:
            self._idle = self._loop.create_future()
            await self._idle
        if self._thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)
            self._thread = None

    def _start_round(self) -> None:
        batch, self._waiters = self._waiters, []
        try:
            live, failed = self._write_round(batch)
        except Exception as exc:  # a bug must fail the appends, not hang them
            self._round = (batch, [], {})
            self._finish_round(exc)
            return
        self._round = (batch, live, failed)
        if not live:
            self._finish_round([])
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._flusher, name="magnetar-group-commit", daemon=True)
            self._thread.start()
        self._jobs.put([snap[0] for _, snap in live])

    def _write_round(self, batch: list[_Waiter]) -> tuple[_Live, dict[SyncTarget, OSError]]:
        """Write each file's records in one write, here on the loop (a write to the page cache is quick, and
        the thread would wait for the GIL again after it); the files written are the round's to fsync."""
        live: _Live = []
        failed: dict[SyncTarget, OSError] = {}
        for target in dict.fromkeys(w.target for w in batch):
            snap = target.take_round()
            if snap is None:
                failed[target] = OSError(errno.EBADF, "file closed before it was synced")
                continue
            records = snap[3]
            try:
                if records:
                    write_all(self._write, snap[0], records[0] if len(records) == 1 else b"".join(records))
            except OSError as exc:
                failed[target] = exc
                self._on_failure(target, exc)
                continue
            live.append((target, snap))
        return live, failed

    def _flusher(self) -> None:
        """The thread: one job per round, answered with one wake-up of the loop."""
        while True:  # lives until stop() sends None
            jobs = self._jobs.get()
            if jobs is None:
                return
            outcome: _Outcome
            try:
                outcome = _fsync_all(self._fsync, jobs)
            except BaseException as exc:  # handed to the loop, which fails the round
                outcome = exc
            try:
                self._loop.call_soon_threadsafe(self._finish_round, outcome)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                return

    def _finish_round(self, outcome: _Outcome) -> None:
        assert self._round is not None
        batch, live, failed = self._round
        self._round = None
        self.rounds += 1
        try:
            if isinstance(outcome, BaseException):
                raise RuntimeError(f"fsync thread: {outcome!r}") from outcome
            self._settle(batch, live, failed, outcome)
        except Exception as exc:  # a bug must fail the appends, not hang them
            logger.exception("group commit round failed")
            self._fail_round(batch, OSError(errno.EIO, f"group commit round failed: {exc}"))
        slots = sum(1 for w in batch if w.slot)
        if slots:
            self._release(slots)
        if self._waiters:
            self._start_round()  # appends that came during the round: their round starts now
            return
        self._round_due = False
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _settle(
        self, batch: list[_Waiter], live: _Live, failed: dict[SyncTarget, OSError], errors: list[OSError | None]
    ) -> None:
        for (target, snap), error in zip(live, errors, strict=True):
            if error is None:
                target.confirm(snap[1], snap[2])
            else:
                failed[target] = error
                self._on_failure(target, error)
        if failed:
            still_waiting = [w for w in self._waiters if w.target not in failed]
            batch.extend(w for w in self._waiters if w.target in failed)
            self._waiters = still_waiting
            for waiter in batch:
                _complete(waiter, failed.get(waiter.target))
            return
        for waiter in batch:
            if not waiter.future.done():  # the appender was cancelled; its record stays
                waiter.future.set_result(waiter.result)


    def _fail_round(self, batch: list[_Waiter], error: OSError) -> None:
        """Their records may be half written: each file is cut back, and later appends to it fail."""
        for target in dict.fromkeys(w.target for w in batch):
            try:
                self._on_failure(target, error)
            except Exception:
                logger.exception("ledger %d: could not cut back after a failed round", target.ledger_id)
        for waiter in batch:
            _complete(waiter, error)


def _complete(waiter: _Waiter, error: OSError | None) -> None:
    if waiter.future.done():  # the appender was cancelled; its record stays
        return
    if error is None:
        waiter.future.set_result(waiter.result)
    else:
        message = f"ledger {waiter.target.ledger_id}: write or fsync failed: {error}"
        waiter.future.set_exception(StorageIOError(message, ledger_id=waiter.target.ledger_id))
