"""Lifecycle state machines: an Enum, a table of legal edges, one checked ``transition_to``.

Connections, producers and consumers each declare their states and edges next to their code and
hold a ``Lifecycle``; an illegal edge is a bug in the client and raises ``AssertionError``.
Knows nothing of what the states mean.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

__all__ = ["Lifecycle"]

S = TypeVar("S", bound=enum.Enum)


class Lifecycle(Generic[S]):
    def __init__(self, initial: S, edges: Mapping[S, frozenset[S]]) -> None:
        self._state = initial
        self._edges = edges

    @property
    def state(self) -> S:
        return self._state

    def can_go(self, new: S) -> bool:
        return new in self._edges.get(self._state, frozenset())

    def transition_to(self, new: S) -> None:
        if not self.can_go(new):
            raise AssertionError(f"illegal transition {self._state.name} -> {new.name}")
        self._state = new
