"""What the topic registry tells every feature about a topic's life: loaded, closing, deleted while unloaded.

A feature that keeps per-topic state (replicators, a compacted view, a replicated-subscriptions controller)
subclasses :class:`TopicListener` and is registered with the registry by the composition root; it never
hooks itself into the load or close paths. Callbacks run in registration order on load and in reverse
order on close, so a feature registered later may rely on one registered earlier.
"""

from __future__ import annotations

from magnetar.broker.names import TopicName
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason


class TopicListener:
    """Default callbacks do nothing; a feature overrides the ones it needs."""

    async def topic_loaded(self, topic: PersistentTopic) -> None:
        """The topic recovered and is about to serve: nothing was admitted yet. Raising fails the load
        (the topic is closed again, every listener told)."""

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        """The topic is closing (its clients are already closed): release what the feature holds on it.
        Called at most once per loaded topic, also for a load that failed; must not raise."""

    async def unloaded_topic_deleting(self, topic: TopicName, cursors: list[str]) -> None:
        """A topic that is not loaded is being deleted (its ledger goes next): delete the feature's own
        records of it. ``cursors`` are the managed ledger's cursor names."""
