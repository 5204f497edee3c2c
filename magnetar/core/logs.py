"""Logging helpers shared by every layer.

``RateLimitedLog`` keeps what a peer (or a failing disk) can repeat from filling the log: at most one
line per interval, the next one saying how many were suppressed.
"""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    """At most one line per ``interval_s``; the next line says how many were suppressed."""

    def __init__(self, logger: logging.Logger, interval_s: float) -> None:
        self._log = logger
        self._interval_s = interval_s
        self._next_s = 0.0
        self._suppressed = 0

    def _allowed(self) -> bool:
        now = time.monotonic()
        if now < self._next_s:
            self._suppressed += 1
            return False
        self._next_s = now + self._interval_s
        return True

    def _emit(self, level: int, msg: str, args: tuple[object, ...]) -> None:
        if not self._allowed():
            return
        if self._suppressed:
            msg += " (%d similar lines suppressed)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._log.log(level, msg, *args)

    def info(self, msg: str, *args: object) -> None:
        self._emit(logging.INFO, msg, args)

    def warning(self, msg: str, *args: object) -> None:
        self._emit(logging.WARNING, msg, args)
