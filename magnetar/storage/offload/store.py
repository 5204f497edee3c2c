"""Whole ledgers on a blob store: the copy, its verification, reads through a bounded cache, deletion.

Implements :class:`magnetar.storage.offload.api.OffloadStore` for any :class:`BlobStore`. The copy streams
entries from the local ledger into blocks of at most ``max_block_size_bytes`` (one bigger entry gets a
block of its own), each checksummed, then writes the index; the index appears last, so a copy without an
index is incomplete by construction. Reads fetch a block whole (in ranged reads of at most
``read_buffer_size_bytes``), check it, and keep it in an LRU cache bounded by ``read_cache_size_bytes``.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping

from magnetar.storage.api import EntryNotFound, StorageError
from magnetar.storage.offload import blocks as fmt
from magnetar.storage.offload.api import (
    BlobStore,
    OffloadContext,
    OffloadCorrupted,
    OffloadedLedger,
    OffloadError,
    OffloadSettings,
    ReadEntries,
)

log = logging.getLogger("magnetar.storage.offload")

#: Entries asked of the local ledger per read while copying.
COPY_READ_ENTRIES_MAX = 256
#: Indexes kept in memory (a few KiB each).
INDEX_CACHE_MAX = 4096


class BlockOffloadStore:
    def __init__(
        self, blobs: BlobStore, settings: OffloadSettings, *, new_uuid: Callable[[], str] = lambda: str(uuid.uuid4())
    ) -> None:
        """``new_uuid`` names each offload attempt (the simulator draws them from its seed)."""
        if settings.max_block_size_bytes <= fmt.BLOCK_HEADER_BYTES:
            raise OffloadError("managedLedgerOffloadMaxBlockSizeInBytes is too small")
        if settings.read_buffer_size_bytes <= 0:
            raise OffloadError("managedLedgerOffloadReadBufferSizeInBytes must be positive")
        self.blobs = blobs
        self._settings = settings
        self._new_uuid = new_uuid
        self._indexes: OrderedDict[str, fmt.Index] = OrderedDict()
        self._blocks: OrderedDict[tuple[str, int], list[bytes]] = OrderedDict()
        self._block_sizes: dict[tuple[str, int], int] = {}
        self._cached_bytes = 0
        self.cache_hits = 0
        self.cache_misses = 0

    @property
    def driver(self) -> str:
        return self.blobs.driver

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def new_context(self, ledger_id: int) -> OffloadContext:
        return OffloadContext(self.driver, self.blobs.bucket, self._settings.key_prefix, self._new_uuid(), ledger_id)

    def _check_context(self, context: OffloadContext) -> None:
        if (context.driver, context.bucket) != (self.driver, self.blobs.bucket):
            raise OffloadError(
                f"ledger {context.ledger_id} was offloaded with driver {context.driver} to {context.bucket!r}; "
                f"this broker's offload store is {self.driver} at {self.blobs.bucket!r}"
            )

    # ---- the copy ------------------------------------------------------------------------------------------

    async def write_ledger(
        self, context: OffloadContext, entries: int, read: ReadEntries, custom_metadata: Mapping[str, str]
    ) -> OffloadedLedger:
        self._check_context(context)
        writer = await self.blobs.writer(context.data_key)
        refs: list[fmt.BlockRef] = []
        pending: list[bytes] = []
        state = {"offset": 0, "first": 0, "pending_bytes": 0, "size": 0}
        block_max = self._settings.max_block_size_bytes - fmt.BLOCK_HEADER_BYTES

        async def flush() -> None:
            block = fmt.encode_block(context.ledger_id, state["first"], pending)
            await writer.write(block)
            refs.append(fmt.BlockRef(state["first"], state["offset"], len(block)))
            state["offset"] += len(block)
            state["first"] += len(pending)
            state["pending_bytes"] = 0
            pending.clear()

        try:
            next_entry = 0
            while next_entry < entries:  # each round reads at least one entry or fails
                batch = await read(next_entry, min(entries - 1, next_entry + COPY_READ_ENTRIES_MAX - 1))
                if not batch:
                    raise OffloadError(f"ledger {context.ledger_id}: local read returned nothing at {next_entry}")
                for entry in batch:
                    cost = fmt.ENTRY_OVERHEAD_BYTES + len(entry)
                    if pending and state["pending_bytes"] + cost > block_max:
                        await flush()
                    pending.append(entry)
                    state["pending_bytes"] += cost
                    state["size"] += len(entry)
                next_entry += len(batch)
            if pending:
                await flush()
            await writer.commit()
        except BaseException:
            await writer.abort()
            raise
        index = fmt.Index(context.ledger_id, entries, state["size"], state["offset"], tuple(refs), custom_metadata)
        index_writer = await self.blobs.writer(context.index_key)
        try:
            await index_writer.write(fmt.encode_index(index))
            await index_writer.commit()
        except BaseException:
            await index_writer.abort()
            raise
        return _summary(index)

    async def verify(self, context: OffloadContext, entries: int) -> OffloadedLedger:
        """Everything read back from the store (not the cache): index, data size, every block's checksum."""
        self._check_context(context)
        index = await self._load_index(context)
        if index.entries != entries:
            raise OffloadCorrupted(
                f"{context.index_key}: index has {index.entries} entries, the ledger {entries}", context.ledger_id, None
            )
        size = await self.blobs.size(context.data_key)
        if size != index.data_bytes:
            raise OffloadCorrupted(
                f"{context.data_key}: {size} bytes, the index says {index.data_bytes}", context.ledger_id, None
            )
        for i in range(len(index.blocks)):
            await self._fetch_block(context, index, i)
        return _summary(index)

    # ---- reads ---------------------------------------------------------------------------------------------

    async def read(self, context: OffloadContext, first_entry: int, last_entry: int) -> list[bytes]:
        self._check_context(context)
        index = self._indexes.get(context.index_key)
        if index is None:
            index = await self._load_index(context)
            self._indexes[context.index_key] = index
            if len(self._indexes) > INDEX_CACHE_MAX:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(context.index_key)
        if first_entry < 0 or last_entry >= index.entries or first_entry > last_entry:
            raise EntryNotFound(
                f"offloaded ledger {context.ledger_id} has {index.entries} entries; asked {first_entry}..{last_entry}",
                context.ledger_id, first_entry,
            )
        result: list[bytes] = []
        entry = first_entry
        while entry <= last_entry:  # one block per round, each holding at least one entry
            i = index.block_of(entry)
            block = await self._cached_block(context, index, i)
            start = index.blocks[i].first_entry
            take = block[entry - start : last_entry - start + 1]
            result.extend(take)
            entry += len(take)
        return result

    async def _load_index(self, context: OffloadContext) -> fmt.Index:
        size = await self.blobs.size(context.index_key)
        data = await self._read_whole(context.index_key, 0, size)
        return fmt.decode_index(data, context.ledger_id, context.index_key)

    async def _read_whole(self, key: str, offset: int, length: int) -> bytes:
        buffer_bytes = self._settings.read_buffer_size_bytes
        parts: list[bytes] = []
        done = 0
        while done < length:  # ceil(length / buffer) ranged reads
            part = await self.blobs.read(key, offset + done, min(buffer_bytes, length - done))
            if not part:
                break
            parts.append(part)
            done += len(part)
        return b"".join(parts)

    async def _fetch_block(self, context: OffloadContext, index: fmt.Index, i: int) -> list[bytes]:
        ref = index.blocks[i]
        data = await self._read_whole(context.data_key, ref.offset, ref.length)
        return fmt.decode_block(data, context.ledger_id, ref.first_entry, index.block_count(i), context.data_key)

    async def _cached_block(self, context: OffloadContext, index: fmt.Index, i: int) -> list[bytes]:
        key = (context.data_key, i)
        cached = self._blocks.get(key)
        if cached is not None:
            self._blocks.move_to_end(key)
            self.cache_hits += 1
            return cached
        self.cache_misses += 1
        entries = await self._fetch_block(context, index, i)
        size = index.blocks[i].length
        if size <= self._settings.read_cache_size_bytes:
            self._blocks[key] = entries
            self._block_sizes[key] = size
            self._cached_bytes += size
            while self._cached_bytes > self._settings.read_cache_size_bytes:  # bounded by the cache's length
                old, _ = self._blocks.popitem(last=False)
                self._cached_bytes -= self._block_sizes.pop(old)
        return entries

    # ---- listing (the ledger audit) -------------------------------------------------------------------------

    async def list_copies(self) -> list[OffloadContext]:
        """Every copy (complete or not) under this store's key prefix, from its data objects' keys."""
        prefix = self._settings.key_prefix
        copies = []
        for key in await self.blobs.list(prefix):
            name = key[len(prefix):]
            uuid_part, sep, ledger = name.rpartition("-ledger-")
            if sep and ledger.isdigit() and uuid_part:
                copies.append(OffloadContext(self.driver, self.blobs.bucket, prefix, uuid_part, int(ledger)))
        return copies

    async def copy_owner(self, context: OffloadContext) -> str | None:
        """The managed ledger a copy's index names, None when it has no readable index (an interrupted copy)."""
        try:
            index = await self._load_index(context)
        except StorageError:
            return None
        return index.metadata.get("pulsar/managed-ledger")

    # ---- deletion ------------------------------------------------------------------------------------------

    async def delete(self, context: OffloadContext) -> None:
        self._check_context(context)
        self._forget(context)
        await self.blobs.delete([context.data_key, context.index_key])
        log.info("deleted offloaded copy %s of ledger %d", context.uuid, context.ledger_id)

    def _forget(self, context: OffloadContext) -> None:
        self._indexes.pop(context.index_key, None)
        for key in [k for k in self._blocks if k[0] == context.data_key]:
            del self._blocks[key]
            self._cached_bytes -= self._block_sizes.pop(key)

    async def close(self) -> None:
        self._blocks.clear()
        self._indexes.clear()
        self._block_sizes.clear()
        self._cached_bytes = 0
        await self.blobs.close()


def _summary(index: fmt.Index) -> OffloadedLedger:
    return OffloadedLedger(index.ledger_id, index.entries, index.size_bytes, index.data_bytes, len(index.blocks),
                           dict(index.metadata))


def open_offload_store(settings: OffloadSettings) -> BlockOffloadStore | None:
    """The store for ``managedLedgerOffloadDriver``, or None when offload is off."""
    if not settings.enabled:
        return None
    if settings.driver == "filesystem":
        from magnetar.storage.offload.filesystem import FilesystemBlobStore, directory_of

        if not settings.filesystem_uri:
            raise OffloadError("managedLedgerOffloadDriver=filesystem needs fileSystemURI")
        return BlockOffloadStore(FilesystemBlobStore(directory_of(settings.filesystem_uri)), settings)
    if settings.driver in ("aws-s3", "s3"):
        from magnetar.storage.offload.s3 import S3BlobStore

        return BlockOffloadStore(S3BlobStore(settings), settings)
    raise OffloadError(f"managedLedgerOffloadDriver {settings.driver!r}: use filesystem, aws-s3 or s3")
