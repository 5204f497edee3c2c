"""Bounds on the HTTP port: connections that never finish a request are closed, and their count is capped.

aiohttp keeps a connection that sent half a request (or nothing) for as long as the peer likes. The
reaper looks at the server's connections every ``SWEEP_FRACTION`` of the timeout: a connection with no
request being handled for ``httpRequestTimeoutSeconds`` (half-sent headers, or idle between requests)
is closed; above ``maxHttpServerConnections`` (Pulsar's key) the connections idle the longest are closed
first. A body that trickles in is bounded separately where it is read (``routes.json_body``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import web

from magnetar.core.logs import RateLimitedLog

log = logging.getLogger("magnetar.server.http")

SWEEP_FRACTION = 0.25


class HttpConnectionReaper:
    def __init__(self, server: web.Server, *, request_timeout_s: float, connections_max: int) -> None:
        self._server = server
        self._timeout_s = request_timeout_s
        self._connections_max = connections_max
        self._idle_since: dict[int, float] = {}  # id(handler) -> when it was last seen handling a request
        self._task: asyncio.Task[None] | None = None
        self._log = RateLimitedLog(log, interval_s=10.0)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="http-reaper")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(self._timeout_s * SWEEP_FRACTION, 0.05))
            self.sweep(time.monotonic())

    def sweep(self, now: float) -> int:
        """Close expired and surplus connections; returns how many were closed."""
        handlers = list(self._server.connections)
        live = {id(h) for h in handlers}
        self._idle_since = {k: v for k, v in self._idle_since.items() if k in live}
        idle: list[tuple[float, web.RequestHandler]] = []
        for handler in handlers:
            if getattr(handler, "_request_in_progress", False):
                self._idle_since[id(handler)] = now
                continue
            idle.append((self._idle_since.setdefault(id(handler), now), handler))
        idle.sort(key=lambda pair: pair[0])
        surplus = max(0, len(handlers) - self._connections_max) if self._connections_max > 0 else 0
        closed = 0
        for since, handler in idle:
            if closed < surplus or now - since >= self._timeout_s:
                self._close(handler, "too many connections" if closed < surplus else "no complete request in time")
                closed += 1
        return closed

    def _close(self, handler: web.RequestHandler, why: str) -> None:
        transport = handler.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        self._log.info("closing HTTP connection from %s: %s", peer, why)
        handler.force_close()
        if transport is not None:
            transport.close()
        self._idle_since.pop(id(handler), None)


class _BadRequestLogFilter(logging.Filter):
    """aiohttp logs every malformed request with a traceback; keep one short line per interval."""

    def __init__(self, interval_s: float) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._next_s = 0.0
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now < self._next_s:
            self._suppressed += 1
            return False
        self._next_s = now + self._interval_s
        if record.exc_info and record.exc_info[1] is not None:
            summary = str(record.exc_info[1]).splitlines()[0] if str(record.exc_info[1]) else ""
            record.msg = f"{record.getMessage()}: {type(record.exc_info[1]).__name__} {summary}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        if self._suppressed:
            record.msg = f"{record.getMessage()} ({self._suppressed} similar lines suppressed)"
            record.args = ()
            self._suppressed = 0
        return True


def limit_bad_request_logging(interval_s: float = 10.0) -> None:
    """Install (once) the rate limit on aiohttp's per-request error log."""
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _BadRequestLogFilter) for f in server_log.filters):
        server_log.addFilter(_BadRequestLogFilter(interval_s))
