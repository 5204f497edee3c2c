"""Connections per logical broker URL, opened on first use and replaced once closed.

Concurrent callers for the same URL share one connection attempt. Knows nothing of topics.
"""

from __future__ import annotations

import asyncio

from magnetar.client._config import ClientConfig
from magnetar.client._connection import Connection
from magnetar.client.errors import AlreadyClosed

__all__ = ["ConnectionPool"]


class ConnectionPool:
    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._connections: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    async def get(self, url: str) -> Connection:
        if self._closed:
            raise AlreadyClosed("client is closed")
        conn = self._connections.get(url)
        if conn is not None and conn.is_ready:
            return conn
        lock = self._locks.setdefault(url, asyncio.Lock())
        async with lock:
            conn = self._connections.get(url)
            if conn is not None and conn.is_ready:
                return conn
            conn = await Connection.open(url, self._config)
            if self._closed:
                await conn.close()
                raise AlreadyClosed("client is closed")
            self._connections[url] = conn
            return conn

    async def close(self) -> None:
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
