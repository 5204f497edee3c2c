"""The managed ledger: one topic's list of ledgers, appends with rollover, properties, cursors, deletion.

Owns the managed-ledger lifecycle, the ordering of concurrent adds, rollover, and every compare-and-set
write of the managed-ledger record (format in :mod:`formats`). Recovery on open lives in :mod:`recovery`,
cursors in :mod:`cursor`. Knows nothing of the broker, the protocol or what entries contain.

Adds: each ``add_entry`` is admitted in call order under one lock that also performs rollover; the store
append starts inside it (so appends reach the store in call order and share its group commit) and the
entry is confirmed only after every earlier add was, so positions and completions are in call order and
``last_confirmed`` never has holes. Rollover first waits for the in-flight appends, then seals the current
ledger, creates the next one and writes the record. Entry and size limits roll over as soon as they are
reached; age rolls over a non-empty ledger older than ``max_ledger_rollover_time_ms`` (the minimum age is
not applied: nothing here rolls over early). A failed append makes the next add roll over. A failed append
or rollover pauses adds (each later one fails) until ``resume_writes``: nothing lands after a failed add.

Fencing: a metadata version conflict, or an append refused because another opener sealed our ledger, moves
the ledger to FENCED; it then refuses writes with :class:`ManagedLedgerFenced`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from magnetar.core import crashpoints
from magnetar.core.clock import Clock
from magnetar.ledger import offload
from magnetar.ledger.acks import AckState
from magnetar.ledger.api import (
    CursorNotFound,
    Entry,
    EntryCorruptedError,
    InitialPosition,
    InvalidPosition,
    LedgerOffload,
    LedgerSummary,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    OffloadReadHealth,
    Position,
)
from magnetar.ledger.cursor import CursorPersistence, ManagedCursor, SleepMs
from magnetar.ledger.deletion import (
    DeletionQueue,
    DropsInFlight,
)
from magnetar.ledger.dropping import LedgerDropping
from magnetar.ledger.formats import CursorRecord, LedgerRecord, cursor_key, encode_cursor, encode_ledger, ledger_key
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.states import LEDGER_TRANSITIONS, LedgerState
from magnetar.metadata.api import NEW_KEY, BadVersion, MetadataError, MetadataStore, NotFound
from magnetar.storage.api import (
    EntryCorrupted,
    LedgerSealed,
    LedgerStore,
    StartsAppends,
    StorageError,
)
from magnetar.storage.offload.api import OffloadStore


@dataclass(slots=True)
class _PendingAdd:
    append: asyncio.Future[int]
    result: asyncio.Future[Position]
    ledger_id: int
    size_bytes: int


log = logging.getLogger("magnetar.ledger")


#: Distinct corrupted entries remembered per managed ledger (counted and logged loudly once each).
CORRUPTED_TRACKED_MAX = 10_000


def ledger_custom_metadata(name: str) -> dict[str, str]:
    return {"application": "magnetar", "component": "managed-ledger", "pulsar/managed-ledger": name}


class ManagedLedgerImpl(LedgerDropping):
    """Implements :class:`magnetar.ledger.api.ManagedLedger`. Built by :mod:`recovery`, never directly.
    Trimming and deleting are :class:`~magnetar.ledger.dropping.LedgerDropping`'s (its own module)."""

    def __init__(
        self,
        name: str,
        store: LedgerStore,
        metadata: MetadataStore,
        *,
        config: ManagedLedgerConfig,
        clock: Clock,
        sleep_ms: SleepMs,
        on_closed: Callable[[ManagedLedgerImpl], None],
        offload_store: OffloadStore | None = None,
    ) -> None:
        self._name = name
        self.offload_store = offload_store  # tiered storage (ledger/offload.py); None: offload is off
        self.offload_lock = asyncio.Lock()  # one offload or release of this ledger's ledgers at a time
        self.offload_reads = OffloadReadHealth()  # errors of reads from the offload store
        self._key = ledger_key(name)
        self._store = store
        self._start_append: Callable[[int, bytes | memoryview], asyncio.Future[int]] = (
            store.start_append if isinstance(store, StartsAppends) else self._append_task
        )
        self._metadata = metadata
        self._config = config
        self._clock = clock
        self._sleep_ms = sleep_ms
        self._on_closed = on_closed
        self._state = LedgerState.OPENING
        self._ledgers = LedgerList()
        self._properties: dict[str, str] = {}
        self._version = NEW_KEY
        self._cursors: dict[str, ManagedCursor] = {}
        self._entries_added = 0
        self._admit_lock = asyncio.Lock()  # add admission and rollover, in call order
        self._meta_lock = asyncio.Lock()  # one managed-ledger record write at a time
        self._cursor_lock = asyncio.Lock()  # cursor creation and deletion
        self._in_flight: deque[_PendingAdd] = deque()  # adds not yet resolved, oldest first
        self._settle_waiters: list[asyncio.Future[None]] = []
        self._slow_admissions = 0
        self._pending_entries = 0
        self._pending_bytes = 0
        self._current_broken = False
        self._writes_paused = False  # after a failed add, until the owner resumes
        self._corrupted: set[Position] = set()  # distinct damaged entries found by reads (bounded)
        # PIP-186: when set, dropped ledgers are queued for deletion instead of deleted here (two phases)
        self.deletion_queue: DeletionQueue | None = None
        self._drops = DropsInFlight()
        self._trim_lock = asyncio.Lock()  # one two-phase trim at a time
        self._record_deleted = False  # delete() removed the record: nothing is listed any more
        self._unlisted: set[int] = set()  # ledgers of ours never or no longer listed (dropped, not queued yet)
        self._background: set[asyncio.Task[None]] = set()

    # ---- lifecycle -----------------------------------------------------------------------------------------

    @property
    def state(self) -> LedgerState:
        return self._state

    def _transition_to(self, new: LedgerState) -> None:
        self._state = LEDGER_TRANSITIONS.check(self._state, new, f"managed ledger {self._name}")

    def _require_writable(self) -> None:
        if self._state is LedgerState.FENCED:
            raise ManagedLedgerFenced(f"managed ledger {self._name} is fenced")
        if self._state is not LedgerState.OPEN:
            raise ManagedLedgerClosed(f"managed ledger {self._name} is {self._state.value}")

    def _require_readable(self) -> None:
        if self._state not in (LedgerState.OPEN, LedgerState.FENCED, LedgerState.CLOSING):
            raise ManagedLedgerClosed(f"managed ledger {self._name} is {self._state.value}")

    def _fence(self) -> None:
        if self._state in (LedgerState.OPEN, LedgerState.OPENING):
            log.warning("managed ledger %s fenced: another owner took it", self._name)
            self._transition_to(LedgerState.FENCED)

    def cursor_fenced(self, name: str) -> None:
        self._fence()

    @property
    def fenced(self) -> bool:
        return self._state is LedgerState.FENCED

    def install(
        self, ledgers: LedgerList, properties: Mapping[str, str], version: int, cursors: list[ManagedCursor]
    ) -> None:
        """Recovery is done: take its results and accept operations."""
        self._ledgers = ledgers
        self._properties = dict(properties)
        self._version = version
        self._cursors = {c.name: c for c in cursors}
        self._transition_to(LedgerState.OPEN)

    def abandon(self) -> None:
        """Recovery failed."""
        if self._state is LedgerState.FENCED:
            self._transition_to(LedgerState.CLOSING)
        if self._state in (LedgerState.OPENING, LedgerState.CLOSING):
            self._transition_to(LedgerState.CLOSED)

    # ---- read-only views -----------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def config(self) -> ManagedLedgerConfig:
        return self._config

    @property
    def sleep_ms(self) -> SleepMs:
        return self._sleep_ms

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def ledger_list(self) -> LedgerList:
        return self._ledgers

    @property
    def last_confirmed(self) -> Position:
        return self._ledgers.last_confirmed()

    @property
    def properties(self) -> Mapping[str, str]:
        return MappingProxyType(self._properties)

    @property
    def cursors(self) -> Mapping[str, ManagedCursor]:
        return MappingProxyType(self._cursors)

    @property
    def entries_added(self) -> int:
        return self._entries_added

    def number_of_entries(self) -> int:
        return self._ledgers.total_entries()

    def total_size_bytes(self) -> int:
        return self._ledgers.total_size_bytes()

    def ledgers(self) -> list[LedgerSummary]:
        return self._ledgers.summaries()

    def first_position(self) -> Position:
        return self._ledgers.first_position()

    def next_valid_position(self, position: Position) -> Position:
        return self._ledgers.next_position(position)

    # ---- reads ---------------------------------------------------------------------------------------------

    @property
    def corrupted_entries(self) -> int:
        return len(self._corrupted)

    async def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        self._require_readable()
        try:
            return await offload.read_stored(self, self._store, ledger_id, first_entry, last_entry)
        except EntryCorrupted as exc:
            bad = exc.entry_id if exc.entry_id is not None else first_entry
            if first_entry < bad <= last_entry:  # serve the good entries before the damage; the next read hits it
                return await self.read_range(ledger_id, first_entry, bad - 1)
            raise self._corrupted_entry(ledger_id, first_entry, exc) from exc
        except StorageError as exc:
            raise ManagedLedgerError(f"{self._name}: read {ledger_id}:{first_entry}..{last_entry}: {exc}") from exc

    def _corrupted_entry(self, ledger_id: int, first_entry: int, exc: EntryCorrupted) -> EntryCorruptedError:
        """Loud on purpose: a damaged entry is never served as data, and operators must hear of it."""
        entry_id = exc.entry_id if exc.entry_id is not None else first_entry
        position = Position(ledger_id, entry_id)
        if position in self._corrupted or len(self._corrupted) >= CORRUPTED_TRACKED_MAX:
            log.debug("%s: entry %s is corrupted (known)", self._name, position)
            return EntryCorruptedError(f"{self._name}: entry {position} is corrupted: {exc}", position)
        self._corrupted.add(position)
        log.error("%s: entry %s is corrupted (checksum mismatch in storage); it will not be served", self._name,
                  position)
        return EntryCorruptedError(f"{self._name}: entry {position} is corrupted: {exc}", position)

    async def read_entry(self, position: Position) -> Entry:
        if not self._ledgers.is_entry(position):
            raise InvalidPosition(f"{self._name}: no entry {position}")
        (data,) = await self.read_range(position.ledger_id, position.entry_id, position.entry_id)
        return Entry(position, data)

    # ---- adds and rollover ---------------------------------------------------------------------------------

    @property
    def writes_paused(self) -> bool:
        return self._writes_paused

    def resume_writes(self) -> bool:
        """Accept adds again after a failed one, once none is in flight; the next add starts a new ledger.
        False (still paused) while adds are in flight."""
        if self._pending_entries:
            return False
        self._writes_paused = False
        return True

    def _require_accepting(self) -> None:
        self._require_writable()
        if self._writes_paused:
            raise ManagedLedgerError(f"{self._name}: adds are paused after a failed append")

    async def add_entry(self, data: bytes | memoryview) -> Position:
        return await self.add_entry_future(data)

    def add_entry_future(self, data: bytes | memoryview) -> asyncio.Future[Position]:
        """Start an add now (its place in the ledger is taken at this call) and return a future that
        resolves once it is durable. Adds resolve in call order."""
        self._require_accepting()
        if self._slow_admissions or self._admit_lock.locked() or self._rollover_due():
            return asyncio.ensure_future(self._admit_after_rollover(data))
        return self._enqueue(data)

    async def _admit_after_rollover(self, data: bytes | memoryview) -> Position:
        self._slow_admissions += 1  # later adds queue behind this one, keeping call order
        try:
            async with self._admit_lock:
                self._require_accepting()
                if self._rollover_due():
                    try:
                        await self._rollover()  # waits for earlier adds: one of them may fail and pause adds
                    except ManagedLedgerFenced:
                        raise
                    except ManagedLedgerError:
                        # this add failed: the adds queued behind it must not land before it is sent again
                        self._writes_paused = True
                        raise
                    self._require_accepting()
                added = self._enqueue(data)
        finally:
            self._slow_admissions -= 1
        return await added

    def _enqueue(self, data: bytes | memoryview) -> asyncio.Future[Position]:
        ledger_id, size_bytes = self._ledgers.current.ledger_id, len(data)
        self._pending_entries += 1
        self._pending_bytes += size_bytes
        result: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        append = self._start_append(ledger_id, data)
        self._in_flight.append(_PendingAdd(append, result, ledger_id, size_bytes))
        append.add_done_callback(self._confirm_in_order)
        return result

    def _append_task(self, ledger_id: int, data: bytes | memoryview) -> asyncio.Future[int]:
        return asyncio.ensure_future(self._store.append(ledger_id, data))

    def _confirm_in_order(self, _: object = None) -> None:
        """Resolve finished adds from the oldest on, never one before an earlier one."""
        while self._in_flight and self._in_flight[0].append.done():
            pending = self._in_flight.popleft()
            self._pending_entries -= 1
            self._pending_bytes -= pending.size_bytes
            try:
                position = self._confirm(pending)
            except ManagedLedgerError as exc:
                if not pending.result.done():
                    pending.result.set_exception(exc)
            else:
                if not pending.result.done():
                    pending.result.set_result(position)
        if not self._in_flight:
            for waiter in self._settle_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._settle_waiters.clear()

    def _confirm(self, pending: _PendingAdd) -> Position:
        append = pending.append
        error = append.exception() if not append.cancelled() else StorageError("append cancelled")
        if error is None and self._writes_paused:
            # an earlier add failed: this one must not land after it, so it is not confirmed (the entry,
            # if the store kept it, stays beyond the ledger's count and is never read)
            raise ManagedLedgerError(f"{self._name}: an earlier append failed; this one is not confirmed")
        if error is not None:
            raise self._add_failed(error)
        entry_id = append.result()
        self._ledgers.record_add(pending.ledger_id, entry_id, pending.size_bytes)
        self._entries_added += 1
        return Position(pending.ledger_id, entry_id)

    async def _settled(self) -> None:
        """Wait until every add started so far has resolved."""
        if self._in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._settle_waiters.append(waiter)
            await waiter

    def _add_failed(self, error: BaseException) -> ManagedLedgerError:
        if isinstance(error, LedgerSealed):
            self._fence()
            fenced = ManagedLedgerFenced(f"{self._name}: ledger sealed by another owner")
            fenced.__cause__ = error
            return fenced
        self._current_broken = True
        self._writes_paused = True
        failed = ManagedLedgerError(f"{self._name}: append failed: {error}")
        failed.__cause__ = error
        return failed

    def _rollover_due(self) -> bool:
        current = self._ledgers.current
        entries = current.entries + self._pending_entries
        if entries == 0:
            return self._current_broken
        size_bytes = current.size_bytes + self._pending_bytes
        age_ms = self._clock.now_ms() - current.created_ms
        return (
            self._current_broken
            or entries >= self._config.max_entries_per_ledger
            or size_bytes >= self._config.max_size_per_ledger_bytes
            or age_ms >= self._config.max_ledger_rollover_time_ms
        )

    async def create_ledger(self) -> LedgerSummary:
        try:
            info = await self._store.create_ledger(ledger_custom_metadata(self._name))
        except StorageError as exc:
            raise ManagedLedgerError(f"{self._name}: creating a ledger failed: {exc}") from exc
        return LedgerSummary(info.ledger_id, 0, 0, self._clock.now_ms())

    async def _rollover(self) -> None:
        await self._settled()  # every in-flight append to the current ledger is confirmed
        self._require_writable()  # one of them may have found the ledger sealed by another owner
        old = self._ledgers.current
        try:
            info = await self._store.seal(old.ledger_id)
        except StorageError as exc:
            raise ManagedLedgerError(f"{self._name}: sealing ledger {old.ledger_id} failed: {exc}") from exc
        if info.entries > old.entries:
            # adds after a failed one may have reached the store; they were never confirmed
            log.warning("%s: ledger %d keeps %d confirmed of %d stored entries", self._name, old.ledger_id,
                        old.entries, info.entries)
            sealed = old
        else:
            sealed = dataclasses.replace(old, entries=info.entries, size_bytes=info.size_bytes)
        new = await self.create_ledger()
        crashpoints.reached("rollover.created", self._name)
        kept = self._ledgers.summaries()[:-1] + ([sealed] if sealed.entries else [])
        try:
            async with self._meta_lock:
                await self._write_record([*kept, new], self._properties)
        except ManagedLedgerError:
            await self.delete_ledgers_quietly([new.ledger_id])
            raise
        crashpoints.reached("rollover.recorded", self._name)
        self._ledgers.replace(sealed)
        if not sealed.entries:
            self._ledgers.remove(sealed.ledger_id)
            await self.delete_ledgers_quietly([sealed.ledger_id])
        self._ledgers.append(new)
        self._current_broken = False
        log.info("%s: rolled over from ledger %d (%d entries) to %d", self._name, old.ledger_id,
                 sealed.entries, new.ledger_id)

    def cancel_background(self) -> None:
        """Stop work this managed ledger started on its own (a simulated crash ends its process)."""
        for task in list(self._background):
            task.cancel()

    # ---- the managed-ledger record -------------------------------------------------------------------------

    async def _write_record(self, ledgers: list[LedgerSummary], properties: Mapping[str, str]) -> None:
        """Compare-and-set the record (caller holds ``_meta_lock``)."""
        data = encode_ledger(LedgerRecord(tuple(ledgers), dict(properties)))
        try:
            record = await self._metadata.put(self._key, data, self._version)
        except (BadVersion, NotFound) as exc:
            self._fence()
            raise ManagedLedgerFenced(f"{self._name}: the managed-ledger record changed under us") from exc
        except MetadataError as exc:
            raise ManagedLedgerError(f"{self._name}: writing the record failed: {exc}") from exc
        self._version = record.version

    async def update_summary(self, summary: LedgerSummary) -> None:
        """Replace one sealed ledger's summary (its offload state) in the record, by compare-and-set. Holds
        the admission lock so no rollover or trim writes an older ledger list over this one."""
        self._require_writable()
        async with self._admit_lock, self._meta_lock:
            self._require_writable()
            if self._ledgers.get(summary.ledger_id) is None:
                raise ManagedLedgerError(f"{self._name}: ledger {summary.ledger_id} is no longer in the list")
            ledgers = [summary if x.ledger_id == summary.ledger_id else x for x in self._ledgers.summaries()]
            await self._write_record(ledgers, self._properties)
            self._ledgers.replace(summary)

    async def _discard_offloaded(self, copy: LedgerOffload) -> None:
        await offload.discard_copy(self, copy)

    @property
    def offload_enabled(self) -> bool:
        return self.offload_store is not None

    async def offload_ledger(self, ledger_id: int) -> LedgerSummary:
        return await offload.offload_ledger(self, ledger_id, self._clock.now_ms())

    async def release_local(self, ledger_id: int) -> LedgerSummary:
        return await offload.release_local(self, ledger_id)

    async def claim(self, ledgers: LedgerList, properties: Mapping[str, str], version: int) -> int:
        """Recovery's first write: the record as recovered, compare-and-set on ``version``."""
        self._version = version
        async with self._meta_lock:
            await self._write_record(ledgers.summaries(), properties)
        return self._version

    async def set_properties(self, updates: Mapping[str, str]) -> None:
        self._require_writable()
        async with self._meta_lock:
            merged = {**self._properties, **{str(k): str(v) for k, v in updates.items()}}
            await self._write_record(self._ledgers.summaries(), merged)
            self._properties = merged

    # ---- cursors -------------------------------------------------------------------------------------------

    def make_cursor(
        self, name: str, acks: AckState, persistence: CursorPersistence | None, properties: Mapping[str, int]
    ) -> ManagedCursor:
        return ManagedCursor(self, name, acks, config=self._config, persistence=persistence,
                             properties=properties)

    async def open_cursor(self, name: str, initial_position: InitialPosition = InitialPosition.LATEST) -> ManagedCursor:
        self._require_writable()
        async with self._cursor_lock:
            self._require_writable()
            existing = self._cursors.get(name)
            if existing is not None:
                return existing
            key = cursor_key(self._name, name)
            if initial_position is InitialPosition.EARLIEST:
                mark_delete = self._ledgers.first_position()
            else:
                mark_delete = self._ledgers.last_confirmed()
            try:
                record = await self._metadata.put(key, encode_cursor(CursorRecord(mark_delete)), NEW_KEY)
            except BadVersion as exc:
                self._fence()
                raise ManagedLedgerFenced(f"{self._name}: cursor {name} created by another owner") from exc
            except MetadataError as exc:
                raise ManagedLedgerError(f"{self._name}: creating cursor {name} failed: {exc}") from exc
            persistence = CursorPersistence(self._metadata, key, record.version, self._sleep_ms)
            cursor = self.make_cursor(name, AckState(self._ledgers, mark_delete), persistence, {})
            self._cursors[name] = cursor
            return cursor

    def new_non_durable_cursor(self, start: Position, name: str) -> ManagedCursor:
        self._require_readable()
        first = self._ledgers.forward(start)
        acks = AckState(self._ledgers, Position(first.ledger_id, first.entry_id - 1))
        return self.make_cursor(name, acks, None, {})

    async def delete_cursor(self, name: str) -> None:
        self._require_writable()
        async with self._cursor_lock:
            cursor = self._cursors.pop(name, None)
            if cursor is None:
                raise CursorNotFound(f"{self._name}: no cursor {name!r}")
            await cursor.discard()
            await self._delete_cursor_key(cursor_key(self._name, name))

    async def _delete_cursor_key(self, key: str) -> None:
        try:
            await self._metadata.delete(key)
        except NotFound:
            pass
        except MetadataError as exc:
            raise ManagedLedgerError(f"{self._name}: deleting {key} failed: {exc}") from exc

    # ---- close and delete ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Waits for in-flight adds, flushes cursors and writes the record (current ledger counts)."""
        if self._state not in (LedgerState.OPEN, LedgerState.FENCED):
            return
        fenced = self._state is LedgerState.FENCED
        self._transition_to(LedgerState.CLOSING)
        try:
            async with self._admit_lock:
                await self._settled()
            for cursor in list(self._cursors.values()):
                try:
                    await cursor.close()
                except ManagedLedgerError as exc:
                    log.warning("%s: closing cursor %s: %s", self._name, cursor.name, exc)
            if not fenced:
                async with self._meta_lock:
                    await self._write_record(self._ledgers.summaries(), self._properties)
        except ManagedLedgerError as exc:
            log.warning("%s: close could not write the record: %s", self._name, exc)
        finally:
            self._transition_to(LedgerState.CLOSED)
            self._closed()

    def _closed(self) -> None:
        self._on_closed(self)
