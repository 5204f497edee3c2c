"""The binary protocol's listening sockets and their connections.

:class:`BinaryListener` binds plain and TLS ports, admits each accepted socket within
``brokerMaxConnections`` / ``brokerMaxConnectionsPerIp`` (``limits.py``), serves it as one
:class:`~magnetar.server.binary.connection.ServerConnection` task over the dispatch table, counts it for the
metrics, and on ``stop`` stops accepting, closes every connection (their producers and consumers detached)
and cancels what is left. The process that owns it (``magnetar.app``) decides the ports and reports a
failure to bind (``OSError``) with the setting to change.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from magnetar.broker.parts import Broker
from magnetar.core.clock import Clock
from magnetar.server.auth import SecurityContext
from magnetar.server.binary.connection import ServerConnection
from magnetar.server.binary.handlers.table import dispatch_table
from magnetar.server.binary.limits import ConnectionLimiter

log = logging.getLogger("magnetar.standalone")

READ_BUFFER_BYTES = 1024 * 1024


class BinaryListener:
    def __init__(self, broker: Broker, clock: Clock, security: SecurityContext) -> None:
        self._broker = broker
        self._clock = clock
        self._security = security
        self._handlers = dispatch_table()
        config = broker.config
        self._limiter = ConnectionLimiter(config.broker_max_connections, config.broker_max_connections_per_ip)
        self.connections: set[ServerConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.servers: list[asyncio.Server] = []

    async def listen(self, address: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Accept connections on ``address:port`` (0: any free port); returns the bound port."""
        server = await asyncio.start_server(self._accept, address, port, limit=READ_BUFFER_BYTES, ssl=tls)
        self.servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if not self._limiter.admit(address):
            self._broker.connections.refused += 1
            writer.close()
            return
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # stop() cancels connection tasks; asyncio's stream callback would log it as an error
        finally:
            self._limiter.release(address)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection(reader, writer, self._broker, self._handlers, self._clock, self._security)
        self.connections.add(conn)
        self._broker.connections.created += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.run()
        finally:
            self._broker.connections.closed += 1
            self.connections.discard(conn)
            if task is not None:
                self._tasks.discard(task)

    async def stop(self) -> None:
        """Stop accepting, then close every connection and cancel what remains of their tasks."""
        log.info("stopping: closing %d connections", len(self.connections))
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            await conn.close()
        for task in list(self._tasks):
            task.cancel()
