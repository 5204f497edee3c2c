"""The session of an embedded metadata store (memory, SQLite): one process, one session.

It never drops on its own; ``expire`` (tests, and the simulator) ends it the way a ZooKeeper session ends,
so code above the store sees the same :class:`~magnetar.metadata.coordination.SessionEvent` s on one broker
as on many. Also the ephemeral-key rules both embedded stores share with ZooKeeper. Knows nothing of how
records are stored, nor of storage, ledgers or the broker.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping

from magnetar.metadata.api import MetadataError
from magnetar.metadata.coordination import Ownership, SessionEvent, SessionListener

logger = logging.getLogger("magnetar.metadata")

LISTENERS_MAX = 1024


def new_session_id() -> int:
    return secrets.randbits(62) + 1


class LocalSession:
    def __init__(self) -> None:
        self.id = new_session_id()
        self._listeners: dict[int, SessionListener] = {}
        self._next = 0

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        if len(self._listeners) >= LISTENERS_MAX:
            raise MetadataError(f"more than {LISTENERS_MAX} session listeners")
        listener_id = self._next
        self._next += 1
        self._listeners[listener_id] = listener

        def unlisten() -> None:
            self._listeners.pop(listener_id, None)

        return unlisten

    def emit(self, event: SessionEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:
                logger.exception("session listener failed on %s", event.value)

    def renew(self) -> None:
        self.id = new_session_id()

    def ownership(self, owner: int | None) -> Ownership:
        if owner is None:
            return Ownership.PERSISTENT
        return Ownership.THIS_SESSION if owner == self.id else Ownership.OTHER_SESSION

    def clear(self) -> None:
        self._listeners.clear()


def parent_of(key: str) -> str:
    return key.rsplit("/", 1)[0] or "/"


def check_no_ephemeral_ancestor(key: str, ephemerals: Mapping[str, int]) -> None:
    """ZooKeeper's rule: an ephemeral key has no keys below it."""
    if not ephemerals:
        return
    ancestor = parent_of(key)
    for _ in range(key.count("/")):  # one step per level
        if ancestor in ephemerals:
            raise MetadataError(f"{key}: a parent is an ephemeral key, which cannot have children", key=key)
        if ancestor == "/":
            return
        ancestor = parent_of(ancestor)
