"""What producers and consumers share inside one client: config, pool, clock, id counters.

Kept apart from ``Client`` so producers and consumers depend on this small surface only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from magnetar.client._backoff import Backoff
from magnetar.client._config import ClientConfig
from magnetar.client._connection import Connection
from magnetar.client._lookup import lookup_broker
from magnetar.client._pool import ConnectionPool
from magnetar.client.errors import OperationTimeout, is_retriable
from magnetar.core.clock import Clock, SystemClock

__all__ = ["ClientContext"]

R = TypeVar("R")


@dataclass(eq=False)
class ClientContext:
    config: ClientConfig
    pool: ConnectionPool
    clock: Clock = field(default_factory=SystemClock)
    producer_ids: itertools.count[int] = field(default_factory=itertools.count)
    consumer_ids: itertools.count[int] = field(default_factory=itertools.count)

    async def connection_for(self, topic: str) -> Connection:
        url = await lookup_broker(
            self.pool, self.config.service_url, topic, max_redirects=self.config.max_lookup_redirects
        )
        return await self.pool.get(url)

    def backoff(self) -> Backoff:
        return Backoff(self.config.backoff_initial_ms, self.config.backoff_max_ms)

    async def retry(self, attempt: Callable[[], Awaitable[R]], what: str) -> R:
        """Run ``attempt`` until it succeeds, a fatal error, or the operation timeout."""
        deadline_ms = self.clock.monotonic_ms() + self.config.operation_timeout_ms
        backoff = self.backoff()
        while True:  # bounded by the deadline
            try:
                return await attempt()
            except Exception as exc:
                if not is_retriable(exc):
                    raise
                delay_ms = backoff.next_ms()
                if self.clock.monotonic_ms() + delay_ms > deadline_ms:
                    raise OperationTimeout(f"{what}: gave up after {self.config.operation_timeout_ms} ms") from exc
                await asyncio.sleep(delay_ms / 1000)
