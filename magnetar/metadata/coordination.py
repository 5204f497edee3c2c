"""Coordination on the metadata store: sessions, ephemeral and sequential keys (Pulsar's
``MetadataStoreExtended``), resource locks (``LockManager``/``ResourceLock``) and leader election.

A :class:`CoordinationStore` is a metadata store with a *session*: keys created ``ephemeral`` belong to it and
vanish when it ends; listeners hear its :class:`SessionEvent`\\ s. ZooKeeper's session is the server's; the
embedded stores (memory, SQLite) serve one process, whose session is the process itself (a test can end it
with ``expire_session``), so locks and elections work the same on one broker and on many.

Safety never rests on "I hold the lock": a lock or a leadership can be lost at any moment without this side
knowing yet (a pause, a partition). What this module promises is Pulsar's: a holder is told when it finds
out (``on_lost``), and it re-validates its locks whenever its session could have changed hands (see
``locks.py``). Data written under a lock stays fenced by compare-and-set in the store.

This module defines the types; ``locks.py`` and ``election.py`` build on them. It knows nothing of storage,
ledgers or the broker.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from magnetar.metadata.api import MetadataError, MetadataStore, Record

#: A sequential key ends in a zero-padded counter of this many digits (ZooKeeper's format).
SEQUENCE_DIGITS = 10


class SessionEvent(enum.Enum):
    """What happened to the store's session (Pulsar's ``SessionEvent``)."""

    CONNECTION_LOST = "connection-lost"  # ephemerals still stand; the session may come back
    RECONNECTED = "reconnected"  # the same session: its ephemerals and locks are still its own
    SESSION_LOST = "session-lost"  # every ephemeral key of the session may be gone
    SESSION_REESTABLISHED = "session-reestablished"  # a new session: revalidate locks, re-read watches


SessionListener = Callable[[SessionEvent], None]


class Ownership(enum.Enum):
    """Who a stored key belongs to."""

    PERSISTENT = "persistent"  # not ephemeral: nobody's session
    THIS_SESSION = "this-session"  # ephemeral, created by this store's current session
    OTHER_SESSION = "other-session"  # ephemeral, of another session (another broker, or an earlier one of ours)


class LockBusy(MetadataError):
    """Another session holds the lock (or the key is taken by a persistent record)."""


class CoordinationStore(MetadataStore, Protocol):
    """A metadata store with a session (Pulsar's ``MetadataStoreExtended``)."""

    async def create(self, key: str, value: bytes, *, ephemeral: bool = False, sequential: bool = False) -> Record:
        """Create ``key`` (BadVersion when it exists). ``ephemeral``: the key goes with this session, and no
        key may be created below it. ``sequential``: the store appends a counter of ``SEQUENCE_DIGITS``
        digits, increasing per parent, to ``key``; the returned record carries the key it made."""
        ...

    async def get_owned(self, key: str) -> tuple[Record, Ownership] | None:
        """The record at ``key`` and whose it is, or None."""
        ...

    def listen(self, listener: SessionListener) -> Callable[[], None]:
        """Call ``listener`` for every session event. Returns an unlisten function."""
        ...


def sequential_key(prefix: str, counter: int) -> str:
    return f"{prefix}{counter:0{SEQUENCE_DIGITS}d}"
