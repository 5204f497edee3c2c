"""core.lifecycle: the one Enum + edge table + checked transition every state machine is built on."""

from __future__ import annotations

import enum

import pytest

from magnetar.core.lifecycle import IllegalTransition, Lifecycle, Transitions


class Door(enum.Enum):
    SHUT = "shut"
    OPEN = "open"
    GONE = "gone"


DOOR = Transitions(Door, {
    Door.SHUT: {Door.OPEN, Door.GONE},
    Door.OPEN: {Door.SHUT},
    Door.GONE: set(),
})


class Other(enum.Enum):
    X = 1


class DoorBug(IllegalTransition):
    pass


def test_a_table_answers_and_checks_edges() -> None:
    assert DOOR.allows(Door.SHUT, Door.OPEN) and not DOOR.allows(Door.OPEN, Door.GONE)
    assert DOOR.check(Door.OPEN, Door.SHUT, "door 1") is Door.SHUT
    with pytest.raises(IllegalTransition, match=r"^door 1: illegal transition GONE -> OPEN$"):
        DOOR.check(Door.GONE, Door.OPEN, "door 1")
    with pytest.raises(AssertionError, match=r"^illegal transition OPEN -> GONE$"):  # a bug, not bad input
        DOOR.check(Door.OPEN, Door.GONE)
    assert DOOR.terminal() == {Door.GONE}
    assert dict(DOOR) == {Door.SHUT: {Door.OPEN, Door.GONE}, Door.OPEN: {Door.SHUT}, Door.GONE: frozenset()}


def test_a_table_must_name_every_state_and_only_its_own() -> None:
    with pytest.raises(ValueError, match=r"leave out \[.GONE.\]"):
        Transitions(Door, {Door.SHUT: {Door.OPEN}, Door.OPEN: set()})
    with pytest.raises(ValueError, match="another enum"):
        Transitions(Door, {Door.SHUT: {Other.X}, Door.OPEN: set(), Door.GONE: set()})  # type: ignore[dict-item]


def test_a_layer_raises_its_own_subclass() -> None:
    table = Transitions(Door, dict(DOOR), error=DoorBug)
    with pytest.raises(DoorBug):
        table.check(Door.GONE, Door.SHUT)


def test_a_lifecycle_moves_only_along_edges() -> None:
    life = Lifecycle(Door.SHUT, DOOR, "door 2")
    life.transition_to(Door.OPEN)
    assert life.state is Door.OPEN and life.can_go(Door.SHUT) and not life.can_go(Door.GONE)
    with pytest.raises(IllegalTransition, match="door 2: illegal transition OPEN -> GONE"):
        life.transition_to(Door.GONE)
    assert life.state is Door.OPEN  # a refused move changes nothing
    with pytest.raises(ValueError):
        Lifecycle(Other.X, DOOR)  # type: ignore[arg-type]
