"""Object orphans: data chunks of a ledger that has no metadata object, and their removal.

A ledger's delete removes its data chunks (top down) and then its metadata object, and keeps its seals as a
tombstone. A create delayed in the network can still land on a data chunk's key after the delete took it;
that object belongs to no ledger: an orphan, listed by the ledger audit (``objectOrphans``) and removed by
its ``--fix``. Seals are never removed here: a deleted ledger's seal still fences a writer that was paused
all along. Knows nothing of the broker; works through the store's requests and reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from magnetar.storage.api import StorageError
from magnetar.storage.objectstore import _chunks
from magnetar.storage.objectstore._reader import ChunkReader
from magnetar.storage.objectstore._requests import Requests


class ObjectLedgerStore(Protocol):
    """What this module uses of the store (a protocol: the store imports this module)."""

    @property
    def prefix(self) -> str: ...

    @property
    def requests(self) -> Requests: ...

    reader: ChunkReader

    async def list_ledgers(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class ObjectOrphan:
    ledger_id: int
    data_chunks: int
    size_bytes: int

    def to_json(self) -> dict[str, int]:
        return {"ledgerId": self.ledger_id, "dataChunks": self.data_chunks, "sizeBytes": self.size_bytes}


async def _is_data(store: ObjectLedgerStore, ledger_id: int, seq: int, size_bytes: int) -> bool:
    if size_bytes == _chunks.FENCE_BYTES:
        return False
    try:
        return (await store.reader.header(ledger_id, seq)).kind == _chunks.DATA
    except StorageError:  # gone meanwhile, or not a chunk of ours: not judged an orphan
        return False


async def find(store: ObjectLedgerStore) -> list[ObjectOrphan]:
    """One LIST of every chunk key, and a ranged GET of each meta-less object that could be data."""
    ledgers_prefix = f"{store.prefix}ledgers/"
    listed = await store.requests.list_keys(ledgers_prefix, "listing every chunk")
    known = set(await store.list_ledgers())
    found: dict[int, ObjectOrphan] = {}
    for obj in listed:
        ledger_id = _chunks.id_of(obj.key.rsplit("/", 1)[0], ledgers_prefix)
        if ledger_id is None or ledger_id in known:
            continue
        seq = _chunks.seq_of(obj.key, _chunks.ledger_prefix(store.prefix, ledger_id))
        if seq is not None and await _is_data(store, ledger_id, seq, obj.size_bytes):
            was = found.get(ledger_id, ObjectOrphan(ledger_id, 0, 0))
            found[ledger_id] = ObjectOrphan(ledger_id, was.data_chunks + 1, was.size_bytes + obj.size_bytes)
    return [found[i] for i in sorted(found)]


async def purge(store: ObjectLedgerStore, ledger_id: int) -> None:
    """Delete the data chunks of a ledger that has no metadata object, top down."""
    if ledger_id in set(await store.list_ledgers()):
        raise StorageError(f"ledger {ledger_id} exists: delete the ledger, not its objects", ledger_id=ledger_id)
    chunk_prefix = _chunks.ledger_prefix(store.prefix, ledger_id)
    data = []
    for obj in await store.requests.list_keys(chunk_prefix, "listing an orphan's chunks", ledger_id):
        seq = _chunks.seq_of(obj.key, chunk_prefix)
        if seq is not None and await _is_data(store, ledger_id, seq, obj.size_bytes):
            data.append(obj.key)
    await store.requests.delete(data[::-1], "deleting an orphan's chunks", ledger_id)
