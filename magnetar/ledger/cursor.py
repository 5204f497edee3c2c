"""A cursor over a managed ledger: reads that skip acked entries, acks, seeks, and debounced persistence.

Owns one subscription's read position, its lifecycle and (for durable cursors) writing its record to the
metadata store with compare-and-set. The acknowledgement rules live in :mod:`acks`, position arithmetic in
:mod:`ledger_list`, the record format in :mod:`formats`. Knows nothing of the broker, the protocol or
message contents; reads storage only through its host (the managed ledger).

Persistence is debounced: a change schedules one task per cursor that waits ``cursor_persist_interval_ms``
(through an injectable ``sleep_ms``) then writes the state once, merging every change made meanwhile.
``flush``, ``reset`` and ``close`` write immediately. A read that meets a corrupted entry returns the good
entries before it; a read that starts at it raises :class:`EntryCorruptedError` and leaves the read position
there (skipping it, by ack or seek, is the caller's decision). Positions from the network are clamped into the
stored range (``seek``, ``reset``) or ignored when they are not entries (acks); they never raise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from magnetar.core import crashpoints
from magnetar.ledger.acks import AckState
from magnetar.ledger.api import (
    Entry,
    EntryCorruptedError,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    Position,
)
from magnetar.ledger.formats import CursorRecord, encode_cursor
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.states import CURSOR_TRANSITIONS, CursorState
from magnetar.metadata.api import BadVersion, MetadataError, MetadataStore, NotFound

log = logging.getLogger("magnetar.ledger.cursor")

SleepMs = Callable[[int], Awaitable[None]]

_new = tuple.__new__

#: Most entries asked of storage in one read call (a run is cut into pieces this long).
READ_RUN_ENTRIES_MAX = 128


async def asyncio_sleep_ms(delay_ms: int) -> None:
    await asyncio.sleep(delay_ms / 1000)


class CursorHost(Protocol):
    """What a cursor needs from its managed ledger."""

    @property
    def ledger_list(self) -> LedgerList: ...

    async def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]: ...

    def cursor_fenced(self, name: str) -> None: ...

    @property
    def fenced(self) -> bool: ...


class CursorPersistence:
    """Where a durable cursor's record lives and the version it was last written at."""

    def __init__(self, metadata: MetadataStore, key: str, version: int, sleep_ms: SleepMs) -> None:
        self.metadata = metadata
        self.key = key
        self.version = version
        self.sleep_ms = sleep_ms


class ManagedCursor:
    """Implements :class:`magnetar.ledger.api.Cursor`. Built by the managed ledger, never directly."""

    def __init__(
        self,
        host: CursorHost,
        name: str,
        acks: AckState,
        *,
        config: ManagedLedgerConfig,
        persistence: CursorPersistence | None,
        properties: Mapping[str, int] | None = None,
    ) -> None:
        self._host = host
        self._name = name
        self._acks = acks
        self._config = config
        self._persistence = persistence
        self._properties: dict[str, int] = dict(properties or {})
        self._state = CursorState.OPEN
        self._read_position = host.ledger_list.next_position(acks.mark_delete)
        self._seek_epoch = 0  # a read that overlaps a seek must not move the read position
        self._read_lock = asyncio.Lock()
        self._persist_lock = asyncio.Lock()
        self._generation = 0  # bumped by every change to the persisted state
        self._persisted_generation = 0
        self._persist_task: asyncio.Task[None] | None = None
        self._persist_failures = 0  # periodic writes failed in a row

    # ---- lifecycle -----------------------------------------------------------------------------------------

    @property
    def state(self) -> CursorState:
        return self._state

    def _transition_to(self, new: CursorState) -> None:
        self._state = CURSOR_TRANSITIONS.check(self._state, new, f"cursor {self._name}")

    def _require_usable(self) -> None:
        if self._state is CursorState.FENCED:
            raise ManagedLedgerFenced(f"cursor {self._name} is fenced")
        if self._state is not CursorState.OPEN:
            raise ManagedLedgerClosed(f"cursor {self._name} is {self._state.value}")

    # ---- simple properties ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def durable(self) -> bool:
        return self._persistence is not None

    @property
    def mark_delete_position(self) -> Position:
        return self._acks.mark_delete

    @property
    def read_position(self) -> Position:
        return self._acks.first_unacked(self._read_position)

    @property
    def properties(self) -> Mapping[str, int]:
        return MappingProxyType(self._properties)

    # ---- reads ---------------------------------------------------------------------------------------------

    async def read_entries(
        self, max_entries: int, max_bytes: int | None = None, *, max_position: Position | None = None
    ) -> list[Entry]:
        self._require_usable()
        if max_entries <= 0:
            return []
        async with self._read_lock:
            epoch = self._seek_epoch
            entries, position = await self._read_from(self._read_position, max_entries, max_bytes, max_position)
            if epoch == self._seek_epoch:
                self._read_position = position
            return entries

    async def _read_from(
        self, position: Position, max_entries: int, max_bytes: int | None, max_position: Position | None
    ) -> tuple[list[Entry], Position]:
        ledgers = self._host.ledger_list
        entries: list[Entry] = []
        size_bytes = 0
        for _ in range(max_entries):  # every pass reads at least one entry or stops
            position = self._acks.first_unacked(position)
            if not ledgers.is_entry(position) or (max_position is not None and position > max_position):
                break
            last_entry = self._run_last_entry(position, max_entries - len(entries))
            if max_position is not None and max_position.ledger_id == position.ledger_id:
                last_entry = min(last_entry, max_position.entry_id)
            try:
                datas = await self._host.read_range(position.ledger_id, position.entry_id, last_entry)
            except EntryCorruptedError:
                if not entries:
                    raise  # the first entry to read is damaged: the reader hears of it, the position stays
                break  # return the good entries first; the next read starts at the damaged one
            ledger_id, first = position.ledger_id, position.entry_id
            for offset, data in enumerate(datas):
                # tuple.__new__ skips the named tuples' Python-level constructors: one Entry per entry read
                entries.append(_new(Entry, (_new(Position, (ledger_id, first + offset)), data)))
                size_bytes += len(data)
                if max_bytes is not None and size_bytes >= max_bytes:
                    break
            position = ledgers.next_position(entries[-1].position)
            if len(entries) >= max_entries or (max_bytes is not None and size_bytes >= max_bytes):
                break
        return entries, position

    def _run_last_entry(self, position: Position, remaining: int) -> int:
        """Last entry id of the unacked run starting at ``position`` within its ledger."""
        ledger = self._host.ledger_list.get(position.ledger_id)
        assert ledger is not None
        last = min(ledger.entries - 1, position.entry_id + min(remaining, READ_RUN_ENTRIES_MAX) - 1)
        stop = self._acks.next_acked_after(position)
        if stop is not None and stop.ledger_id == position.ledger_id:
            last = min(last, stop.entry_id - 1)
        return last

    def rewind(self) -> None:
        self._require_usable()
        self._seek_epoch += 1
        self._read_position = self._host.ledger_list.next_position(self._acks.mark_delete)

    def seek(self, position: Position) -> None:
        self._require_usable()
        self._seek_epoch += 1
        self._read_position = self._host.ledger_list.forward(position)

    async def reset(self, position: Position) -> None:
        """Clamps ``position`` into [first entry, end]; positions in missing ledgers move to the next one."""
        self._require_usable()
        target = self._host.ledger_list.forward(position)
        self._acks.reset(Position(target.ledger_id, target.entry_id - 1))
        self._seek_epoch += 1
        self._read_position = target
        self._changed()
        await self.flush()

    # ---- acks ----------------------------------------------------------------------------------------------

    def acknowledge(self, positions: Iterable[Position]) -> None:
        self._require_usable()
        changed = False
        for position in positions:
            changed = self._acks.ack(position) or changed
        if changed:
            self._changed()

    def acknowledge_batch_indexes(self, position: Position, unacked_bits: Sequence[int], batch_size: int) -> None:
        self._require_usable()
        if self._acks.ack_batch(position, unacked_bits, batch_size):
            self._changed()

    def acknowledge_cumulative(self, position: Position) -> None:
        self._require_usable()
        if self._acks.ack_cumulative(position):
            self._changed()

    def batch_ack_set(self, position: Position) -> list[int] | None:
        return self._acks.batch_words(position)

    def is_acknowledged(self, position: Position) -> bool:
        return self._acks.is_acked(position)

    def backlog_entries(self) -> int:
        return self._acks.backlog()

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return [(Position(f.ledger_id, f.entry_id - 1), last) for f, last in self._acks.ranges()]

    async def set_properties(self, updates: Mapping[str, int]) -> None:
        """Merge ``updates`` into the cursor's properties and persist before returning."""
        self._require_usable()
        self._properties.update({str(k): int(v) for k, v in updates.items()})
        self._changed()
        await self.flush()

    # ---- persistence ---------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._generation += 1
        self._schedule_persist()

    def _schedule_persist(self) -> None:
        if self._persistence is None or self._persist_task is not None or self._state is not CursorState.OPEN:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (pure unit use): the next flush writes it
            return
        self._persist_task = loop.create_task(self._persist_later(self._persistence))

    async def _persist_later(self, persistence: CursorPersistence) -> None:
        await persistence.sleep_ms(self._config.cursor_persist_interval_ms)
        self._persist_task = None  # from here on a change schedules another write, and close won't cancel us
        try:
            await self._persist()
        except ManagedLedgerFenced as exc:
            log.warning("cursor %s: not persisted: %s", self._name, exc)
        except ManagedLedgerError as exc:
            # Retry on our own: waiting for the next change would leave acks exposed for an unbounded time
            # (the simulator found this). One attempt per interval bounds the rate; the log line is kept for
            # the 1st, 10th, 100th... failure in a row (a full disk fails every attempt).
            self._persist_failures += 1
            if str(self._persist_failures).strip("0") == "1":
                log.warning("cursor %s: persisting failed %d times in a row (%s); retrying every %d ms", self._name,
                            self._persist_failures, exc, self._config.cursor_persist_interval_ms)
            self._schedule_persist()
        else:
            self._persist_failures = 0

    def record(self) -> CursorRecord:
        cap = max(self._config.max_unacked_ranges_to_persist, 0)
        return CursorRecord(
            mark_delete=self._acks.mark_delete,
            ranges=tuple(self._acks.ranges()[:cap]),
            batches=tuple((p, tuple(words)) for p, words in self._acks.batches()[:cap]),
            properties=dict(self._properties),
        )

    async def _persist(self) -> None:
        persistence = self._persistence
        if persistence is None:
            return
        async with self._persist_lock:
            if self._persisted_generation == self._generation or self._state is not CursorState.OPEN:
                return
            if self._host.fenced:  # a fenced owner must not overwrite the new owner's cursor
                raise ManagedLedgerFenced(f"cursor {self._name}: the managed ledger is fenced")
            generation = self._generation
            data = encode_cursor(self.record())
            crashpoints.reached("cursor.persisting", persistence.key)
            try:
                record = await persistence.metadata.put(persistence.key, data, persistence.version)
            except (BadVersion, NotFound) as exc:
                self._fence()
                raise ManagedLedgerFenced(f"cursor {self._name} was written by another owner") from exc
            except MetadataError as exc:
                raise ManagedLedgerError(f"cursor {self._name}: persisting failed: {exc}") from exc
            persistence.version = record.version
            self._persisted_generation = generation
            crashpoints.reached("cursor.persisted", persistence.key)

    def _fence(self) -> None:
        if self._state is CursorState.OPEN:
            self._transition_to(CursorState.FENCED)
            self._host.cursor_fenced(self._name)

    async def flush(self) -> None:
        self._require_usable()
        await self._persist()

    def _cancel_pending_persist(self) -> None:
        task, self._persist_task = self._persist_task, None
        if task is not None:
            task.cancel()  # still sleeping: it clears _persist_task before it writes

    async def close(self) -> None:
        if self._state in (CursorState.CLOSED, CursorState.DELETED):
            return
        self._cancel_pending_persist()
        try:
            if self._state is CursorState.OPEN:
                await self._persist()
        finally:
            self._transition_to(CursorState.CLOSED)

    async def discard(self) -> None:
        """Stop without writing (the cursor is being deleted); returns once no write is in flight, so the
        caller can delete the record without a late write bringing it back."""
        self._cancel_pending_persist()
        if self._state is not CursorState.DELETED:
            self._transition_to(CursorState.DELETED)
        async with self._persist_lock:
            pass
