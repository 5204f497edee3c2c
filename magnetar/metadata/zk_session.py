"""One ZooKeeper session for asyncio: a kazoo client whose calls are awaitables and whose state changes
arrive on the event loop as session events.

kazoo runs its own threads (one for the connection, one each for completions and watch callbacks). Nothing
here blocks the event loop: a call is kazoo's ``*_async`` method whose result is handed to the loop with
``call_soon_threadsafe``; state changes and watch events travel the same way, so every callback of this
layer runs on the loop. Why kazoo: it is the maintained, widely deployed Python client (OpenStack, Zuul); its
threading handler needs no monkey-patching; it reconnects by itself and re-creates an expired session.

The connection is a state machine (``_TRANSITIONS``)::

    CONNECTING -> CONNECTED <-> SUSPENDED -> EXPIRED -> CONNECTED (a new session)   any -> CLOSED

and each edge is a :class:`~magnetar.metadata.coordination.SessionEvent` for listeners: CONNECTED -> SUSPENDED
is CONNECTION_LOST; back to CONNECTED on the same session is RECONNECTED; a session the server expired, or
one this side has been cut off from for longer than its timeout (the server has expired it by then, or will:
Pulsar's ``ZKSessionWatcher`` judges the same way), is SESSION_LOST; the first connection after that is
SESSION_REESTABLISHED. kazoo drops every watch on any disconnection: the watch layer re-reads on RECONNECTED
and SESSION_REESTABLISHED.

Errors are translated to :class:`~magnetar.metadata.api.MetadataError` here and nowhere else. This module
knows nothing of the key layout, records or the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.retry import KazooRetry

from magnetar.core.lifecycle import Transitions
from magnetar.metadata.api import MetadataError, MetadataStoreClosed
from magnetar.metadata.coordination import SessionEvent, SessionListener

logger = logging.getLogger("magnetar.metadata.zookeeper")

LISTENERS_MAX = 1024


class _State(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    CLOSED = "closed"


# kazoo reports what its connection does; an edge missing here (SUSPENDED twice, a late CONNECTED after
# close) is kazoo repeating itself, so it is ignored (``allows``), not raised.
_TRANSITIONS = Transitions(_State, {
    _State.CONNECTING: {_State.CONNECTED, _State.CLOSED},
    _State.CONNECTED: {_State.SUSPENDED, _State.EXPIRED, _State.CONNECTED, _State.CLOSED},
    _State.SUSPENDED: {_State.CONNECTED, _State.EXPIRED, _State.CLOSED},
    _State.EXPIRED: {_State.CONNECTED, _State.CLOSED},
    _State.CLOSED: set(),
})

# Outcomes a caller may retry: the request did not reach the server, or its answer did not come back.
RETRYABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)
# Answers the store decides on; any other kazoo error becomes a MetadataError here.
_DECIDED = (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError, NoChildrenForEphemeralsError, *RETRYABLE)


class Uncertain(MetadataError):
    """The connection dropped with the request in flight: it may or may not have been applied."""


class ZkSession:
    """A kazoo client bridged to one asyncio loop. ``hosts``: ``host:port[,host:port...]`` (no chroot)."""

    def __init__(self, hosts: str, *, session_timeout_ms: int, operation_timeout_s: float) -> None:
        if session_timeout_ms <= 0 or operation_timeout_s <= 0:
            raise ValueError("session and operation timeouts must be positive")
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.operation_timeout_s = operation_timeout_s
        self._client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            handler=SequentialThreadingHandler(),
            # kazoo keeps reconnecting by itself (and opens a new session once the old one expired).
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, max_jitter=0.2),
            command_retry=None,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.CONNECTING
        self._session_id: int | None = None
        self._lost = False  # SESSION_LOST was told and no session has been established since
        self._lost_timer: asyncio.TimerHandle | None = None
        self._connected = asyncio.Event()
        self._listeners: dict[int, SessionListener] = {}
        self._next_listener = 0

    @property
    def client(self) -> KazooClient:
        return self._client

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop every callback of this session runs on (the one ``start`` ran on)."""
        if self._loop is None:
            raise MetadataError("the ZooKeeper session is not started")
        return self._loop

    @property
    def connected(self) -> bool:
        return self._state is _State.CONNECTED

    @property
    def session_id(self) -> int | None:
        """The current session's id (``None`` before the first connection)."""
        return self._session_id

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    async def start(self) -> None:
        """Connect; MetadataError when no server answers within the operation timeout."""
        self._loop = asyncio.get_running_loop()
        self._client.add_listener(self._on_kazoo_state)
        self._client.start_async()
        try:
            await asyncio.wait_for(self._connected.wait(), self.operation_timeout_s)
        except TimeoutError:
            await self.close()
            raise MetadataError(
                f"cannot connect to ZooKeeper at {self.hosts} within {self.operation_timeout_s} s"
            ) from None

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        """Call ``listener`` (on the loop) for every session event. Returns an unlisten function."""
        if len(self._listeners) >= LISTENERS_MAX:
            raise MetadataError(f"more than {LISTENERS_MAX} session listeners")
        listener_id = self._next_listener
        self._next_listener += 1
        self._listeners[listener_id] = listener

        def unlisten() -> None:
            self._listeners.pop(listener_id, None)

        return unlisten

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run kazoo's ``<method>_async(*args)`` and await its result. The answers the store decides on (no
        node, node exists, bad version, not empty, connection loss...) pass through as kazoo's exceptions; a
        call on a closed session is MetadataStoreClosed; any other failure, or one that outlives the operation
        timeout, is MetadataError."""
        if self._state is _State.CLOSED or self._loop is None:
            raise MetadataStoreClosed("metadata store is closed")
        loop = self._loop
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:  # on a kazoo thread
            try:
                value = result.get_nowait()
            except BaseException as exc:
                self._threadsafe(_set_exception, future, exc)
            else:
                self._threadsafe(_set_result, future, value)

        try:
            getattr(self._client, f"{method}_async")(*args, **kwargs).rawlink(settle)
        except ConnectionClosedError as exc:
            raise MetadataStoreClosed("metadata store is closed") from exc
        try:
            return await asyncio.wait_for(future, self.operation_timeout_s)
        except TimeoutError:
            raise MetadataError(
                f"ZooKeeper {method} took longer than {self.operation_timeout_s} s (outcome unknown)"
            ) from None
        except ConnectionClosedError as exc:
            raise MetadataStoreClosed("metadata store is closed") from exc
        except _DECIDED:
            raise
        except KazooException as exc:
            raise MetadataError(f"ZooKeeper {method} failed: {type(exc).__name__}: {exc}") from exc

    async def wait_connected(self, timeout_s: float) -> bool:
        """Wait (bounded) until the session is connected; False on timeout or when closed."""
        if self._state is _State.CLOSED:
            return False
        try:
            await asyncio.wait_for(self._connected.wait(), timeout_s)
        except TimeoutError:
            return False
        return self._state is _State.CONNECTED

    def _threadsafe(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting any more
            loop.call_soon_threadsafe(fn, *args)

    def _on_kazoo_state(self, state: str) -> None:  # on kazoo's connection thread: never block here
        session = self._client.client_id
        self._threadsafe(self._on_state, state, None if session is None else int(session[0]))

    def _on_state(self, state: str, session_id: int | None) -> None:
        if self._state is _State.CLOSED:
            return
        if state == KazooState.CONNECTED:
            self._on_connected(session_id)
        elif state == KazooState.SUSPENDED:
            if self._transition_to(_State.SUSPENDED):
                self._connected.clear()
                self._arm_lost_timer()
                self._emit(SessionEvent.CONNECTION_LOST)
        elif state == KazooState.LOST and self._transition_to(_State.EXPIRED):
            self._connected.clear()
            self._session_lost("ZooKeeper expired the session")

    def _on_connected(self, session_id: int | None) -> None:
        previous, old_session = self._state, self._session_id
        if not self._transition_to(_State.CONNECTED):
            return
        self._cancel_lost_timer()
        self._session_id = session_id
        self._connected.set()
        if previous is _State.CONNECTING:
            return
        if self._lost or session_id != old_session:
            self._lost = False
            logger.warning("ZooKeeper session re-established (%s)", _hex(session_id))
            self._emit(SessionEvent.SESSION_REESTABLISHED)
        else:
            self._emit(SessionEvent.RECONNECTED)

    def _arm_lost_timer(self) -> None:
        self._cancel_lost_timer()
        if self._loop is not None:
            self._lost_timer = self._loop.call_later(
                self.session_timeout_ms / 1000, self._session_lost, "cut off for longer than the session timeout"
            )

    def _cancel_lost_timer(self) -> None:
        timer, self._lost_timer = self._lost_timer, None
        if timer is not None:
            timer.cancel()

    def _session_lost(self, why: str) -> None:
        self._cancel_lost_timer()
        if self._lost or self._state is _State.CLOSED:
            return
        self._lost = True
        logger.warning("ZooKeeper session %s lost: %s", _hex(self._session_id), why)
        self._emit(SessionEvent.SESSION_LOST)

    def _transition_to(self, new: _State) -> bool:
        """Move to ``new``; False (and nothing changes) when already there or when the edge is not legal."""
        if new is self._state and new is not _State.CONNECTED:
            return False
        if not _TRANSITIONS.allows(self._state, new):
            logger.debug("ZooKeeper session: ignored %s -> %s", self._state.value, new.value)
            return False
        self._state = new
        return True

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:
                logger.exception("session listener failed on %s", event.value)

    async def close(self) -> None:
        """Close the session (its ephemeral nodes go at once). Idempotent."""
        if self._state is _State.CLOSED:
            return
        self._state = _TRANSITIONS.check(self._state, _State.CLOSED, "ZooKeeper session")
        self._cancel_lost_timer()
        self._connected.set()  # wake waiters; they see CLOSED
        self._listeners.clear()
        client = self._client
        try:
            # stop() and close() join kazoo's threads: off the loop.
            await asyncio.to_thread(_stop_client, client)
        except KazooException:
            logger.exception("closing the ZooKeeper client failed")


def _stop_client(client: KazooClient) -> None:
    client.stop()
    client.close()


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _hex(session_id: int | None) -> str:
    return "none" if session_id is None else f"0x{session_id & 0xFFFFFFFFFFFFFFFF:x}"
