"""Lifecycles of a managed ledger and of a cursor: the states and the table of legal transitions.

Owns only the two enums, their edge tables and the one check every ``_transition_to`` goes through. It knows
nothing of storage or metadata; the classes that own a lifecycle call :func:`check_transition`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from magnetar.ledger.api import ManagedLedgerError


class LedgerState(enum.Enum):
    OPENING = "opening"  # recovering: sealing the previous writer's ledger, claiming the metadata
    OPEN = "open"  # accepting adds
    FENCED = "fenced"  # another writer took the ledger list; reads still work, writes do not
    CLOSING = "closing"
    CLOSED = "closed"
    DELETING = "deleting"
    DELETED = "deleted"


class CursorState(enum.Enum):
    OPEN = "open"
    FENCED = "fenced"  # the cursor's metadata was written by someone else
    CLOSED = "closed"
    DELETED = "deleted"


LEDGER_TRANSITIONS: Mapping[LedgerState, frozenset[LedgerState]] = {
    LedgerState.OPENING: frozenset({LedgerState.OPEN, LedgerState.FENCED, LedgerState.CLOSED}),
    LedgerState.OPEN: frozenset({LedgerState.FENCED, LedgerState.CLOSING, LedgerState.DELETING}),
    LedgerState.FENCED: frozenset({LedgerState.CLOSING}),
    LedgerState.CLOSING: frozenset({LedgerState.CLOSED}),
    LedgerState.CLOSED: frozenset(),
    LedgerState.DELETING: frozenset({LedgerState.DELETED, LedgerState.CLOSED}),  # CLOSED: delete failed
    LedgerState.DELETED: frozenset(),
}

CURSOR_TRANSITIONS: Mapping[CursorState, frozenset[CursorState]] = {
    CursorState.OPEN: frozenset({CursorState.FENCED, CursorState.CLOSED, CursorState.DELETED}),
    CursorState.FENCED: frozenset({CursorState.CLOSED, CursorState.DELETED}),
    CursorState.CLOSED: frozenset({CursorState.DELETED}),
    CursorState.DELETED: frozenset(),
}


class IllegalTransition(ManagedLedgerError):
    """A lifecycle was asked to move along an edge its table does not have (a bug, not bad input)."""


S = TypeVar("S", bound=enum.Enum)


def check_transition(table: Mapping[S, frozenset[S]], old: S, new: S, what: str) -> S:
    """Return ``new`` if ``old -> new`` is a legal edge of ``table``; raise otherwise."""
    if new not in table[old]:
        raise IllegalTransition(f"{what}: illegal transition {old.value} -> {new.value}")
    return new
