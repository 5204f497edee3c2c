"""Lifecycles as explicit state machines: an Enum, one table of legal edges, one checked transition.

Every lifecycle in magnetar (managed ledger, cursor, transaction, the client's connections, producers,
consumers and transactions, the broker's topics, producers, replicators and connections) is written the same
way, next to the code that owns it::

    class CursorState(enum.Enum):
        OPEN = "open"
        CLOSED = "closed"

    CURSOR_TRANSITIONS = Transitions(CursorState, {
        CursorState.OPEN: {CursorState.CLOSED},
        CursorState.CLOSED: set(),            # terminal: named, with no edges
    })

An owner then either keeps its state in a plain attribute and moves it only through
``self._state = TABLE.check(self._state, new, what)`` (cheap to read on a hot path), or holds a
:class:`Lifecycle` (state and table together, ``transition_to``).

The table names every state of its enum, terminal ones with an empty set, so a state added later cannot be
silently left without edges: :class:`Transitions` refuses an incomplete table when it is built (at import).
A move along an edge the table lacks is a bug in the caller, never bad input: it raises
:class:`IllegalTransition`, an ``AssertionError``. A layer with its own error root passes a subclass
(``error=``). When an illegal move *is* the peer's fault (a client ending a transaction twice the opposite
way), the owner asks :meth:`Transitions.allows` and raises its own protocol error.

Knows nothing of what the states mean; imports nothing from magnetar.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

__all__ = ["IllegalTransition", "Lifecycle", "Transitions"]

S = TypeVar("S", bound=enum.Enum)


class IllegalTransition(AssertionError):
    """A lifecycle was asked to move along an edge its table does not have (a bug, not bad input)."""


class Transitions(Mapping[S, frozenset[S]], Generic[S]):
    """The legal edges of one lifecycle: state -> the states it may move to. Immutable."""

    __slots__ = ("_edges", "_error", "states")

    def __init__(
        self, states: type[S], edges: Mapping[S, Iterable[S]], *,
        error: type[IllegalTransition] = IllegalTransition,
    ) -> None:
        foreign = [s for s in edges if not isinstance(s, states)]
        foreign += [t for targets in edges.values() for t in targets if not isinstance(t, states)]
        if foreign:
            raise ValueError(f"{states.__name__} transitions name states of another enum: {foreign}")
        missing = [s.name for s in states if s not in edges]
        if missing:
            raise ValueError(f"{states.__name__} transitions leave out {missing} (name a terminal state "
                             "with no edges)")
        self.states = states
        self._edges: dict[S, frozenset[S]] = {s: frozenset(edges[s]) for s in states}
        self._error = error

    def __getitem__(self, state: S) -> frozenset[S]:
        return self._edges[state]

    def __iter__(self) -> Iterator[S]:
        return iter(self._edges)

    def __len__(self) -> int:
        return len(self._edges)

    def allows(self, old: S, new: S) -> bool:
        return new in self._edges[old]

    def terminal(self) -> frozenset[S]:
        """The states no edge leaves."""
        return frozenset(s for s, targets in self._edges.items() if not targets)

    def check(self, old: S, new: S, what: str = "") -> S:
        """Return ``new`` if ``old -> new`` is an edge; raise the table's :class:`IllegalTransition` if not."""
        if new not in self._edges[old]:
            prefix = f"{what}: " if what else ""
            raise self._error(f"{prefix}illegal transition {old.name} -> {new.name}")
        return new


class Lifecycle(Generic[S]):
    """A state and its table: the one place a holder's state changes."""

    __slots__ = ("_state", "_table", "_what")

    def __init__(self, initial: S, table: Transitions[S], what: str = "") -> None:
        if not isinstance(initial, table.states):
            raise ValueError(f"initial state {initial!r} is not a {table.states.__name__}")
        self._state = initial
        self._table = table
        self._what = what

    @property
    def state(self) -> S:
        return self._state

    def can_go(self, new: S) -> bool:
        return self._table.allows(self._state, new)

    def transition_to(self, new: S) -> None:
        self._state = self._table.check(self._state, new, self._what)
