"""The policies at work: a topic's effective deduplication when it loads, the backlog-quota check a new
producer meets, and a task that every ``backlogQuotaCheckIntervalInSeconds`` closes the producers of topics
over a producer-blocking quota (they reconnect and meet the check, as Pulsar's quota monitor does)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from magnetar import protocol as proto
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from magnetar.broker.policies.quota import BacklogQuota, QuotaPolicy, backlog_bytes, quota_refusal
from magnetar.broker.policies.retention import namespace_policies
from magnetar.broker.policies.store import (
    DESTINATION_STORAGE,
    MESSAGE_AGE,
    DedupSettings,
    TopicPolicyStore,
    effective_dedup,
    effective_quotas,
)
from magnetar.core.clock import Clock
from magnetar.core.periodic import PeriodicPass
from magnetar.ledger.api import ManagedLedgerError, Position
from magnetar.resources import MetadataResources

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


class PolicySettings(DedupSettings, Protocol):
    """The broker settings the policies read (``BrokerConfig`` has them)."""

    @property
    def backlog_quota_check_interval_seconds(self) -> int: ...


class PolicyBroker(Protocol):
    @property
    def config(self) -> PolicySettings: ...

    @property
    def resources(self) -> MetadataResources: ...

    @property
    def clock(self) -> Clock: ...

    def quota_topics(self) -> Sequence[QuotaTopic]: ...


def topic_backlog_bytes(topic: QuotaTopic) -> int:
    """The slowest durable subscription's backlog, estimated in bytes."""
    ledger = topic.ledger
    entries = max((s.cursor.backlog_entries() for s in topic.subscriptions.values() if s.durable), default=0)
    return backlog_bytes(entries, ledger.number_of_entries(), ledger.total_size_bytes())


class PolicyService:
    def __init__(self, broker: PolicyBroker) -> None:
        self._broker = broker
        self.store = TopicPolicyStore(broker.resources)
        self._clock = broker.clock
        self._periodic = PeriodicPass("backlog quota", self.enforce_once)

    async def _both(self, topic: TopicName) -> tuple[Mapping[str, Any], dict[str, Any]]:
        return await namespace_policies(self._broker.resources, topic.namespace_name), await self.store.get(topic)

    async def dedup_enabled(self, topic: TopicName) -> bool:
        return effective_dedup(self._broker.config, *await self._both(topic))

    async def exceeded(self, topic: QuotaTopic) -> tuple[BacklogQuota, str] | None:
        """The first backlog quota the topic is over, and by how much; None when within every quota."""
        quotas = effective_quotas(*await self._both(topic.name))
        size = quotas.get(DESTINATION_STORAGE)
        if size is not None and size.limit_size >= 0:
            backlog = topic_backlog_bytes(topic)
            if backlog > size.limit_size:
                return size, f"{backlog} > {size.limit_size} bytes"
        age = quotas.get(MESSAGE_AGE)
        if age is not None and age.limit_time >= 0:
            oldest_ms = await oldest_unacked_publish_ms(topic)
            age_ms = self._clock.now_ms() - oldest_ms if oldest_ms is not None else 0
            if age_ms > age.limit_time * 1000:
                return age, f"oldest unacknowledged message {age_ms / 1000:.1f} s old > {age.limit_time} s"
        return None

    async def producer_refusal(self, topic: QuotaTopic) -> BrokerError | None:
        over = await self.exceeded(topic)
        return quota_refusal(over[0], str(topic.name), over[1]) if over is not None else None

    def start(self) -> None:
        self._periodic.start(self._broker.config.backlog_quota_check_interval_seconds)

    async def stop(self) -> None:
        await self._periodic.stop()

    async def enforce_once(self) -> int:
        """Over a quota: close the producers (producer_* policies) or move the subscriptions past the oldest
        entries (consumer_backlog_eviction). Returns the topics acted on."""
        affected = 0
        for topic in self._broker.quota_topics()[:TOPICS_PER_PASS_MAX]:
            over = await self.exceeded(topic)
            if over is None:
                continue
            quota = over[0]
            if quota.policy is QuotaPolicy.CONSUMER_BACKLOG_EVICTION:
                if quota.limit_size >= 0:  # size quotas evict; an age quota's eviction is not done here
                    affected += 1 if evict(topic, quota.limit_size) else 0
            elif getattr(topic, "producers", None):
                log.info("%s: backlog quota exceeded; closing its producers", topic.name)
                await topic.disconnect_clients(consumers=False)
                affected += 1
        return affected


async def oldest_unacked_publish_ms(topic: QuotaTopic) -> int | None:
    """The publish time of the oldest entry some durable subscription has not acknowledged."""
    ledger = topic.ledger
    marks = [s.cursor.mark_delete_position for s in topic.subscriptions.values()
             if s.durable and s.cursor.backlog_entries() > 0]
    if not marks:
        return None
    try:
        entry = await ledger.read_entry(ledger.next_valid_position(min(marks)))
    except ManagedLedgerError:
        return None
    return int(proto.parse_entry_metadata(entry.data).publish_time)


def _newest(ledger: Any, nth: int) -> Position | None:
    """The nth newest stored entry (from 1), over the ledgers' entry counts."""
    for summary in reversed([x for x in ledger.ledgers() if x.entries > 0]):
        if nth <= summary.entries:
            return Position(summary.ledger_id, summary.entries - nth)
        nth -= summary.entries
    return None


def evict(topic: QuotaTopic, limit_bytes: int) -> int:
    """consumer_backlog_eviction: acknowledge, on each durable subscription over the limit, everything but
    the newest entries that fit in it. Returns the subscriptions moved."""
    ledger = topic.ledger
    entries, size = ledger.number_of_entries(), ledger.total_size_bytes()
    if entries <= 0 or size <= 0:
        return 0
    keep = limit_bytes * entries // size
    moved = 0
    for sub in topic.subscriptions.values():
        if sub.durable and sub.cursor.backlog_entries() > keep:
            last_dropped = _newest(ledger, keep + 1)
            if last_dropped is not None:
                sub.cursor.acknowledge_cumulative(last_dropped)
                moved += 1
                log.info("%s: backlog quota evicted subscription %s up to %s", topic.name, sub.name, last_dropped)
    return moved


__all__ = ["PolicyService", "QuotaPolicy", "topic_backlog_bytes"]
