"""One asyncio event loop per Python process (driver planner or Spark worker), with cached clients.

Spark calls the data source from plain threads; every broker call is a coroutine submitted to this
process's loop thread and waited for with a bound. Clients are cached per (service URL, options), so
a reused Python worker keeps its connections and producers across tasks. A forked child (Spark's
daemon forks workers) notices the pid change and starts its own loop. Knows nothing of Spark.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from magnetar.client import Client

__all__ = ["client_for", "process_cache", "run"]

R = TypeVar("R")

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "loop": None, "clients": {}, "cache": {}}


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        if _state["pid"] != os.getpid() or _state["loop"] is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="magnetar-spark", daemon=True).start()
            _state.update(pid=os.getpid(), loop=loop, clients={}, cache={})
        result: asyncio.AbstractEventLoop = _state["loop"]
        return result


def run(coro: Coroutine[Any, Any, R], timeout_s: float | None = 600.0) -> R:
    """Run ``coro`` on this process's loop and wait for it (bounded unless ``timeout_s`` is None)."""
    future = asyncio.run_coroutine_threadsafe(coro, _loop())
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()
        raise


def client_for(service_url: str, options: tuple[tuple[str, int], ...] = ()) -> Client:
    """The process's client for this broker and options (created on first use, never closed early)."""
    _loop()
    key = (service_url, options)
    with _lock:
        clients: dict[tuple[str, tuple[tuple[str, int], ...]], Client] = _state["clients"]
        if key not in clients:
            clients[key] = Client(service_url, clock=None, **dict(options))
        return clients[key]


def process_cache() -> dict[Any, Any]:
    """A dict that lives as long as this process's loop (producers cached per worker); loop-thread use only."""
    _loop()
    cache: dict[Any, Any] = _state["cache"]
    return cache
