"""The object ledger store: ledgers as chains of chunk objects in an S3-compatible bucket, fenced in the bucket.

Layout and formats in ``_chunks``; appends and group commit in ``_writer`` (one object per flush of a
ledger, created with ``If-None-Match: *``, an append completes only once its object's PUT succeeded);
reads, the entry cache and ranged GETs in ``_reader``; retries in ``_requests``; ids in ``ids``.

Only the store instance that created a ledger appends to it. Any instance (another broker, or this one
after a restart) may read, seal or delete it:

* **seal** is the fence. The writer seals at its next seq, recording its acknowledged entry count (a chunk
  whose PUT failed but landed anyway lies below the seal yet beyond that count: never read). Anyone else
  lists the chunks and creates a fence object (a seal counting every data chunk below it) at the first
  missing seq; if the writer takes that seq first, the sealer tries further up, doubling its step, then
  fences the seqs it jumped over (see ``_seal_as_reader``). The writer's next PUT meets a fence, gets 412,
  and its ledger is fenced (LedgerFenced: the managed ledger goes FENCED). So every acknowledged chunk
  lies below the ledger's lowest seal, and nothing above it is part of the ledger.
* **delete** seals first, then deletes the data chunks from the top down and the metadata object last;
  the seal object stays as a tombstone, so a writer that was paused through all of it (its next PUT
  is at the sealed seq) is still refused. An interrupted delete leaves the ledger listed, to be deleted
  again; it then seals again at the first gap, and keeps everything from there up.

A ledger another instance writes is re-read from the bucket (one LIST and one ranged GET) whenever a
caller needs more than this store saw of it. This module knows nothing of topics, cursors or the broker.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from magnetar.core.clock import Clock, SystemClock
from magnetar.storage import _rules
from magnetar.storage._rules import LedgerState
from magnetar.storage._write_errors import WriteErrorLog
from magnetar.storage.api import (
    LedgerFenced,
    LedgerIdAllocator,
    LedgerInfo,
    LedgerNotFound,
    LedgerStore,
    StorageError,
    StorageIOError,
    StoreClosed,
)
from magnetar.storage.objectstore import _chunks, orphans
from magnetar.storage.objectstore._chunks import LedgerMeta
from magnetar.storage.objectstore._reader import ChunkIndex, ChunkReader, EntryCache
from magnetar.storage.objectstore._requests import Requests, SleepMs, real_sleep_ms
from magnetar.storage.objectstore._writer import ChunkWriter, FlushSettings, WriterState
from magnetar.storage.objectstore.api import ObjectClient, ObjectMissing
from magnetar.storage.objectstore.ids import ObjectIdBlocks
from magnetar.storage.objectstore.orphans import ObjectOrphan
from magnetar.storage.objectstore.probe import probe_conditional_writes
from magnetar.storage.objectstore.settings import ObjectLedgerSettings

log = logging.getLogger("magnetar.storage")

#: Tries to claim the first missing seq with a seal while writers keep taking it.
SEAL_ATTEMPTS_MAX = 64
#: The largest step a sealer takes past seqs a writer keeps taking (the step doubles up to it).
SEAL_STEP_MAX = 1024
#: Fresh ids tried when a new ledger's keys turn out to be in use (an allocator handing out a used id).
CREATE_ATTEMPTS_MAX = 3


class _Queued(NamedTuple):
    """An append waiting for room."""

    ledger_id: int
    payload: bytes
    future: asyncio.Future[int]


class _Ledger:
    """What this store knows of one ledger. Authoritative while this store writes it (``writer`` set and the
    ledger open) or once it is durably sealed; otherwise a view re-read from the bucket when needed."""

    __slots__ = ("_fenced", "entries", "index", "lock", "meta", "seal_seq", "size_bytes", "state", "writer")

    def __init__(self, meta: LedgerMeta) -> None:
        self.meta = meta
        self.state = LedgerState.OPEN
        self.entries = 0
        self.size_bytes = 0
        self.index = ChunkIndex()
        self.writer: ChunkWriter | None = None
        self._fenced = False  # another writer's seal stands where ours was to go
        self.seal_seq: int | None = None  # where the seal object is, once durable
        self.lock = asyncio.Lock()  # seal and delete, one at a time

    @property
    def ledger_id(self) -> int:
        return self.meta.ledger_id

    def transition_to(self, target: LedgerState) -> None:
        _rules.check_transition(self.ledger_id, self.state, target)
        self.state = target

    @property
    def fenced(self) -> bool:
        """Another writer sealed the ledger under our writer: its view is the bucket's from now on."""
        return self._fenced or (self.writer is not None and isinstance(self.writer.failure, LedgerFenced))

    def mark_fenced(self) -> None:
        self._fenced = True

    @property
    def authoritative(self) -> bool:
        return self.seal_seq is not None or (self.writer is not None and not self.fenced)

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.ledger_id, entries=self.entries, size_bytes=self.size_bytes,
            sealed=self.state is LedgerState.SEALED, created_ms=self.meta.created_ms,
            custom_metadata=dict(self.meta.custom_metadata),
        )  # fmt: skip


class ObjectLedgerStore:
    """A :class:`~magnetar.storage.api.LedgerStore` in a bucket. Build it with :meth:`open`."""

    def __init__(
        self,
        requests: Requests,
        *,
        prefix: str,
        settings: ObjectLedgerSettings,
        allocator: LedgerIdAllocator,
        clock: Clock,
        sleep_ms: SleepMs,
        token: bytes,
    ) -> None:
        self._requests = requests
        self._prefix = prefix
        self._settings = settings
        self._allocator = allocator
        self._clock = clock
        self._sleep_ms = sleep_ms
        self.token = token
        self._ledgers: dict[int, _Ledger] = {}
        self._loading: dict[int, asyncio.Future[_Ledger]] = {}
        self.cache = EntryCache(settings.read_cache_bytes)
        self.reader = ChunkReader(requests, prefix, self.cache, settings.whole_chunk_bytes_max)
        self._flush = FlushSettings(flush_max_delay_ms=settings.flush_max_delay_ms,
                                    flush_max_bytes=settings.flush_max_bytes)
        self._unflushed_bytes = 0
        self._backlog: deque[_Queued] = deque()
        self._closed = False
        self.chunks_put = 0
        self.seal_races_lost = 0  # seqs a sealer found taken by the time its fence got there

    @classmethod
    async def open(
        cls,
        client: ObjectClient,
        *,
        prefix: str = "",
        settings: ObjectLedgerSettings | None = None,
        allocator: LedgerIdAllocator | None = None,
        clock: Clock | None = None,
        sleep_ms: SleepMs = real_sleep_ms,
        token: bytes | None = None,
        probe: bool = True,
    ) -> ObjectLedgerStore:
        """A store on ``client``'s bucket under ``prefix`` (empty, or ending with ``/``). With ``probe``, it
        first checks that the service honours conditional creates and refuses to start otherwise
        (ObjectStoreRefused, naming why). Without ``allocator``, ids come from blocks claimed in the bucket."""
        settings = settings if settings is not None else ObjectLedgerSettings()
        clock = clock if clock is not None else SystemClock()
        token = token if token is not None else os.urandom(_chunks.TOKEN_BYTES)
        if prefix and not prefix.endswith("/"):
            raise ValueError(f"prefix {prefix!r} must end with '/'")
        requests = Requests(
            client, attempts_max=settings.attempts_max, backoff_ms=settings.backoff_ms,
            backoff_ms_max=settings.backoff_ms_max, sleep_ms=sleep_ms,
            errors=WriteErrorLog(clock, recovers_when="the object store answers again"),
        )  # fmt: skip
        if probe:
            await probe_conditional_writes(client, prefix, token)
        if allocator is None:
            allocator = ObjectIdBlocks(requests, prefix, token)
        return cls(requests, prefix=prefix, settings=settings, allocator=allocator, clock=clock,
                   sleep_ms=sleep_ms, token=token)

    @property
    def requests(self) -> Requests:
        return self._requests

    # ---- looking ledgers up ------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("ledger store is closed")

    async def _ledger(self, ledger_id: int) -> tuple[_Ledger, bool]:
        """The ledger, and whether it was just read from the bucket. LedgerNotFound if it does not exist."""
        self._check_open()
        ledger = self._ledgers.get(ledger_id)
        if ledger is not None:
            return ledger, False
        loading = self._loading.get(ledger_id)
        if loading is not None:
            return await asyncio.shield(loading), True
        future: asyncio.Future[_Ledger] = asyncio.get_running_loop().create_future()
        self._loading[ledger_id] = future
        try:
            ledger = await self._load(ledger_id)
            self._check_open()
            self._ledgers[ledger_id] = ledger
            future.set_result(ledger)
            return ledger, True
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter may or may not exist
            raise
        finally:
            del self._loading[ledger_id]

    async def _load(self, ledger_id: int) -> _Ledger:
        key = _chunks.meta_key(self._prefix, ledger_id)
        try:
            raw = await self._requests.get(key, "reading ledger metadata", ledger_id)
        except ObjectMissing as exc:
            raise LedgerNotFound(f"no ledger {ledger_id}", ledger_id=ledger_id) from exc
        ledger = _Ledger(LedgerMeta.from_json(raw, ledger_id))
        await self._refresh(ledger)
        return ledger

    async def _refresh(self, ledger: _Ledger) -> None:
        """Re-read the ledger's chunks from the bucket: one LIST, then ranged GETs of the headers at its top
        (the last chunk; below a seal, down to the lowest seal and the data chunk under it)."""
        ledger_id, chunk_prefix = ledger.ledger_id, _chunks.ledger_prefix(self._prefix, ledger.ledger_id)
        sizes: list[int] = []
        for listed in await self._requests.list_keys(chunk_prefix, "listing chunks", ledger_id):
            if _chunks.seq_of(listed.key, chunk_prefix) != len(sizes):
                break  # the ledger ends at the first gap
            sizes.append(listed.size_bytes)
        top = len(sizes) - 1
        header = await self.reader.header(ledger_id, top) if sizes else None
        seal, seal_seq = None, len(sizes)
        while header is not None and header.kind in _chunks.SEALS:  # bounded: seals stacked at the top
            seal, seal_seq = header, seal_seq - 1
            header = await self.reader.header(ledger_id, seal_seq - 1) if seal_seq else None
        ledger.index.cover(sizes[:seal_seq])
        if header is not None:
            ledger.index.firsts[seal_seq - 1] = header.first_entry
        ledger.entries = header.first_entry + header.count if header is not None else 0
        ledger.size_bytes = header.bytes_end if header is not None else 0
        if seal is None:
            return
        if seal.kind == _chunks.SEAL:  # the writer's own: its count, and the chunks its entries lie in
            ledger.entries, ledger.size_bytes = seal.first_entry, seal.bytes_end
            ledger.index.cut(seal.count)
            if seal.count:
                key = _chunks.chunk_key(self._prefix, ledger_id, seal_seq)
                body = await self._requests.get(key, "reading a seal", ledger_id)
                ledger.index.learn(_chunks.seal_index(body, seal, ledger_id, seal_seq))
        if ledger.state is LedgerState.OPEN:
            ledger.transition_to(LedgerState.SEALED)
        ledger.seal_seq = seal_seq

    # ---- the LedgerStore operations ----------------------------------------------------------------------------

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        self._check_open()
        metadata = _rules.copy_metadata(custom_metadata)
        for _ in range(CREATE_ATTEMPTS_MAX):  # bounded: a correct allocator never repeats an id
            ledger_id = await self._allocator.next_id()
            meta = LedgerMeta(ledger_id, self._clock.now_ms(), metadata)
            chunk_prefix = _chunks.ledger_prefix(self._prefix, ledger_id)
            if await self._requests.list_keys(chunk_prefix, "checking a new ledger's keys", ledger_id):
                log.error("ledger %d: the id allocator handed out an id whose keys exist; taking another", ledger_id)
                continue
            body = meta.to_json()[:-1] + b', "writer": "' + self.token.hex().encode() + b'"}'
            if not await self._requests.create(_chunks.meta_key(self._prefix, ledger_id), body,
                                               "creating ledger metadata", ledger_id):
                log.error("ledger %d: metadata exists already; taking another id", ledger_id)
                continue
            self._check_open()
            ledger = _Ledger(meta)
            ledger.writer = self._new_writer(ledger)
            self._ledgers[ledger_id] = ledger
            return ledger.info()
        raise StorageIOError(f"no unused ledger id after {CREATE_ATTEMPTS_MAX} tries (check the id allocator)")

    def _new_writer(self, ledger: _Ledger) -> ChunkWriter:
        def flushed(seq: int, first_entry: int, payloads: list[bytes], chunk_bytes: int) -> None:
            assert seq == ledger.index.chunks, (ledger.ledger_id, seq, ledger.index.chunks)
            ledger.index.append(first_entry, chunk_bytes)
            ledger.entries += len(payloads)
            ledger.size_bytes += sum(len(p) for p in payloads)
            self.chunks_put += 1
            for i, payload in enumerate(payloads):
                self.cache.put(ledger.ledger_id, first_entry + i, payload)

        async def put_chunk(seq: int, body: bytes) -> bool:
            key = _chunks.chunk_key(self._prefix, ledger.ledger_id, seq)
            return await self._requests.create(key, body, f"writing chunk {seq}", ledger.ledger_id)

        return ChunkWriter(
            ledger.ledger_id, self.token, next_seq=0, next_entry=0, bytes_end=0, put_chunk=put_chunk,
            flushed=flushed, release=self._release, settings=self._flush, clock=self._clock, sleep_ms=self._sleep_ms,
        )  # fmt: skip

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        return await self.start_append(ledger_id, data)

    def start_append(self, ledger_id: int, data: bytes | memoryview) -> asyncio.Future[int]:
        """Take the entry's place now and return a future for its id, resolved once its chunk is stored."""
        ledger = self._ledgers.get(ledger_id)
        if ledger is None or self._closed:
            return asyncio.ensure_future(self._append_after_lookup(ledger_id, data))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        try:
            self._check_appendable(ledger)
            payload = bytes(data)
            _rules.check_entry_size(ledger_id, len(payload))
        except StorageError as exc:
            future.set_exception(exc)
            return future
        if self._backlog or self._unflushed_bytes >= self._settings.pending_bytes_max:
            self._backlog.append(_Queued(ledger_id, payload, future))
        else:
            self._admit(ledger, payload, future)
        return future

    async def _append_after_lookup(self, ledger_id: int, data: bytes | memoryview) -> int:
        await self._ledger(ledger_id)  # LedgerNotFound, StoreClosed
        return await self.start_append(ledger_id, data)

    def _check_appendable(self, ledger: _Ledger) -> None:
        if ledger.fenced:
            raise LedgerFenced(f"ledger {ledger.ledger_id} was sealed by another writer", ledger_id=ledger.ledger_id)
        _rules.check_appendable(ledger.ledger_id, ledger.state)
        writer = ledger.writer
        if writer is None:
            raise StorageIOError(f"ledger {ledger.ledger_id} was created by another store instance: only its "
                                 "creator appends to it", ledger_id=ledger.ledger_id)
        refusal = writer.refusal()
        if refusal is not None:
            raise refusal

    def _admit(self, ledger: _Ledger, payload: bytes, future: asyncio.Future[int]) -> None:
        assert ledger.writer is not None
        self._unflushed_bytes += len(payload)
        ledger.writer.add(payload, future)
        if ledger.writer.state is WriterState.FAILED:  # cannot happen: add() checks; kept as a tripwire
            raise AssertionError("added to a failed writer")

    def _release(self, size_bytes: int) -> None:
        """Chunks were stored or failed: admit appends that waited for room, in call order."""
        self._unflushed_bytes -= size_bytes
        while self._backlog and self._unflushed_bytes < self._settings.pending_bytes_max:  # bounded by the backlog
            queued = self._backlog.popleft()
            if queued.future.done():  # cancelled while it waited: never written
                continue
            ledger = self._ledgers.get(queued.ledger_id)
            try:
                self._check_open()
                if ledger is None:
                    raise LedgerNotFound(f"no ledger {queued.ledger_id}", ledger_id=queued.ledger_id)
                self._check_appendable(ledger)
            except StorageError as exc:
                queued.future.set_exception(exc)
                continue
            self._admit(ledger, queued.payload, queued.future)

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        ledger, fresh = await self._ledger(ledger_id)
        if last_entry >= ledger.entries and not fresh and not ledger.authoritative:
            await self._refresh(ledger)  # another writer may have added entries since we looked
        _rules.check_range(ledger_id, first_entry, last_entry, ledger.entries)
        return await self.reader.read(ledger_id, ledger.index, ledger.entries, first_entry, last_entry)

    async def info(self, ledger_id: int) -> LedgerInfo:
        ledger, fresh = await self._ledger(ledger_id)
        if not fresh and not ledger.authoritative:
            await self._refresh(ledger)
        return ledger.info()

    async def seal(self, ledger_id: int) -> LedgerInfo:
        ledger, _ = await self._ledger(ledger_id)
        async with ledger.lock:
            await self._ledger(ledger_id)  # deleted or closed while we waited for the lock?
            await self._seal(ledger)
            return ledger.info()

    async def _seal(self, ledger: _Ledger) -> None:
        """Make the seal durable (caller holds the ledger's lock)."""
        if ledger.seal_seq is not None:
            return
        if ledger.writer is not None and not ledger.fenced:
            if ledger.state is LedgerState.OPEN:
                ledger.transition_to(LedgerState.SEALED)  # appends from now on are refused
            await ledger.writer.drain()
            if not ledger.fenced:
                await self._seal_as_writer(ledger, ledger.writer.next_seq)
        if ledger.seal_seq is None:
            await self._seal_as_reader(ledger)

    async def _seal_as_writer(self, ledger: _Ledger, seq: int) -> None:
        """Seal at the writer's next seq with its acknowledged count; past a chunk of ours that landed after
        its PUT failed; or find another's seal there."""
        ledger_id = ledger.ledger_id
        firsts = list(ledger.index.firsts)
        for _ in range(SEAL_ATTEMPTS_MAX):  # bounded: our own late chunks are few (one per failed PUT)
            body = _chunks.encode_seal(ledger.entries, ledger.size_bytes, self.token, firsts)
            if await self._requests.create(_chunks.chunk_key(self._prefix, ledger_id, seq), body, "sealing",
                                           ledger_id):
                ledger.seal_seq = seq
                return
            header = await self.reader.header(ledger_id, seq)
            if header.kind in _chunks.SEALS or header.token != self.token:
                ledger.mark_fenced()  # another writer sealed it first: its seal stands
                return
            seq += 1  # a chunk of ours whose PUT failed yet landed: below the seal, beyond its count
        raise StorageIOError(f"ledger {ledger_id}: no free seq to seal at", ledger_id=ledger_id)

    async def _seal_as_reader(self, ledger: _Ledger) -> None:
        """Seal someone else's ledger (or ours, once fenced) with a fence at the first missing seq.

        A writer PUTting chunk after chunk keeps taking the next seq; a sealer stepping one seq at a time
        would stay as far behind as it started. So after each lost seq the step doubles, and once a fence
        lands the seqs jumped over get fences too (each one lands, or finds the writer's chunk there): the
        writer's chunks are a prefix, fences fill the rest, and the writer's next PUT meets one of them."""
        ledger_id = ledger.ledger_id
        await self._refresh(ledger)
        if ledger.seal_seq is not None:
            return
        body = _chunks.encode_fence(self.token)
        seq, step = ledger.index.chunks, 1
        skipped: list[int] = []
        for _ in range(SEAL_ATTEMPTS_MAX):  # bounded: each lost seq is one the writer (or another sealer) took
            if await self._requests.create_new(_chunks.chunk_key(self._prefix, ledger_id, seq), body, "sealing",
                                               ledger_id):
                break
            self.seal_races_lost += 1
            skipped.extend(range(seq + 1, seq + step))
            seq, step = seq + step, min(2 * step, SEAL_STEP_MAX)
        else:
            raise StorageIOError(f"ledger {ledger_id}: could not seal: writers kept taking the next seq", ledger_id)
        for gap in skipped:  # bounded by the seqs jumped over
            await self._requests.create_new(_chunks.chunk_key(self._prefix, ledger_id, gap), body, "sealing",
                                            ledger_id)
        await self._refresh(ledger)
        if ledger.seal_seq is None:
            raise StorageIOError(f"ledger {ledger_id}: the fence at {seq} is not in its chain of chunks (deleted "
                                 "meanwhile?)", ledger_id)

    async def delete(self, ledger_id: int) -> None:
        ledger, _ = await self._ledger(ledger_id)
        async with ledger.lock:
            await self._ledger(ledger_id)
            await self._seal(ledger)  # the fence first: no writer lands a chunk while we delete
            assert ledger.seal_seq is not None
            chunk_prefix = _chunks.ledger_prefix(self._prefix, ledger_id)
            listed = await self._requests.list_keys(chunk_prefix, "listing chunks to delete", ledger_id)
            below = [x.key for x in listed if (_chunks.seq_of(x.key, chunk_prefix) or 0) < ledger.seal_seq]
            await self._requests.delete(below[::-1], "deleting chunks", ledger_id)  # top down: see the docstring
            await self._requests.delete([_chunks.meta_key(self._prefix, ledger_id)], "deleting metadata", ledger_id)
            ledger.transition_to(LedgerState.DELETED)
            self._ledgers.pop(ledger_id, None)

    async def list_ledgers(self) -> Sequence[int]:
        self._check_open()
        prefix = _chunks.meta_prefix(self._prefix)
        listed = await self._requests.list_keys(prefix, "listing ledgers")
        return sorted(i for i in (_chunks.id_of(x.key, prefix) for x in listed) if i is not None)

    @property
    def prefix(self) -> str:
        return self._prefix

    async def object_orphans(self) -> list[ObjectOrphan]:
        """Ledgers with data chunks but no metadata object (see ``orphans``)."""
        self._check_open()
        return await orphans.find(self)

    async def purge_object_orphan(self, ledger_id: int) -> None:
        """Delete an orphan's data chunks; its seals stay."""
        self._check_open()
        await orphans.purge(self, ledger_id)

    async def close(self) -> None:
        """Complete (store or fail) every pending append, then close the client."""
        if self._closed:
            return
        self._closed = True
        for ledger in list(self._ledgers.values()):
            if ledger.writer is not None:
                await ledger.writer.drain()
        for queued in self._backlog:
            if not queued.future.done():
                queued.future.set_exception(StoreClosed("ledger store is closed", ledger_id=queued.ledger_id))
        self._backlog.clear()
        await self._requests.client.close()


if TYPE_CHECKING:

    async def _conforms(client: ObjectClient) -> LedgerStore:
        return await ObjectLedgerStore.open(client)
