"""Lifecycles of a managed ledger and of a cursor: the states and the table of legal transitions.

Owns only the two enums and their edge tables, built on :mod:`magnetar.core.lifecycle`. It knows nothing of
storage or metadata; the classes that own a lifecycle move through ``TABLE.check(old, new, what)``.
"""

from __future__ import annotations

import enum

from magnetar.core import lifecycle
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


class IllegalTransition(ManagedLedgerError, lifecycle.IllegalTransition):
    """A lifecycle was asked to move along an edge its table does not have (a bug, not bad input)."""


_L = LedgerState
LEDGER_TRANSITIONS = lifecycle.Transitions(LedgerState, {
    _L.OPENING: {_L.OPEN, _L.FENCED, _L.CLOSED},
    _L.OPEN: {_L.FENCED, _L.CLOSING, _L.DELETING},
    _L.FENCED: {_L.CLOSING},
    _L.CLOSING: {_L.CLOSED},
    _L.CLOSED: set(),
    _L.DELETING: {_L.DELETED, _L.CLOSED},  # CLOSED: delete failed
    _L.DELETED: set(),
}, error=IllegalTransition)

_C = CursorState
CURSOR_TRANSITIONS = lifecycle.Transitions(CursorState, {
    _C.OPEN: {_C.FENCED, _C.CLOSED, _C.DELETED},
    _C.FENCED: {_C.CLOSED, _C.DELETED},
    _C.CLOSED: {_C.DELETED},
    _C.DELETED: set(),
}, error=IllegalTransition)
