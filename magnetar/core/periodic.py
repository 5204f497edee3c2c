"""A broker-wide pass run every interval for the broker's life (retention, offload, backlog quotas, inactive
topics): one task, started once, stopped by cancelling it; a pass that fails is logged and the next one runs
(a bug must not end the service for the broker's life). The sleep is injectable for tests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("magnetar.broker")


async def asyncio_sleep_s(delay_s: float) -> None:
    await asyncio.sleep(delay_s)


class PeriodicPass:
    def __init__(
        self, name: str, run_once: Callable[[], Awaitable[object]],
        sleep_s: Callable[[float], Awaitable[None]] = asyncio_sleep_s,
    ) -> None:
        self._name = name
        self._run_once = run_once
        self._sleep_s = sleep_s
        self._task: asyncio.Task[None] | None = None

    def start(self, interval_s: float) -> None:
        """Run a pass every ``interval_s`` from now on (nothing when it is not positive; idempotent)."""
        if self._task is None and interval_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(interval_s), name=self._name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def _run(self, interval_s: float) -> None:
        while True:  # lives as long as the broker; one pass per interval
            await self._sleep_s(interval_s)
            try:
                await self._run_once()
            except Exception:
                log.exception("%s pass failed; the next one runs in %s s", self._name, interval_s)
