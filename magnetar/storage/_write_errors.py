"""Write failures of the ledger store logged loudly once, not once per send.

A full disk (ENOSPC, or EFBIG past a file-size limit) or a failing device (EIO) fails every append until it
is fixed: at a thousand sends a second, one line per failure would bury the cause. The first failure is
logged as an error naming the cause and what it does to clients; later ones only count, with a reminder at
most every ``REPORT_INTERVAL_MS``; the first write that succeeds afterwards logs that writes are back, with
how many failed in between.
"""

from __future__ import annotations

import asyncio
import logging

from magnetar.core.clock import Clock

logger = logging.getLogger("magnetar.storage")

REPORT_INTERVAL_MS = 60_000


class WriteErrorLog:
    def __init__(self, clock: Clock, *, recovers_when: str = "the disk accepts writes again") -> None:
        self._clock = clock
        self._recovers_when = recovers_when
        self._reported_ms = 0.0
        self.failures = 0  # since writes last succeeded
        self.total_failures = 0

    @property
    def failing(self) -> bool:
        return self.failures > 0

    def failed(self, ledger_id: int | None, what: str, exc: BaseException) -> None:
        now = self._clock.monotonic_ms()
        self.failures += 1
        self.total_failures += 1
        if self.failures == 1 or now - self._reported_ms >= REPORT_INTERVAL_MS:
            self._reported_ms = now
            logger.error(
                "ledger %s: %s failed: %s (%d failures since writes last succeeded); sends fail with "
                "PersistenceError and are resent by clients until %s",
                ledger_id, what, exc, self.failures, self._recovers_when,
            )

    def succeeded(self) -> None:
        if self.failures:
            logger.warning("ledger store: writes succeed again after %d failed", self.failures)
            self.failures = 0

    def note_outcome(self, append: asyncio.Future[int]) -> None:
        """A done callback for an append made while writes were failing."""
        if not append.cancelled() and append.exception() is None:
            self.succeeded()
