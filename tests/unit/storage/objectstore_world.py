"""Shared pieces of the object ledger store's unit tests: a bucket in memory, stores on it, a manual timer."""

from __future__ import annotations

import asyncio
import random

from magnetar.core.clock import ManualClock
from magnetar.core.faults import FaultPlan
from magnetar.storage.objectstore import ObjectLedgerSettings, ObjectLedgerStore
from magnetar.storage.objectstore.memory import OPS, MemoryBucket, MemoryObjectClient

WAIT_S = 5.0


class Timer:
    """``sleep_ms`` that returns only when the test fires it (back-offs and flush windows)."""

    def __init__(self) -> None:
        self.sleeping: list[tuple[float, asyncio.Future[None]]] = []
        self.slept_ms: list[float] = []

    async def sleep_ms(self, delay_ms: float) -> None:
        self.slept_ms.append(delay_ms)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sleeping.append((delay_ms, future))
        await future

    def fire(self) -> int:
        fired = 0
        for _, future in self.sleeping:
            if not future.done():
                future.set_result(None)
                fired += 1
        self.sleeping.clear()
        return fired


async def no_wait(delay_ms: float) -> None:
    await asyncio.sleep(0)


class World:
    def __init__(self, *, conditional_writes: bool = True, seed: int = 0) -> None:
        self.bucket = MemoryBucket(conditional_writes=conditional_writes)
        self.clock = ManualClock()
        self.rng = random.Random(seed)
        self.stores: list[ObjectLedgerStore] = []

    def client(self, plan: FaultPlan | None = None, latency_turns_max: int = 0) -> MemoryObjectClient:
        return MemoryObjectClient(self.bucket, plan=plan, rng=random.Random(self.rng.getrandbits(32)),
                                  latency_turns_max=latency_turns_max)

    def plan(self) -> FaultPlan:
        return FaultPlan(random.Random(self.rng.getrandbits(32)), ops=OPS)

    async def store(
        self, client: MemoryObjectClient | None = None, *, sleep_ms: object = no_wait, **settings: int
    ) -> ObjectLedgerStore:
        tuned = ObjectLedgerSettings(**{"flush_max_delay_ms": 0, **settings})
        store = await ObjectLedgerStore.open(
            client or self.client(), prefix="t/", settings=tuned,
            clock=self.clock, sleep_ms=sleep_ms,  # type: ignore[arg-type]
            token=self.rng.getrandbits(128).to_bytes(16, "big"),
        )
        self.stores.append(store)
        return store

    def chunk_keys(self, ledger_id: int) -> list[str]:
        prefix = f"t/ledgers/{ledger_id:020d}/"
        return sorted(k for k in self.bucket.objects if k.startswith(prefix))
