"""Admission limits at the network edge: connection counts, the file-descriptor limit, log rate limits.

``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp`` (Pulsar's keys; 0 = no limit) cap the binary
protocol's connections in total and per remote address; a connection over a cap is closed at once,
before it costs more than its socket. The soft ``RLIMIT_NOFILE`` is raised to the hard limit at
startup, and running out of descriptors anyway (EMFILE) is logged loudly, once per interval, because it
otherwise shows up only as unrelated failures. ``RateLimitedLog`` keeps a peer that sends junk from
filling the log.
"""

from __future__ import annotations

import errno
import logging
import resource
import time
from collections import Counter

log = logging.getLogger("magnetar.server.limits")

EMFILE_LOG_INTERVAL_S = 10.0


class ConnectionLimiter:
    def __init__(self, total_max: int, per_address_max: int) -> None:
        self.total_max = total_max
        self.per_address_max = per_address_max
        self.total = 0
        self._by_address: Counter[str] = Counter()
        self._refusals = RateLimitedLog(log, interval_s=10.0)

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when over a cap."""
        if self.total_max > 0 and self.total >= self.total_max:
            self._refusals.warning("refusing connection from %s: brokerMaxConnections=%d reached",
                                   address, self.total_max)
            return False
        if self.per_address_max > 0 and self._by_address[address] >= self.per_address_max:
            self._refusals.warning("refusing connection from %s: brokerMaxConnectionsPerIp=%d reached",
                                   address, self.per_address_max)
            return False
        self.total += 1
        self._by_address[address] += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self._by_address[address] -= 1
        if self._by_address[address] <= 0:
            del self._by_address[address]


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


_emfile_log = RateLimitedLog(log, EMFILE_LOG_INTERVAL_S)


def report_if_out_of_descriptors(exc: BaseException | None) -> bool:
    """Log loudly if ``exc`` is EMFILE/ENFILE (out of file descriptors); True if it was."""
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        _emfile_log.warning(
            "OUT OF FILE DESCRIPTORS (%s): the process may hold %d (hard limit %d); new connections and "
            "ledger files fail until some close. Raise the limit (ulimit -n) or lower brokerMaxConnections",
            errno.errorcode.get(exc.errno, exc.errno), soft, hard)
        return True
    return False


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (capped for 'unlimited'); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the file-descriptor limit from %d to %d: %s", soft, target, exc)
            return soft
        log.info("raised the file-descriptor limit from %d to %d", soft, target)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
