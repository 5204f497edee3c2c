"""Ledger ids from one counter in the metadata store, for a ledger store that several brokers share.

:class:`MetadataLedgerIdAllocator` implements :class:`~magnetar.storage.api.LedgerIdAllocator`: the record at
``/counters/ledger-id`` holds the last id handed out (decimal text, a JSON number), and each id is one
compare-and-set increment of it. So ids are unique across the cluster and *increase in the order they are
handed out*, whichever broker asks: a managed ledger that moves between brokers keeps ascending ledger ids,
which its ledger list requires (``ledger_list.py``). Blocks of ids per broker would save writes but break that
order, so every id costs one write; ledgers are created at rollover, rarely.

``floor`` raises the counter past ids already in use (a store that allocated its own ids before). This module
knows nothing of what a ledger holds.
"""

from __future__ import annotations

import asyncio

from magnetar.metadata.api import NEW_KEY, BadVersion, MetadataError, MetadataStore
from magnetar.storage.api import LedgerIdAllocator, StorageIOError

COUNTER_KEY = "/counters/ledger-id"
CAS_ATTEMPTS_MAX = 64  # increments lost in a row to other brokers' before giving up


class MetadataLedgerIdAllocator:
    def __init__(self, metadata: MetadataStore, *, key: str = COUNTER_KEY, floor: int = 1) -> None:
        if floor < 1:
            raise ValueError("ledger ids start at 1 or above")
        self._metadata = metadata
        self._key = key
        self._floor = floor
        self._lock = asyncio.Lock()  # this process's increments one at a time (they would only collide)
        self.conflicts = 0  # increments lost to another broker's

    async def next_id(self) -> int:
        async with self._lock:
            try:
                return await self._increment()
            except MetadataError as exc:
                raise StorageIOError(f"cannot allocate a ledger id from {self._key}: {exc}") from exc

    async def _increment(self) -> int:
        for _ in range(CAS_ATTEMPTS_MAX):  # bounded: each failed attempt means another broker got an id
            record = await self._metadata.get(self._key)
            last = 0 if record is None else _parse(record.value, self._key)
            allocated = max(last + 1, self._floor)
            try:
                await self._metadata.put(self._key, str(allocated).encode(),
                                         NEW_KEY if record is None else record.version)
            except BadVersion:
                self.conflicts += 1
                continue
            return allocated
        raise StorageIOError(f"lost {CAS_ATTEMPTS_MAX} increments of {self._key} in a row to other brokers")


def _parse(value: bytes, key: str) -> int:
    try:
        last = int(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise StorageIOError(f"{key} does not hold a ledger id: {value[:40]!r}") from None
    if last < 0:
        raise StorageIOError(f"{key} holds a negative ledger id: {last}")
    return last


def _conforms(allocator: MetadataLedgerIdAllocator) -> LedgerIdAllocator:
    return allocator
