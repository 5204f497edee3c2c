"""Retention and message TTL over the loaded topics: policy resolution and the periodic task.

Owns (1) resolving a namespace's policies from its JSON at ``/admin/policies/<tenant>/<ns>`` with Pulsar's
field names (``retention_policies.retentionTimeInMinutes`` / ``retentionSizeInMB``,
``message_ttl_in_seconds``), falling back to the broker's defaults (``defaultRetentionTimeInMinutes``,
``defaultRetentionSizeInMB``, ``ttlDurationDefaultInSeconds``); (2) message expiry, as Pulsar's
``PersistentMessageExpiryMonitor``: each subscription's cursor is moved (cumulative ack) past the newest
entry published before ``now - ttl``; (3) one task that, every ``retentionCheckIntervalInSeconds``,
expires then trims every loaded topic (the trim itself, and which ledgers go, is the ledger layer's).

It reads entries' publish time through the protocol codec and knows nothing of sockets or dispatch. A
failure on one topic is logged and never stops the others or the task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from magnetar import protocol as proto
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.policies.store import TopicPolicyStore
from magnetar.broker.reserved import is_reserved_cursor
from magnetar.core.clock import Clock
from magnetar.core.periodic import PeriodicPass
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, Position, RetentionPolicy, TrimResult
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources, Policies

log = logging.getLogger("magnetar.broker.retention")

MINUTE_MS = 60_000
MIB = 1024 * 1024
#: Topics visited per pass, at most (far above what one broker loads).
TOPICS_PER_PASS_MAX = 100_000


class RetentionSettings(Protocol):
    """The broker settings retention and TTL fall back to (``BrokerConfig`` has them)."""

    @property
    def default_retention_time_minutes(self) -> int: ...

    @property
    def default_retention_size_mb(self) -> int: ...

    @property
    def ttl_duration_default_seconds(self) -> int: ...

    @property
    def retention_check_interval_seconds(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TopicPolicies:
    retention: RetentionPolicy
    ttl_seconds: int  # 0: messages never expire


def _int_or(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def resolve_policies(
    config: RetentionSettings, namespace_policies: Mapping[str, Any] | None,
    topic_policies: Mapping[str, Any] | None = None,
) -> TopicPolicies:
    """The topic's policies where it sets them, then the namespace's, then the broker's defaults."""
    ns, tp = namespace_policies or {}, topic_policies or {}
    time_min, size_mb = config.default_retention_time_minutes, config.default_retention_size_mb
    retention = tp.get("retentionPolicies") if isinstance(tp.get("retentionPolicies"), dict) else \
        ns.get("retention_policies")
    if isinstance(retention, dict):
        time_min = _int_or(retention.get("retentionTimeInMinutes"), time_min)
        size_mb = _int_or(retention.get("retentionSizeInMB"), size_mb)
    ttl = _int_or(ns.get("message_ttl_in_seconds"), config.ttl_duration_default_seconds)
    ttl = _int_or(tp.get("messageTTLInSeconds"), ttl)
    policy = RetentionPolicy(
        time_ms=time_min * MINUTE_MS if time_min >= 0 else -1,
        size_bytes=size_mb * MIB if size_mb >= 0 else -1,
    )
    return TopicPolicies(policy, max(ttl, 0))


async def namespace_policies(resources: MetadataResources, ns: NamespaceName) -> Policies:
    """The namespace's policies (empty, so broker defaults apply, when it has none or they are unreadable)."""
    return await resources.namespaces.policies(ns)


async def topic_policies(resources: MetadataResources, managed_ledger_name: str) -> dict[str, Any]:
    """A topic's own policies (written by the admin API), or {}."""
    return await TopicPolicyStore(resources).get(TopicName.from_managed_ledger_name(managed_ledger_name))


# ---- message expiry (TTL) --------------------------------------------------------------------------------------


async def _publish_time_ms(ledger: ManagedLedger, position: Position) -> int:
    entry = await ledger.read_entry(position)
    return int(proto.parse_entry_metadata(entry.data).publish_time)


async def expiry_position(ledger: ManagedLedger, cutoff_ms: int) -> Position | None:
    """The last entry published before ``cutoff_ms`` (publish times grow along the ledger), or None."""
    found: Position | None = None
    for summary in ledger.ledgers():  # oldest first; stop at the first ledger that is not wholly expired
        if summary.entries <= 0:
            continue
        last = Position(summary.ledger_id, summary.entries - 1)
        if await _publish_time_ms(ledger, last) < cutoff_ms:
            found = last
            continue
        low, high = 0, summary.entries - 1  # the first entry not expired is in here
        while low < high:  # binary search: at most log2(entries) reads
            middle = (low + high) // 2
            if await _publish_time_ms(ledger, Position(summary.ledger_id, middle)) < cutoff_ms:
                low = middle + 1
            else:
                high = middle
        if low > 0:
            found = Position(summary.ledger_id, low - 1)
        break
    return found


class ExpiringTopic(Protocol):
    """What expiry and trimming need of a topic (``PersistentTopic`` has it)."""

    @property
    def ledger(self) -> ManagedLedger: ...


async def expire_messages(topic: ExpiringTopic, ttl_seconds: int, now_ms: int) -> int:
    """Acknowledge, on every subscription, the messages older than the TTL. Returns the cursors moved."""
    ledger = topic.ledger
    position = await expiry_position(ledger, now_ms - ttl_seconds * 1000)
    if position is None:
        return 0
    moved = 0
    for name, cursor in sorted(ledger.cursors.items()):
        if is_reserved_cursor(name) or cursor.mark_delete_position >= position:
            continue  # a system cursor (dedup, replication, ...) follows its own logic, not the TTL
        cursor.acknowledge_cumulative(position)
        moved += 1
        log.info("%s: expired messages of subscription %s up to %s (TTL %d s)", ledger.name, name, position,
                 ttl_seconds)
    return moved


# ---- the periodic task -----------------------------------------------------------------------------------------


class RetentionTopics(Protocol):
    """What the task needs of the broker."""

    @property
    def config(self) -> RetentionSettings: ...

    @property
    def resources(self) -> MetadataResources: ...

    def loaded_topics(self) -> Sequence[tuple[NamespaceName, ExpiringTopic]]: ...


SleepS = Callable[[float], Awaitable[None]]


class RetentionService:
    """Every ``retention_check_interval_seconds``: expire by TTL, then trim, each loaded topic."""

    def __init__(self, broker: RetentionTopics, clock: Clock, *, sleep_s: SleepS = asyncio.sleep) -> None:
        self._broker = broker
        self._clock = clock
        self._periodic = PeriodicPass("retention", self.run_once, sleep_s)
        self.passes = 0
        self.trimmed_ledgers = 0
        self.expired_cursors = 0

    def start(self) -> None:
        self._periodic.start(self._broker.config.retention_check_interval_seconds)

    async def stop(self) -> None:
        await self._periodic.stop()

    async def run_once(self) -> list[TrimResult]:
        """One pass over the loaded topics; returns what each trim did."""
        results: list[TrimResult] = []
        cache: dict[NamespaceName, Policies] = {}
        for ns, topic in self._broker.loaded_topics()[:TOPICS_PER_PASS_MAX]:
            try:
                if ns not in cache:
                    cache[ns] = await namespace_policies(self._broker.resources, ns)
                own = await topic_policies(self._broker.resources, topic.ledger.name)
                results.append(await self._apply(topic, resolve_policies(self._broker.config, cache[ns], own)))
            except (ManagedLedgerError, md.MetadataError) as exc:
                log.warning("retention of %s skipped this pass: %s", topic.ledger.name, exc)
        self.passes += 1
        return results

    async def _apply(self, topic: ExpiringTopic, policies: TopicPolicies) -> TrimResult:
        if policies.ttl_seconds > 0:
            self.expired_cursors += await expire_messages(topic, policies.ttl_seconds, self._clock.now_ms())
        result = await topic.ledger.trim(policies.retention)
        self.trimmed_ledgers += len(result.trimmed)
        return result
