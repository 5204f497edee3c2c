"""The loop-lag watchdog: when the event loop stops turning, the stacks of every thread go to stderr.

A broker whose loop is blocked (a long scan or file call on it, a deadlock in a thread it waits on) answers
nothing and logs nothing, so the cause is lost. The watchdog is one task that, every ``interval_s``, re-arms
``faulthandler.dump_traceback_later(stall_s)``: as long as the loop turns, the dump never fires; once the
loop has not turned for ``stall_s``, the interpreter's own thread writes every thread's stack to the given
file (stderr by default), without needing the loop. Lifecycle: ``start`` once, ``stop`` at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import sys
from typing import TextIO

STALL_S_DEFAULT = 10.0


class LoopWatchdog:
    def __init__(self, stall_s: float = STALL_S_DEFAULT, *, out: TextIO | None = None) -> None:
        self.stall_s = stall_s
        self._out = out if out is not None else sys.stderr
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.stall_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop watchdog")

    async def _run(self) -> None:
        interval_s = self.stall_s / 4
        try:
            while True:  # lives as long as the loop does; cancelled by stop
                faulthandler.dump_traceback_later(self.stall_s, repeat=False, file=self._out, exit=False)
                await asyncio.sleep(interval_s)
        finally:
            faulthandler.cancel_dump_traceback_later()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
