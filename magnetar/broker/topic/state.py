"""A topic's lifecycle: ACTIVE, FENCED, CLOSING, CLOSED, and why a topic closes.

- ACTIVE: serving producers and consumers.
- FENCED: a write failed; sends are refused until every accepted one has settled, then ACTIVE again.
- CLOSING: leaving this broker; new producers and subscriptions are refused, attached clients are closed
  after their accepted sends are answered. The :class:`CloseReason` says what a client should do:
  MOVING (unload, idle unload, shutdown, later ownership moving to another broker) means "look it up
  again"; DELETED means the topic and its data are going away.
- CLOSED: torn down (subscriptions, transactions, deduplication, ledger closed or deleted).

Only :mod:`magnetar.broker.registry` starts a close; the topic checks every transition against the table
(:mod:`magnetar.core.lifecycle`).
"""

from __future__ import annotations

import enum

from magnetar.broker.errors import ServiceNotReady
from magnetar.core.lifecycle import Transitions


class TopicState(enum.Enum):
    ACTIVE = "active"
    FENCED = "fenced"
    CLOSING = "closing"
    CLOSED = "closed"


class CloseReason(enum.Enum):
    MOVING = "moving"  # unloaded: clients look the topic up again and reconnect (here or elsewhere)
    DELETED = "deleted"  # deleted with its data


TOPIC_TRANSITIONS = Transitions(TopicState, {
    TopicState.ACTIVE: {TopicState.FENCED, TopicState.CLOSING},
    TopicState.FENCED: {TopicState.ACTIVE, TopicState.CLOSING},
    TopicState.CLOSING: {TopicState.CLOSED},
    TopicState.CLOSED: set(),
})


def closing_refusal(name: object, reason: CloseReason | None) -> ServiceNotReady:
    """What a new producer or subscription on a closing topic is told: retriable, look the topic up again."""
    if reason is CloseReason.DELETED:
        return ServiceNotReady(f"Topic {name} is being deleted")
    return ServiceNotReady(f"Topic {name} is being unloaded: look it up again")
