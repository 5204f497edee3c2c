"""One ledger's appends, grouped into chunk objects and PUT one at a time, in order (group commit).

An append takes the next entry id at the call and joins the ledger's pending appends. One task per ledger
with appends pending (none when idle) flushes them: it waits until the oldest pending append is
``flush_max_delay_ms`` old or ``flush_max_bytes`` are pending (or a seal or close wants everything now),
takes up to ``flush_max_bytes`` of them (at least one) into the next chunk and PUTs it with
``If-None-Match: *``; only once that PUT succeeded are the chunk's appends completed, in order, and the
next chunk starts. Appends arriving meanwhile wait for the next chunk, so a busy ledger's chunks grow with
its rate (one PUT in flight per ledger, ever: chunks land and are acknowledged in seq order).

A failed chunk fails its appends and every later one to this ledger (the store's contract: nothing lands
after a failed append). If the chunk's seq was taken by another writer's seal, the failure is
:class:`~magnetar.storage.api.LedgerFenced`. Writer lifecycle::

    OPEN ──seal/close──▶ DRAINING ──flushed──▶ DONE
      │                       │
      └──a chunk failed──▶ FAILED ◀──┘

This module knows nothing of S3 or of reading; it is handed ``put_chunk`` and ``flushed``.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.core.clock import Clock
from magnetar.core.lifecycle import Transitions
from magnetar.storage.api import LedgerFenced, StorageError, StorageIOError
from magnetar.storage.objectstore import _chunks
from magnetar.storage.objectstore._requests import SleepMs


class WriterState(enum.Enum):
    OPEN = "open"
    DRAINING = "draining"
    FAILED = "failed"
    DONE = "done"


WRITER_TRANSITIONS = Transitions(WriterState, {
    WriterState.OPEN: {WriterState.DRAINING, WriterState.FAILED},
    WriterState.DRAINING: {WriterState.DONE, WriterState.FAILED},
    WriterState.FAILED: set(),
    WriterState.DONE: set(),
})


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushSettings:
    flush_max_delay_ms: int
    flush_max_bytes: int


@dataclass(slots=True)
class _Append:
    payload: bytes
    future: asyncio.Future[int]
    entry_id: int
    bytes_end: int  # the ledger's payload bytes through this entry
    added_ms: float


#: ``put_chunk(seq, body)``: True once stored; False if another writer holds ``seq`` (fenced).
PutChunk = Callable[[int, bytes], Awaitable[bool]]
#: ``flushed(seq, first_entry, payloads, chunk_bytes)``: the chunk is stored (before its appends complete).
Flushed = Callable[[int, int, list[bytes], int], None]


class ChunkWriter:
    def __init__(
        self,
        ledger_id: int,
        token: bytes,
        *,
        next_seq: int,
        next_entry: int,
        bytes_end: int,
        put_chunk: PutChunk,
        flushed: Flushed,
        release: Callable[[int], None],
        settings: FlushSettings,
        clock: Clock,
        sleep_ms: SleepMs,
    ) -> None:
        self.ledger_id = ledger_id
        self._token = token
        self.next_seq = next_seq
        self._next_entry = next_entry
        self._bytes_end = bytes_end
        self._put_chunk = put_chunk
        self._flushed = flushed
        self._release = release
        self._settings = settings
        self._clock = clock
        self._sleep_ms = sleep_ms
        self.state = WriterState.OPEN
        self.failure: StorageError | None = None
        self._pending: deque[_Append] = deque()
        self._pending_bytes = 0
        self._in_flight: list[_Append] = []  # the chunk being PUT
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self.chunks_put = 0

    def _transition_to(self, target: WriterState) -> None:
        self.state = WRITER_TRANSITIONS.check(self.state, target, f"ledger {self.ledger_id}'s writer")

    def refusal(self) -> StorageError | None:
        """Why an append would fail now, or None."""
        return None if self.failure is None else self._refused(self.failure)

    def _refused(self, failure: StorageError) -> StorageError:
        kind = LedgerFenced if isinstance(failure, LedgerFenced) else StorageIOError
        return kind(f"ledger {self.ledger_id} takes no more appends after a failed one: {failure}",
                    ledger_id=self.ledger_id)

    def add(self, payload: bytes, future: asyncio.Future[int]) -> None:
        """Take the next entry id for ``payload``; ``future`` gets it once its chunk is stored."""
        assert self.state is WriterState.OPEN, self.state
        self._bytes_end += len(payload)
        self._pending.append(_Append(payload, future, self._next_entry, self._bytes_end, self._clock.monotonic_ms()))
        self._next_entry += 1
        self._pending_bytes += len(payload)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif self._pending_bytes >= self._settings.flush_max_bytes:
            self._wake_up()

    @property
    def idle(self) -> bool:
        return self._task is None

    async def drain(self) -> None:
        """Flush everything pending now (no window) and wait; errors went to the appends' futures."""
        if self.state is WriterState.OPEN:
            self._transition_to(WriterState.DRAINING)
        self._wake_up()
        task = self._task
        if task is not None:
            await asyncio.shield(task)
        if self.state is WriterState.DRAINING:
            self._transition_to(WriterState.DONE)

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _run(self) -> None:
        try:
            while self._pending and self.state in (WriterState.OPEN, WriterState.DRAINING):  # each turn flushes
                await self._window()
                await self._flush_one()
        except BaseException as exc:  # a bug or a cancelled task must fail the appends, not hang them
            self._fail(StorageIOError(f"ledger {self.ledger_id}: flush stopped: {exc!r}", ledger_id=self.ledger_id))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._task = None

    async def _window(self) -> None:
        delay_ms = self._settings.flush_max_delay_ms
        if self.state is not WriterState.OPEN or delay_ms <= 0 or self._pending_bytes >= self._settings.flush_max_bytes:
            return
        remaining_ms = self._pending[0].added_ms + delay_ms - self._clock.monotonic_ms()
        if remaining_ms <= 0:
            return
        self._wake = asyncio.get_running_loop().create_future()
        sleeper = asyncio.ensure_future(self._sleep_ms(remaining_ms))
        try:
            await asyncio.wait([sleeper, self._wake], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            self._wake = None

    def _take(self) -> list[_Append]:
        batch = [self._pending.popleft()]
        size = len(batch[0].payload)
        while self._pending and size + len(self._pending[0].payload) <= self._settings.flush_max_bytes:  # bounded
            append = self._pending.popleft()
            size += len(append.payload)
            batch.append(append)
        self._pending_bytes -= size
        return batch

    async def _flush_one(self) -> None:
        batch = self._in_flight = self._take()
        payloads = [a.payload for a in batch]
        body = _chunks.encode_data(batch[0].entry_id, batch[-1].bytes_end, self._token, payloads)
        seq = self.next_seq
        try:
            stored = await self._put_chunk(seq, body)
        except StorageError as exc:
            self._fail(exc)
            return
        if not stored:
            fenced = LedgerFenced(f"ledger {self.ledger_id}: chunk {seq} was taken by another writer's seal",
                                  ledger_id=self.ledger_id)
            self._fail(fenced)
            return
        self._in_flight = []
        self.next_seq = seq + 1
        self.chunks_put += 1
        self._flushed(seq, batch[0].entry_id, payloads, len(body))
        self._release(sum(len(p) for p in payloads))
        for append in batch:
            if not append.future.done():  # the appender was cancelled; its entry stays
                append.future.set_result(append.entry_id)

    def _fail(self, error: StorageError) -> None:
        """The chunk in flight and every append after it fail; the ledger takes no more."""
        if self.state in (WriterState.OPEN, WriterState.DRAINING):
            self._transition_to(WriterState.FAILED)
        if self.failure is None:
            self.failure = error
        in_flight, pending = self._in_flight, list(self._pending)
        self._in_flight = []
        self._pending.clear()
        self._pending_bytes = 0
        self._release(sum(len(a.payload) for a in [*in_flight, *pending]))
        for append in in_flight:  # the chunk's outcome: the error itself (WriteOutcomeUnknown: it may land)
            if not append.future.done():
                append.future.set_exception(error)
        for append in pending:  # never sent: they did not happen
            if not append.future.done():
                append.future.set_exception(self._refused(error))
