"""The replicated-subscriptions service: one controller per loaded topic, the snapshot timer, the opt-in
(subscribe turns it on and persists the cursor property; only the admin turns it off), and the figures
for the metrics. Inert when ``enableReplicatedSubscriptions`` is false.

A topic listener: a topic gets its controller when it loads (its marker hooks plugged into the topic's
extensions) and loses it when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.replication.subscriptions.cache import PROPERTY
from magnetar.broker.replication.subscriptions.controller import TopicController, Totals
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason
from magnetar.core.clock import Clock

log = logging.getLogger("magnetar.broker.replicated_subscriptions")


class ReplicatedSubscriptions(TopicListener):
    def __init__(
        self,
        replication: ReplicationService,
        clock: Clock,
        *,
        enabled: bool = True,
        frequency_ms: int = 1000,
        timeout_s: float = 30.0,
        max_cached: int = 30,
    ) -> None:
        self._replication = replication
        self._controllers: dict[str, TopicController] = {}  # by topic name, while the topic is loaded
        self._clock = clock
        self.enabled = enabled
        self.frequency_ms = max(10, frequency_ms)
        self._timeout_s = timeout_s
        self._max_cached = max_cached
        self.totals = Totals()
        self._task: asyncio.Task[None] | None = None
        self._busy: set[TopicController] = set()  # what the timer ticks (most topics never replicate)

    def controller(self, topic: PersistentTopic) -> TopicController:
        key = str(topic.name)
        ctrl = self._controllers.get(key)
        if ctrl is None or ctrl.topic is not topic:
            ctrl = TopicController(
                topic, local_cluster=self._replication.local_cluster, publish=self._replication.publish_marker,
                clock=self._clock, totals=self.totals, timeout_s=self._timeout_s, max_cached=self._max_cached,
                on_busy=self._busy.add)
            self._controllers[key] = ctrl
            topic.extensions.set_marker_hooks(ctrl.marker_stored, ctrl.markers_ahead)
        return ctrl

    async def topic_loaded(self, topic: PersistentTopic) -> None:
        """Every topic answers other clusters' requests and updates; restored subscriptions keep their flag."""
        if not self.enabled:
            return
        ctrl = self.controller(topic)
        for sub in topic.subscriptions.values():
            if sub.durable and sub.cursor.properties.get(PROPERTY):
                ctrl.attach(sub)
        await ctrl.recover_markers()

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        key = str(topic.name)
        ctrl = self._controllers.get(key)
        if ctrl is None or ctrl.topic is not topic:
            return
        del self._controllers[key]
        self._busy.discard(ctrl)
        topic.extensions.set_marker_hooks(None, None)
        await ctrl.close()

    async def subscribed(self, topic: PersistentTopic, sub: Subscription, requested: bool) -> None:
        """SUBSCRIBE with ``replicate_subscription_state=true`` turns it on (never off)."""
        if not requested or sub.replicated or not sub.durable:
            return
        if not self.enabled:
            log.warning("%s: subscription %s asks for replicated state, but enableReplicatedSubscriptions is "
                        "false", topic.name, sub.name)
            return
        await sub.cursor.set_properties({PROPERTY: 1})
        self.controller(topic).attach(sub)

    async def set_status(self, topic: PersistentTopic, sub: Subscription, enabled: bool) -> None:
        """The admin's switch, both ways."""
        if not sub.durable:
            raise ValueError("only durable subscriptions can be replicated")
        await sub.cursor.set_properties({PROPERTY: 1 if enabled else 0})
        ctrl = self.controller(topic)
        if enabled:
            ctrl.attach(sub)
        else:
            ctrl.detach(sub)

    # ---- the snapshot timer --------------------------------------------------------------------------

    def start(self) -> None:
        if self.enabled and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="replicated subscriptions")

    async def _run(self) -> None:
        while True:  # ends when close() cancels it
            await asyncio.sleep(self.frequency_ms / 1000)
            for ctrl in list(self._busy):
                if not ctrl.topic.closed:
                    try:
                        ctrl.tick()
                    except Exception:
                        log.exception("%s: snapshot tick failed", ctrl.topic.name)
                if ctrl.topic.closed or ctrl.idle:
                    self._busy.discard(ctrl)

    def pending_snapshots(self) -> int:
        return sum(c.in_progress for c in self.controllers())

    def controllers(self) -> list[TopicController]:
        return list(self._controllers.values())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for ctrl in self.controllers():
            await ctrl.close()
