"""The loop-lag watchdog writes every thread's stack once the loop stops turning."""

from __future__ import annotations

import asyncio
import tempfile
import time

from magnetar.core.watchdog import LoopWatchdog

STALL_S = 0.3


def blocks_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # what a blocking scan on the loop does


def test_a_stalled_loop_dumps_its_stack() -> None:
    with tempfile.TemporaryFile("w+") as out:
        async def main() -> None:
            dog = LoopWatchdog(STALL_S, out=out)
            dog.start()
            await asyncio.sleep(0)  # armed
            blocks_the_loop_for(STALL_S * 5)
            await dog.stop()

        asyncio.run(main())
        out.seek(0)
        dumped = out.read()
    assert "blocks_the_loop_for" in dumped and "Thread" in dumped, dumped
