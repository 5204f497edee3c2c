"""The embedded ledger store: one append-only data file per ledger, group commit, recovery at open.

On disk (details in ``_files`` and ``_format``)::

    <dir>/ledgers/<id>.log    records [u32 length][u32 crc32c(data)][u32 crc32c(header)][data]
    <dir>/ledgers/<id>.meta   JSON sidecar (id, created_ms, custom metadata, sealed, sealed_entries),
                              replaced atomically; the ledger exists iff its sidecar does
    <dir>/next_ledger_id      written before a delete, so ids are never reused across restarts

Appends write their record at once, in call order (so concurrent appends to one ledger get consecutive
ids), then wait for a group-commit round (``_group_commit``) unless ``journal_sync_data`` is False; at most
``pending_appends_max`` appends are in flight, later ones wait for room (back-pressure). Only entries
whose append completed are visible to ``read`` and ``info``. Reads use an in-memory index of record
offsets, rebuilt by a scan that cuts torn tails when a ledger is first used after open (a restart reads
the sidecars only, not every byte stored); every read verifies the checksums.

Disk errors: a failed write cuts the partial record back off and raises StorageIOError; a failed fsync
cuts the file back to its last durable entry and fails every append after it. If cutting back fails too,
the ledger is sealed at its last durable entry (in memory at once, in the sidecar on the next ``seal``
or at ``close``; recovery drops records past a sealed count). The store keeps serving other ledgers.

Open files are bounded: a sealed ledger's file is closed at recovery, and at most ``open_files_max``
files stay open (the least recently used idle ones are closed and opened again when next read or
appended to), so the descriptors held follow the cache and the ledgers being written, not the number
of ledgers on disk or of topics ever loaded.

Reads, writes and the scan use plain blocking calls on the event loop (page-cache fast); fsyncs run in
the group-commit thread, small-file replacement in worker threads. An append starts without a task
(``start_append``: the record is written at the call). This module knows nothing of topics, cursors or the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from magnetar.core.clock import Clock, SystemClock
from magnetar.core.descriptors import report_if_out_of_descriptors
from magnetar.storage import _files, _format, _rules
from magnetar.storage._group_commit import GroupCommit, SyncTarget, Write, write_all
from magnetar.storage._rules import LedgerState
from magnetar.storage._write_errors import WriteErrorLog
from magnetar.storage.api import (
    LedgerInfo,
    LedgerNotFound,
    LedgerStore,
    StorageError,
    StorageIOError,
    StoreClosed,
)

logger = logging.getLogger("magnetar.storage")

#: Appends written but not yet completed, across all ledgers; more wait for room.
PENDING_APPENDS_MAX = 4096
#: Ledger data files kept open while idle (the least recently used idle ones are closed).
OPEN_FILES_MAX = 1024



class _Queued(NamedTuple):
    """An append waiting for room."""

    ledger_id: int
    record: bytes
    future: asyncio.Future[int]


class _LedgerFile:
    """One ledger: its data file, the offsets of its records, how much of it is durable."""

    def __init__(
        self, sidecar: _files.Sidecar, fd: int | None, offsets: array[int], end: int, write: Write
    ) -> None:
        self.ledger_id = sidecar.ledger_id
        self.created_ms = sidecar.created_ms
        self.custom_metadata = dict(sidecar.custom_metadata)
        self.state = LedgerState.SEALED if sidecar.sealed else LedgerState.OPEN
        self.sealed_durable = sidecar.sealed
        self.fd: int | None = fd
        self.offsets = offsets
        self.written_end = end
        self.confirmed = len(offsets)
        self.confirmed_end = end
        self.unwritten: list[bytes] = []  # handed over, written by the next group-commit round
        self.lock = asyncio.Lock()
        self.cut_back_failed = False
        self.broken = False  # an append failed: no later one may land after it
        self._write = write

    def transition_to(self, target: LedgerState) -> None:
        _rules.check_transition(self.ledger_id, self.state, target)
        self.state = target

    def take_round(self) -> tuple[int, int, int, list[bytes]] | None:
        if self.fd is None:
            return None
        records, self.unwritten = self.unwritten, []
        return self.fd, len(self.offsets), self.written_end, records

    def confirm(self, entries: int, end: int) -> None:
        if entries > self.confirmed:
            self.confirmed, self.confirmed_end = entries, end

    def _fd(self) -> int:
        if self.fd is None:
            raise StorageIOError(f"ledger {self.ledger_id}: file is closed", ledger_id=self.ledger_id)
        return self.fd

    def hand_over(self, record: bytes) -> int:
        """Take the next entry id for ``record``; the next group-commit round writes it."""
        self._fd()
        self.offsets.append(self.written_end)
        self.written_end += len(record)
        self.unwritten.append(record)
        return len(self.offsets) - 1

    def write_record(self, record: bytes) -> int:
        """Write one record at the end now; on failure cut it back off (OSError propagates either way)."""
        fd, start = self._fd(), self.written_end
        try:
            write_all(self._write, fd, record)
        except OSError:
            try:
                os.ftruncate(fd, start)
            except OSError:
                self.cut_back_failed = True  # the caller seals the ledger
            raise
        self.offsets.append(start)
        self.written_end = start + len(record)
        return len(self.offsets) - 1

    def cut_back(self) -> None:
        """Drop everything written after the last durable entry."""
        self.unwritten = []
        del self.offsets[self.confirmed :]
        self.written_end = self.confirmed_end
        os.ftruncate(self._fd(), self.confirmed_end)

    def _record_end(self, entry_id: int) -> int:
        return self.offsets[entry_id + 1] if entry_id + 1 < len(self.offsets) else self.written_end

    def read(self, first_entry: int, last_entry: int) -> list[bytes]:
        start, end = self.offsets[first_entry], self._record_end(last_entry)
        try:
            view = memoryview(os.pread(self._fd(), end - start, start))
        except OSError as exc:
            raise StorageIOError(f"ledger {self.ledger_id}: read failed: {exc}", self.ledger_id) from exc
        starts = [offset - start for offset in self.offsets[first_entry : last_entry + 1]]
        return _format.decode_run(view, starts, end - start, self.ledger_id, first_entry)

    def sidecar(self) -> _files.Sidecar:
        sealed = self.state is LedgerState.SEALED
        return _files.Sidecar(
            self.ledger_id, self.created_ms, self.custom_metadata, sealed, self.confirmed if sealed else None
        )

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.ledger_id,
            entries=self.confirmed,
            size_bytes=self.confirmed_end - _format.HEADER_BYTES * self.confirmed,
            sealed=self.state is LedgerState.SEALED,
            created_ms=self.created_ms,
            custom_metadata=dict(self.custom_metadata),
        )

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def _io_error(ledger_id: int | None, what: str, exc: OSError) -> StorageIOError:
    report_if_out_of_descriptors(exc)
    return StorageIOError(f"ledger {ledger_id}: {what} failed: {exc}", ledger_id=ledger_id)


class EmbeddedLedgerStore:
    """A :class:`~magnetar.storage.api.LedgerStore` in a local directory. Build it with :meth:`open`."""

    def __init__(
        self,
        layout: _files.Layout,
        sidecars: list[_files.Sidecar],
        next_id: int,
        persisted_next_id: int,
        *,
        journal_sync_data: bool,
        pending_appends_max: int,
        clock: Clock,
        fsync: Callable[[int], None],
        write: Write,
        open_files_max: int = OPEN_FILES_MAX,
    ) -> None:
        if pending_appends_max < 1:
            raise ValueError("pending_appends_max must be at least 1")
        self._layout = layout
        self._write = write
        self._ledgers: dict[int, _LedgerFile] = {}
        # ledgers found at open whose data file is not scanned yet: scanned when first used, so a restart
        # reads sidecars only, however much data the store holds
        self._unscanned: dict[int, _files.Sidecar] = {sidecar.ledger_id: sidecar for sidecar in sidecars}
        self._next_id = next_id
        self._persisted_next_id = persisted_next_id
        self._delete_lock = asyncio.Lock()
        self._sync = journal_sync_data
        self._pending = 0  # appends written, not yet durable
        self._pending_max = pending_appends_max
        self._backlog: deque[_Queued] = deque()  # appends waiting for room, written in call order
        self._clock = clock
        self._group = GroupCommit(fsync, write, self._on_sync_failure, self._release)
        self.write_errors = WriteErrorLog(self._clock)
        self._closed = False
        self._open_files_max = max(1, open_files_max)
        self._open_files: OrderedDict[int, _LedgerFile] = OrderedDict()  # least recently used first

    @classmethod
    async def open(
        cls,
        directory: Path,
        *,
        journal_sync_data: bool = True,
        pending_appends_max: int = PENDING_APPENDS_MAX,
        clock: Clock | None = None,
        fsync: Callable[[int], None] = os.fsync,
        write: Write = os.write,
        open_files_max: int = OPEN_FILES_MAX,
    ) -> EmbeddedLedgerStore:
        """Open (creating if needed) the store in ``directory``: every ledger's sidecar is read now, its data
        file scanned (torn tail cut) when the ledger is first used.

        ``fsync`` and ``write`` are the system calls used for data files, injectable for fault tests."""
        layout = _files.Layout(Path(directory), fsync)
        try:
            await asyncio.to_thread(layout.lock)
            sidecars, next_id, persisted = await asyncio.to_thread(layout.recover)
        except OSError as exc:
            layout.unlock()
            raise _io_error(None, f"opening {directory}", exc) from exc
        except BaseException:
            layout.unlock()
            raise
        return cls(
            layout, sidecars, next_id, persisted,
            journal_sync_data=journal_sync_data, pending_appends_max=pending_appends_max,
            clock=clock if clock is not None else SystemClock(), fsync=fsync, write=write,
            open_files_max=open_files_max,
        )  # fmt: skip

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("ledger store is closed")

    def _ledger(self, ledger_id: int) -> _LedgerFile:
        self._check_open()
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            if ledger_id not in self._unscanned:
                raise LedgerNotFound(f"no ledger {ledger_id}", ledger_id=ledger_id)
            ledger = self._scan(ledger_id)
        return ledger

    def _scan(self, ledger_id: int) -> _LedgerFile:
        """Recover a ledger found at open on its first use (a blocking scan, like a read)."""
        try:
            found = self._layout.recover_ledger(self._unscanned[ledger_id])
        except OSError as exc:
            raise _io_error(ledger_id, "recovery", exc) from exc
        del self._unscanned[ledger_id]
        ledger = _LedgerFile(found.sidecar, found.fd, found.scan.offsets, found.scan.end, self._write)
        self._ledgers[ledger_id] = ledger
        self._remember_open(ledger)
        return ledger

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        self._check_open()
        metadata = _rules.copy_metadata(custom_metadata)
        ledger_id = self._next_id
        self._next_id += 1
        sidecar = _files.Sidecar(ledger_id, self._clock.now_ms(), metadata)
        try:
            fd = await asyncio.to_thread(self._layout.create_ledger, sidecar)
        except OSError as exc:
            self.write_errors.failed(ledger_id, "create", exc)
            raise _io_error(ledger_id, "create", exc) from exc
        ledger = _LedgerFile(sidecar, fd, array("Q"), 0, self._write)
        if self._closed:  # closed while the files were being made: do not leak the descriptor
            ledger.close()
            raise StoreClosed("ledger store is closed", ledger_id=ledger_id)
        self._ledgers[ledger_id] = ledger
        self._remember_open(ledger)
        return ledger.info()

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        return await self.start_append(ledger_id, data)

    def start_append(self, ledger_id: int, data: bytes | memoryview) -> asyncio.Future[int]:
        """Write the entry now (or, with no room, once earlier appends completed; always in call order) and
        return a future for its entry id, resolved once it is durable. Errors come through the future."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        try:
            self._appendable(ledger_id)
            payload = bytes(data)
            _rules.check_entry_size(ledger_id, len(payload))
        except StorageError as exc:
            future.set_exception(exc)
            return future
        record = _format.encode(payload)
        if self._backlog or self._pending >= self._pending_max:
            self._backlog.append(_Queued(ledger_id, record, future))
        else:
            self._append_now(ledger_id, record, future)
        return future

    def _append_now(self, ledger_id: int, record: bytes, future: asyncio.Future[int]) -> None:
        try:
            ledger = self._appendable(ledger_id)  # it may have changed while the append waited for room
            if not self._sync:
                entry_id = self._write_record(ledger, record)
                ledger.confirm(len(ledger.offsets), ledger.written_end)
                future.set_result(entry_id)
                return
            self._ensure_open(ledger)
            entry_id = ledger.hand_over(record)
        except StorageError as exc:
            future.set_exception(exc)
            return
        self._pending += 1
        self._group.register(ledger, entry_id, future, slot=True)
        if self.write_errors.failing:  # the first durable append after failures says writes are back
            future.add_done_callback(self.write_errors.note_outcome)

    def _release(self, slots: int) -> None:
        """A group-commit round completed ``slots`` appends: write the ones waiting for room."""
        self._pending -= slots
        while self._backlog and self._pending < self._pending_max:
            queued = self._backlog.popleft()
            if queued.future.done():  # cancelled while it waited: never written
                continue
            if self._closed:
                queued.future.set_exception(StoreClosed("ledger store is closed", ledger_id=queued.ledger_id))
            else:
                self._append_now(queued.ledger_id, queued.record, queued.future)

    def _appendable(self, ledger_id: int) -> _LedgerFile:
        ledger = self._ledger(ledger_id)
        _rules.check_appendable(ledger_id, ledger.state)
        _rules.check_not_broken(ledger_id, ledger.broken)
        return ledger

    def _write_record(self, ledger: _LedgerFile, record: bytes) -> int:
        self._ensure_open(ledger)
        try:
            entry_id = ledger.write_record(record)
        except OSError as exc:
            self.write_errors.failed(ledger.ledger_id, "append", exc)
            ledger.broken = True
            if ledger.cut_back_failed:
                self._seal_in_memory(ledger, "could not cut back a failed write")
            raise _io_error(ledger.ledger_id, "append", exc) from exc
        self.write_errors.succeeded()
        return entry_id

    def _on_sync_failure(self, target: SyncTarget, error: OSError) -> None:
        ledger = self._ledgers.get(target.ledger_id)
        if ledger is None or ledger is not target:
            return
        self.write_errors.failed(ledger.ledger_id, "write or fsync (entries not yet durable are dropped, the "
                                 "ledger is closed to appends)", error)
        ledger.broken = True
        try:
            ledger.cut_back()
        except (OSError, StorageError):
            self._seal_in_memory(ledger, "could not cut back after a failed fsync")

    def _seal_in_memory(self, ledger: _LedgerFile, why: str) -> None:
        logger.error("ledger %d: sealed at entry count %d: %s", ledger.ledger_id, ledger.confirmed, why)
        if ledger.state is LedgerState.OPEN:
            ledger.transition_to(LedgerState.SEALED)

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        ledger = self._ledger(ledger_id)
        _rules.check_range(ledger_id, first_entry, last_entry, ledger.confirmed)
        self._ensure_open(ledger)
        return ledger.read(first_entry, last_entry)

    def _ensure_open(self, ledger: _LedgerFile) -> None:
        """A ledger's file is opened on demand (read-only once sealed) and joins the recently used ones."""
        if ledger.fd is None and ledger.state is not LedgerState.DELETED:
            try:
                ledger.fd = self._layout.open_data(ledger.ledger_id, writable=ledger.state is LedgerState.OPEN)
            except OSError as exc:
                raise _io_error(ledger.ledger_id, "open", exc) from exc
        self._remember_open(ledger)

    def _remember_open(self, ledger: _LedgerFile) -> None:
        """Keep at most ``open_files_max`` files open, closing the least recently used idle ones. A file
        with writes not yet durable stays open (a sync round may hold its descriptor)."""
        if ledger.fd is None:
            return
        self._open_files[ledger.ledger_id] = ledger
        self._open_files.move_to_end(ledger.ledger_id)
        surplus = len(self._open_files) - self._open_files_max
        for ledger_id in list(self._open_files)[:max(surplus, 0)] if surplus > 0 else ():
            candidate = self._open_files[ledger_id]
            if candidate is not ledger and len(candidate.offsets) == candidate.confirmed:
                del self._open_files[ledger_id]
                candidate.close()

    async def info(self, ledger_id: int) -> LedgerInfo:
        return self._ledger(ledger_id).info()

    async def seal(self, ledger_id: int) -> LedgerInfo:
        ledger = self._ledger(ledger_id)
        async with ledger.lock:
            self._ledger(ledger_id)  # deleted or closed while we waited for the lock?
            if ledger.state is LedgerState.OPEN:
                ledger.transition_to(LedgerState.SEALED)
            if not ledger.sealed_durable:
                await self._drain(ledger)
                await self._persist_seal(ledger)
            self._remember_open(ledger)
            return ledger.info()

    async def _drain(self, ledger: _LedgerFile) -> None:
        """Wait until every record written to ``ledger`` so far is durable or cut back."""
        if self._sync and len(ledger.offsets) > ledger.confirmed:
            # On failure the records were cut back, and what remains is durable.
            with contextlib.suppress(StorageIOError):
                await self._group.wait_durable(ledger)

    async def _persist_seal(self, ledger: _LedgerFile) -> None:
        try:
            await asyncio.to_thread(
                self._layout.write_atomic, self._layout.meta_path(ledger.ledger_id), ledger.sidecar().to_json()
            )
        except OSError as exc:
            raise _io_error(ledger.ledger_id, "seal", exc) from exc
        ledger.sealed_durable = True

    async def delete(self, ledger_id: int) -> None:
        ledger = self._ledger(ledger_id)
        async with ledger.lock:
            self._ledger(ledger_id)
            await self._drain(ledger)
            # one delete at a time writes the id counter (two threads would race on its temporary file);
            # the ledger is forgotten only once its files are gone, so a failed delete can be retried
            async with self._delete_lock:
                persist = self._next_id if self._persisted_next_id < self._next_id else None
                try:
                    await asyncio.to_thread(self._layout.remove_ledger, ledger_id, persist)
                except OSError as exc:
                    raise _io_error(ledger_id, "delete", exc) from exc
                if persist is not None:
                    self._persisted_next_id = persist
            ledger.transition_to(LedgerState.DELETED)
            del self._ledgers[ledger_id]
            self._open_files.pop(ledger_id, None)
            ledger.close()

    async def list_ledgers(self) -> Sequence[int]:
        self._check_open()
        return sorted([*self._ledgers, *self._unscanned])

    async def close(self) -> None:
        """Complete every pending append, persist seals made after disk errors, close the files."""
        if self._closed:
            return
        self._closed = True
        await self._group.stop()
        for ledger in list(self._ledgers.values()):
            async with ledger.lock:
                await self._close_ledger(ledger)
        self._ledgers.clear()
        self._unscanned.clear()
        self._layout.unlock()

    async def _close_ledger(self, ledger: _LedgerFile) -> None:
        if ledger.state is LedgerState.SEALED and not ledger.sealed_durable:
            try:
                await self._persist_seal(ledger)
            except StorageIOError:
                logger.exception("ledger %d: could not persist its seal", ledger.ledger_id)
        ledger.close()


if TYPE_CHECKING:

    async def _conforms(directory: Path) -> LedgerStore:
        return await EmbeddedLedgerStore.open(directory)
