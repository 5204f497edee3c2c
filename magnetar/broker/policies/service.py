"""The policies at work: a topic's effective deduplication when it loads, the backlog-quota check a new
producer meets, and a task that every ``backlogQuotaCheckIntervalInSeconds`` closes the producers of topics
over a producer-blocking quota (they reconnect and meet the check, as Pulsar's quota monitor does)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from magnetar.broker.policies.quota import QuotaPolicy, backlog_bytes, quota_refusal
from magnetar.broker.policies.store import TopicPolicyStore, effective_dedup, effective_quota
from magnetar.broker.retention import namespace_policies
from magnetar.metadata import api as md

log = logging.getLogger("magnetar.broker.policies")
TOPICS_PER_PASS_MAX = 100_000


class QuotaTopic(Protocol):
    """What the quota check reads of a loaded topic (``PersistentTopic`` has it)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> Any: ...

    @property
    def subscriptions(self) -> dict[str, Any]: ...

    async def disconnect_clients(self, *, consumers: bool) -> None: ...


class PolicyBroker(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> md.MetadataStore: ...

    def quota_topics(self) -> list[QuotaTopic]: ...


def topic_backlog_bytes(topic: QuotaTopic) -> int:
    """The slowest durable subscription's backlog, estimated in bytes."""
    ledger = topic.ledger
    entries = max((s.cursor.backlog_entries() for s in topic.subscriptions.values() if s.durable), default=0)
    return backlog_bytes(entries, ledger.number_of_entries(), ledger.total_size_bytes())


class PolicyService:
    def __init__(self, broker: PolicyBroker) -> None:
        self._broker = broker
        self.store = TopicPolicyStore(broker.metadata)
        self._task: asyncio.Task[None] | None = None

    async def _both(self, topic: TopicName) -> tuple[dict[str, Any], dict[str, Any]]:
        return await namespace_policies(self._broker.metadata, topic.namespace_name), await self.store.get(topic)

    async def dedup_enabled(self, topic: TopicName) -> bool:
        return effective_dedup(self._broker.config, *await self._both(topic))

    async def producer_refusal(self, topic: QuotaTopic) -> BrokerError | None:
        quota = effective_quota(*await self._both(topic.name))
        return quota_refusal(quota, topic_backlog_bytes(topic), str(topic.name)) if quota is not None else None

    def start(self) -> None:
        interval_s = self._broker.config.backlog_quota_check_interval_seconds
        if self._task is None and interval_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(interval_s), name="magnetar-quotas")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def _run(self, interval_s: float) -> None:
        while True:  # lives as long as the broker
            await asyncio.sleep(interval_s)
            try:
                await self.enforce_once()
            except Exception:
                log.exception("backlog quota pass failed")

    async def enforce_once(self) -> int:
        """Close the producers of topics over a producer-blocking quota; returns the topics affected."""
        affected = 0
        for topic in self._broker.quota_topics()[:TOPICS_PER_PASS_MAX]:
            refusal = await self.producer_refusal(topic)
            if refusal is not None and getattr(topic, "producers", None):
                log.info("%s: %s; closing its producers", topic.name, refusal)
                await topic.disconnect_clients(consumers=False)
                affected += 1
        return affected


__all__ = ["PolicyService", "QuotaPolicy", "topic_backlog_bytes"]
