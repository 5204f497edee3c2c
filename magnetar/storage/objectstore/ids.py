"""Ledger ids from the bucket itself: blocks of ids claimed with conditional creates.

:class:`ObjectIdBlocks` implements :class:`~magnetar.storage.api.LedgerIdAllocator` for every process that
shares the bucket (and prefix), with no other service: block ``b`` (ids ``b * size + 1 .. (b + 1) * size``)
belongs to whoever created ``ledger-ids/<b>`` (``If-None-Match: *``, so exactly one creator). A process
lists the claimed blocks, claims the next free one, hands its ids out one by one, and claims another when
it runs out; a block is never released, so no id is handed out twice, across restarts too (a restart
skips the rest of its last block: ids are unique, not dense). A cluster may inject another allocator
(a ZooKeeper counter) instead. Knows nothing of ledgers beyond their ids.
"""

from __future__ import annotations

import asyncio
import json

from magnetar.storage.api import LedgerIdAllocator, StorageIOError
from magnetar.storage.objectstore import _chunks
from magnetar.storage.objectstore._requests import Requests

#: Ids per claimed block. Fixed for the life of a bucket: a block's number says which ids it holds.
BLOCK_SIZE = 1000
#: Blocks tried in a row when others keep winning them.
CLAIM_ATTEMPTS_MAX = 64


def ids_prefix(prefix: str) -> str:
    return f"{prefix}ledger-ids/"


class ObjectIdBlocks:
    def __init__(self, requests: Requests, prefix: str, token: bytes) -> None:
        self._requests = requests
        self._prefix = ids_prefix(prefix)
        self._token = token
        self._lock = asyncio.Lock()
        self._next = 0
        self._end = 0  # the block is used up once _next > _end
        self.blocks_claimed = 0

    async def next_id(self) -> int:
        async with self._lock:
            if self._next == 0 or self._next > self._end:
                await self._claim()
            allocated, self._next = self._next, self._next + 1
            return allocated

    async def _claim(self) -> None:
        listed = await self._requests.list_keys(self._prefix, "listing claimed ledger-id blocks")
        claimed = [b for b in (_chunks.id_of(x.key, self._prefix) for x in listed) if b is not None]
        block = max(claimed, default=-1)
        for _ in range(CLAIM_ATTEMPTS_MAX):  # bounded: another process wins each block at most once
            block += 1
            key = f"{self._prefix}{block:0{_chunks.ID_DIGITS}d}"
            body = json.dumps({"block": block, "token": self._token.hex()}).encode()
            if await self._requests.create(key, body, f"claiming ledger-id block {block}", None):
                self._next, self._end = block * BLOCK_SIZE + 1, (block + 1) * BLOCK_SIZE
                self.blocks_claimed += 1
                return
        raise StorageIOError(f"no free ledger-id block after {CLAIM_ATTEMPTS_MAX} tries under {self._prefix}")


def _conforms(blocks: ObjectIdBlocks) -> LedgerIdAllocator:
    return blocks
