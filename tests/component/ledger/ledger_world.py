"""Test doubles around the in-memory stores: counted metadata writes, gated appends, a manual timer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.api import Record, WatchCallback
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import LedgerInfo
from magnetar.storage.memory import MemoryLedgerStore

WAIT_S = 5.0
NAME = "public/default/persistent/my-topic"


class CountingMetadata:
    """A MemoryMetadataStore that counts puts per key and lets a test wait for them."""

    def __init__(self, inner: MemoryMetadataStore | None = None) -> None:
        self.inner = inner or MemoryMetadataStore()
        self.puts: dict[str, int] = {}
        self._changed = asyncio.Condition()

    def puts_under(self, prefix: str) -> int:
        return sum(n for k, n in self.puts.items() if k.startswith(prefix))

    async def wait_puts(self, prefix: str, count: int) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.puts_under(prefix) >= count)

        await asyncio.wait_for(reached(), WAIT_S)

    async def get(self, key: str) -> Record | None:
        return await self.inner.get(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        record = await self.inner.put(key, value, expected_version)
        self.puts[key] = self.puts.get(key, 0) + 1
        async with self._changed:
            self._changed.notify_all()
        return record

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        await self.inner.delete(key, expected_version)

    async def children(self, key: str) -> list[str]:
        return await self.inner.children(key)

    async def exists(self, key: str) -> bool:
        return await self.inner.exists(key)

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        return self.inner.watch(prefix, callback)

    async def close(self) -> None:
        await self.inner.close()


class GatedStore:
    """A MemoryLedgerStore whose appends take their id at call time but return only when released."""

    def __init__(self, inner: MemoryLedgerStore) -> None:
        self.inner = inner
        self.gates: list[asyncio.Future[None]] = []
        self._gate_added = asyncio.Event()
        self._open = False  # once released for good, appends return at once

    async def wait_for_gates(self, count: int) -> None:
        """Wait (bounded) until ``count`` appends are held at their gates."""
        async def reached() -> None:
            while len(self.gates) < count:  # each turn waits for one more append
                self._gate_added.clear()
                await self._gate_added.wait()

        await asyncio.wait_for(reached(), WAIT_S)

    def release_all(self) -> None:
        """Release every held append and let later ones through ungated."""
        self._open = True
        for gate in self.gates:
            if not gate.done():
                gate.set_result(None)

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        return await self.inner.create_ledger(custom_metadata)

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        entry_id = await self.inner.append(ledger_id, data)
        if self._open:
            return entry_id
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        self._gate_added.set()
        await gate
        return entry_id

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        return await self.inner.read(ledger_id, first_entry, last_entry)

    async def info(self, ledger_id: int) -> LedgerInfo:
        return await self.inner.info(ledger_id)

    async def seal(self, ledger_id: int) -> LedgerInfo:
        return await self.inner.seal(ledger_id)

    async def delete(self, ledger_id: int) -> None:
        await self.inner.delete(ledger_id)

    async def list_ledgers(self) -> Sequence[int]:
        return await self.inner.list_ledgers()

    async def close(self) -> None:
        await self.inner.close()


class ManualTimer:
    """The cursor persistence delay, released by the test instead of by time."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []
        self.delays_ms: list[int] = []
        self._started: asyncio.Event | None = None

    async def sleep_ms(self, delay_ms: int) -> None:
        self.delays_ms.append(delay_ms)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        if self._started is not None:
            self._started.set()
        await future

    async def wait_sleeping(self) -> None:
        """Until some task is waiting on the timer."""
        if not self.waiting:
            self._started = asyncio.Event()
            await asyncio.wait_for(self._started.wait(), WAIT_S)
            self._started = None

    def fire(self) -> int:
        fired = 0
        for future in self.waiting:
            if not future.done():
                future.set_result(None)
                fired += 1
        self.waiting.clear()
        return fired


class World:
    """Stores that outlive factories, like a disk outlives a process."""

    def __init__(self, **config: int) -> None:
        self.clock = ManualClock()
        self.store = MemoryLedgerStore(clock=self.clock)
        self.metadata = CountingMetadata(MemoryMetadataStore(clock=self.clock))
        self.timer = ManualTimer()
        self.config = ManagedLedgerConfig(**config)

    def factory(self, **config: int) -> LedgerFactory:
        cfg = ManagedLedgerConfig(**config) if config else self.config
        return LedgerFactory(self.store, self.metadata, config=cfg, clock=self.clock, sleep_ms=self.timer.sleep_ms)
