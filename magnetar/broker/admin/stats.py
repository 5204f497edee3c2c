"""Topic statistics as Pulsar shows them: TopicStats, PersistentTopicInternalStats, partitioned stats.

The JSON keys are Pulsar's (``TopicStatsImpl``, ``SubscriptionStatsImpl``, ``ConsumerStatsImpl``,
``PublisherStatsImpl``, ``PersistentTopicInternalStats``), because pulsar-admin, dashboards and scripts read
them by name. Rates come from :class:`RateTracker`, which samples the counters when asked. Builders read
the broker's objects and never change them; this module knows no HTTP.
"""

from __future__ import annotations

import datetime
import uuid
from collections import deque
from typing import Any

from magnetar.broker.compaction import compacted_of, stats_json
from magnetar.broker.compaction.service import compacted_ledger_json
from magnetar.broker.compaction.view import CompactionRecord
from magnetar.broker.offload.stats import offload_stats
from magnetar.broker.policies.quota import backlog_bytes
from magnetar.broker.replication.stats import replication_stats, sum_replication
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.producer import Producer
from magnetar.broker.transactions.listener import transactions_of
from magnetar.broker.transactions.txn_stats import topic_counts
from magnetar.core.clock import Clock
from magnetar.ledger.api import LedgerSummary, ManagedLedger, OffloadReadHealth, Position

RATE_WINDOW_MS = 10_000  # a rate covers the last 10 s, whoever asks and however often
RATE_SAMPLE_MS = 1_000  # one remembered sample per key per second, at most
RATE_SAMPLES_MAX = RATE_WINDOW_MS // RATE_SAMPLE_MS + 2
RATE_KEYS_MAX = 100_000
RATE_KEY_IDLE_MS = 10 * 60 * 1000


class RateTracker:
    """Per-second rates of monotonically growing counters over a fixed window: the counter's growth since the
    newest sample at least ``RATE_WINDOW_MS`` old (or the oldest kept), so readers never reset each other's
    measurement. Samples are taken when a rate is read, at most one per key per ``RATE_SAMPLE_MS``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._samples: dict[str, deque[tuple[int, float]]] = {}

    def rate(self, key: str, counter: float) -> float:
        now = self.clock.now_ms()
        samples = self._samples.get(key)
        if samples is None:
            if len(self._samples) >= RATE_KEYS_MAX:
                self._forget_idle(now)
            self._samples[key] = deque([(now, counter)], maxlen=RATE_SAMPLES_MAX)
            return 0.0
        if counter < samples[-1][1]:  # the counter restarted (topic reloaded): measure afresh
            samples.clear()
        if not samples or now - samples[-1][0] >= RATE_SAMPLE_MS:
            samples.append((now, counter))
        while len(samples) > 1 and now - samples[1][0] >= RATE_WINDOW_MS:
            samples.popleft()  # keep exactly one sample older than the window: the baseline
        at_ms, value = samples[0]
        return max(counter - value, 0.0) * 1000.0 / (now - at_ms) if now > at_ms else 0.0

    def _forget_idle(self, now: int) -> None:
        for key in [k for k, s in self._samples.items() if not s or now - s[-1][0] > RATE_KEY_IDLE_MS]:
            del self._samples[key]
        while len(self._samples) >= RATE_KEYS_MAX:  # still full: drop the oldest
            del self._samples[next(iter(self._samples))]


def _pos(position: Position) -> str:
    return f"{position.ledger_id}:{position.entry_id}"


def publisher_stats(p: Producer, rates: RateTracker, topic: str) -> dict[str, Any]:
    key = f"{topic}|p|{p.name}|{p.producer_id}"
    msg_rate = rates.rate(key + "|msg", p.msg_in_counter)
    byte_rate = rates.rate(key + "|bytes", p.bytes_in_counter)
    return {
        "accessMode": p.access_mode.label,
        "msgRateIn": msg_rate,
        "msgThroughputIn": byte_rate,
        "averageMsgSize": byte_rate / msg_rate if msg_rate > 0 else 0.0,
        "chunkedMessageRate": 0.0,
        "producerId": p.producer_id,
        "supportsPartialProducer": False,
        "producerName": p.name,
        "address": p.endpoint.remote_address,
        "connectedSince": _iso(p.created_ms),
        "clientVersion": p.endpoint.client_version,
        "metadata": dict(p.metadata),
    }


def consumer_stats(c: Consumer, rates: RateTracker, topic: str) -> dict[str, Any]:
    key = f"{topic}|c|{c.subscription_name}|{c.name}|{c.consumer_id}"
    unacked = c.unacked_messages
    return {
        "msgRateOut": rates.rate(key + "|msg", c.msg_out_counter),
        "msgThroughputOut": rates.rate(key + "|bytes", c.bytes_out_counter),
        "bytesOutCounter": c.bytes_out_counter,
        "msgOutCounter": c.msg_out_counter,
        "msgRateRedeliver": 0.0,
        "messageAckRate": 0.0,
        "chunkedMessageRate": 0.0,
        "consumerName": c.name,
        "availablePermits": c.permits,
        "unackedMessages": unacked,
        "avgMessagesPerEntry": round(unacked / len(c.unacked)) if c.unacked else 0,
        "blockedConsumerOnUnackedMsgs": c.blocked,
        "readPositionWhenJoining": None,
        "address": c.endpoint.remote_address,
        "connectedSince": _iso(c.created_ms),
        "clientVersion": c.endpoint.client_version,
        "lastAckedTimestamp": c.last_acked_ms,
        "lastConsumedTimestamp": c.last_consumed_ms,
        "lastConsumedFlowTimestamp": 0,
        "keyHashRanges": [],
        "metadata": dict(c.metadata),
    }


def subscription_stats(sub: Subscription, rates: RateTracker, topic: str) -> dict[str, Any]:
    consumers = [consumer_stats(c, rates, topic) for c in sub.consumers]
    backlog = sub.backlog()
    ranges = sub.cursor.individually_deleted_ranges()
    active = sub.consumers[0].name if sub.consumers and sub.sub_type in (0, 2) else None
    return {
        "msgRateOut": sum((c["msgRateOut"] for c in consumers), 0.0),
        "msgThroughputOut": sum((c["msgThroughputOut"] for c in consumers), 0.0),
        "bytesOutCounter": sub.bytes_out_counter + sum(c["bytesOutCounter"] for c in consumers),
        "msgOutCounter": sub.msg_out_counter + sum(c["msgOutCounter"] for c in consumers),
        "msgRateRedeliver": 0.0,
        "messageAckRate": rates.rate(f"{topic}|s|{sub.name}|ack", sub.acked_counter),
        "chunkedMessageRate": 0,
        "msgBacklog": backlog,
        "backlogSize": backlog_bytes(backlog, sub.ledger.number_of_entries(), sub.ledger.total_size_bytes()),
        "earliestMsgPublishTimeInBacklog": 0,
        "msgBacklogNoDelayed": backlog,
        "blockedSubscriptionOnUnackedMsgs": False,
        "msgDelayed": 0,
        "unackedMessages": sum(c["unackedMessages"] for c in consumers),
        "type": SubType.LABELS.get(sub.sub_type if sub.sub_type is not None else 0, "Exclusive"),
        "activeConsumerName": active,
        "msgRateExpired": 0.0,
        "totalMsgExpired": 0,
        "lastExpireTimestamp": 0,
        "lastConsumedFlowTimestamp": 0,
        "lastConsumedTimestamp": max((c["lastConsumedTimestamp"] for c in consumers), default=0),
        "lastAckedTimestamp": sub.last_acked_ms,
        "lastMarkDeleteAdvancedTimestamp": sub.last_mark_delete_advanced_ms,
        "consumers": consumers,
        "isDurable": sub.durable,
        "isReplicated": sub.replicated,
        "allowOutOfOrderDelivery": False,
        "keySharedMode": "AUTO_SPLIT" if sub.sub_type == SubType.KEY_SHARED else None,
        "consumersAfterMarkDeletePosition": {},
        "nonContiguousDeletedMessagesRanges": len(ranges),
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "subscriptionProperties": {k: str(v) for k, v in sub.cursor.properties.items()},
        "filterProcessedMsgCount": 0,
        "filterAcceptedMsgCount": 0,
        "filterRejectedMsgCount": 0,
        "filterRescheduledMsgCount": 0,
    }


def topic_stats(topic: PersistentTopic, rates: RateTracker, *, owner: str = "") -> dict[str, Any]:
    """TopicStats of one (non-partitioned or partition) topic."""
    name = str(topic.name)
    subs = {n: subscription_stats(s, rates, name) for n, s in topic.subscriptions.items()}
    compacted = compacted_of(topic.compacted)
    msg_rate_in = rates.rate(name + "|in|msg", topic.msg_in_counter)
    byte_rate_in = rates.rate(name + "|in|bytes", topic.bytes_in_counter)
    ranges = sum(s["nonContiguousDeletedMessagesRanges"] for s in subs.values())
    return {
        "msgRateIn": msg_rate_in,
        "msgThroughputIn": byte_rate_in,
        "msgRateOut": sum((s["msgRateOut"] for s in subs.values()), 0.0),
        "msgThroughputOut": sum((s["msgThroughputOut"] for s in subs.values()), 0.0),
        "bytesInCounter": topic.bytes_in_counter,
        "msgInCounter": topic.msg_in_counter,
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subs.values()),
        "msgOutCounter": sum(s["msgOutCounter"] for s in subs.values()),
        "averageMsgSize": byte_rate_in / msg_rate_in if msg_rate_in > 0 else 0.0,
        "msgChunkPublished": False,
        "storageSize": topic.ledger.total_size_bytes(),
        "backlogSize": max((s["backlogSize"] for n, s in subs.items() if topic.subscriptions[n].durable), default=0),
        "publishRateLimitedTimes": 0,
        "earliestMsgPublishTimeInBacklogs": 0,
        **offload_stats(topic.ledger),
        **topic_counts(transactions_of(topic.txn)),
        "publishers": [publisher_stats(p, rates, name) for p in topic.producers.values()],
        "waitingPublishers": len(topic.access.waiting),
        "subscriptions": subs,
        "replication": replication_stats(name, topic.replicators.values(), topic.producers.values(), rates),
        "deduplicationStatus": "Enabled" if topic.dedup_enabled else "Disabled",
        # magnetar's: geo-replicated copies stored with deduplication off (a crash may store them twice)
        "replicatedCopiesNotDeduplicated": topic.undeduplicated_copies,
        "topicEpoch": topic.current_epoch(),
        "nonContiguousDeletedMessagesRanges": ranges,
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "compaction": stats_json(compacted.record if compacted is not None else CompactionRecord()),
        "ownerBroker": owner,
    }


def unwritten_topic_stats(*, dedup_enabled: bool, owner: str = "") -> dict[str, Any]:
    """TopicStats of a declared partition never written to, answered without creating it (Pulsar shows
    zeros for such a partition): no producers, subscriptions, storage or rates."""
    zeros = ("bytesInCounter", "msgInCounter", "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize",
             "publishRateLimitedTimes", "earliestMsgPublishTimeInBacklogs", "waitingPublishers",
             "nonContiguousDeletedMessagesRanges", "nonContiguousDeletedMessagesRangesSerializedSize",
             "delayedMessageIndexSizeInBytes")
    return {
        **dict.fromkeys(("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "averageMsgSize"), 0.0),
        **dict.fromkeys(zeros, 0),
        "msgChunkPublished": False,
        **offload_stats(None),
        **topic_counts(None),
        "publishers": [],
        "subscriptions": {},
        "replication": {},
        "deduplicationStatus": "Enabled" if dedup_enabled else "Disabled",
        "replicatedCopiesNotDeduplicated": 0,
        "topicEpoch": None,
        "compaction": stats_json(CompactionRecord()),
        "ownerBroker": owner,
    }


_SUMMED = (
    "msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter", "msgInCounter",
    "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize", "offloadedStorageSize",
    "waitingPublishers", "nonContiguousDeletedMessagesRanges",
)
_SUB_SUMMED = ("msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgBacklog",
               "msgBacklogNoDelayed", "unackedMessages", "backlogSize", "msgDelayed")


def partitioned_stats(
    partitions: dict[str, dict[str, Any]], count: int, *, per_partition: bool
) -> dict[str, Any]:
    """PartitionedTopicStats: the partitions' TopicStats summed, plus metadata and (optionally) each one."""
    stats: dict[str, Any] = {key: 0 for key in _SUMMED}
    stats.update({"msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0})
    publishers: list[dict[str, Any]] = []
    subs: dict[str, dict[str, Any]] = {}
    for part in partitions.values():
        for key in _SUMMED:
            stats[key] += part[key]
        publishers.extend(part["publishers"])
        for name, sub in part["subscriptions"].items():
            into = subs.setdefault(name, {**sub, **{k: 0 for k in _SUB_SUMMED}, "consumers": []})
            for key in _SUB_SUMMED:
                into[key] += sub[key]
            into["consumers"].extend(sub["consumers"])
    first = next(iter(partitions.values()), None)
    for key, value in (first or {}).items():
        stats.setdefault(key, value)
    stats["averageMsgSize"] = stats["msgThroughputIn"] / stats["msgRateIn"] if stats["msgRateIn"] > 0 else 0.0
    stats.update({"publishers": publishers, "subscriptions": subs, "metadata": {"partitions": count}})
    stats["replication"] = sum_replication(p["replication"] for p in partitions.values())
    stats["partitions"] = partitions if per_partition else {}
    return stats


def internal_stats(topic: PersistentTopic) -> dict[str, Any]:
    """PersistentTopicInternalStats: the managed ledger, its ledgers and its cursors."""
    ledger = topic.ledger
    cursors = {}
    for name, sub in topic.subscriptions.items():
        cursors[name] = cursor_stats(sub)
        cursors[name]["messagesConsumedCounter"] = sub.acked_counter
    return {
        **managed_ledger_internal_stats(ledger, cursors),
        "schemaLedgers": [],
        "compactedLedger": compacted_ledger_json(compacted_of(topic.compacted)),
        "properties": dict(ledger.properties),
    }


def managed_ledger_internal_stats(ledger: ManagedLedger, cursors: dict[str, dict[str, Any]] | None = None,
                                  ) -> dict[str, Any]:
    """ManagedLedgerInternalStats: the ledger's counters, its ledgers, and its cursors (``cursors`` given by
    the caller first, e.g. subscriptions with their counters; the ledger's other cursors as they stand)."""
    summaries = ledger.ledgers()
    current = summaries[-1] if summaries else None
    state = getattr(ledger, "state", None)
    opened = state is None or getattr(state, "value", "") == "open"
    shown = dict(cursors or {})
    for name, cursor in ledger.cursors.items():  # system cursors (deduplication, replication, logs' own)
        if name not in shown:
            shown[name] = _cursor_json(cursor.mark_delete_position, cursor.read_position,
                                       cursor.individually_deleted_ranges(), cursor.backlog_entries(),
                                       cursor.properties)
    return {
        "entriesAddedCounter": ledger.entries_added,
        "numberOfEntries": ledger.number_of_entries(),
        "totalSize": ledger.total_size_bytes(),
        "currentLedgerEntries": current.entries if current else 0,
        "currentLedgerSize": current.size_bytes if current else 0,
        "lastLedgerCreatedTimestamp": _iso(current.created_ms) if current else "",
        "lastLedgerCreationFailureTimestamp": None,
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": _pos(ledger.last_confirmed),
        "state": "LedgerOpened" if opened else "Closed",
        "ledgers": [ledger_json(s, ledger.offload_reads) for s in summaries],
        "cursors": shown,
    }


def unwritten_internal_stats() -> dict[str, Any]:
    """PersistentTopicInternalStats of a declared partition never written to: no ledger exists yet."""
    return {
        "entriesAddedCounter": 0, "numberOfEntries": 0, "totalSize": 0, "currentLedgerEntries": 0,
        "currentLedgerSize": 0, "lastLedgerCreatedTimestamp": "", "lastLedgerCreationFailureTimestamp": None,
        "waitingCursorsCount": 0, "pendingAddEntriesCount": 0, "lastConfirmedEntry": _pos(Position(-1, -1)),
        "state": "Closed", "ledgers": [], "cursors": {}, "schemaLedgers": [],
        "compactedLedger": compacted_ledger_json(None), "properties": {},
    }


def ledger_json(summary: LedgerSummary, reads: OffloadReadHealth | None = None) -> dict[str, Any]:
    """PersistentTopicInternalStats.LedgerInfo; an offloaded ledger also carries its OffloadContext in the
    shape of Pulsar's managed-ledger info (uid halves, complete, bookkeeperDeleted, driver metadata), and
    ``offloadReadError`` while reads of it fail in the offload store."""
    item: dict[str, Any] = {"ledgerId": summary.ledger_id, "entries": summary.entries, "size": summary.size_bytes,
                            "offloaded": summary.offloaded, "metadata": None, "underReplicated": False}
    offload = summary.offload
    if offload is not None:
        context = offload.context
        uid = uuid.UUID(context.uuid).int
        properties = {"bucket": context.bucket, "prefix": context.prefix, "uuid": context.uuid}
        item["offloadContext"] = {
            "uidMsb": _signed64(uid >> 64), "uidLsb": _signed64(uid & (2**64 - 1)),
            "complete": offload.complete, "bookkeeperDeleted": offload.local_deleted,
            "timestamp": offload.timestamp_ms,
            "driverMetadata": {"name": context.driver,
                               "properties": [{"key": k, "value": v} for k, v in properties.items()]},
        }
    if reads is not None and reads.failing_ledger == summary.ledger_id:
        item["offloadReadError"] = reads.last_error
    return item


def _signed64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def cursor_stats(sub: Subscription) -> dict[str, Any]:
    cursor = sub.cursor
    ranges = cursor.individually_deleted_ranges()
    return _cursor_json(cursor.mark_delete_position, cursor.read_position, ranges, sub.backlog(), cursor.properties)


def _cursor_json(
    mark_delete: Position, read: Position, ranges: list[tuple[Position, Position]], backlog: int,
    properties: Any,
) -> dict[str, Any]:
    shown = ", ".join(f"({_pos(lo)}..{_pos(hi)}]" for lo, hi in ranges[:1000])
    return {
        "markDeletePosition": _pos(mark_delete),
        "readPosition": _pos(read),
        "waitingReadOp": False,
        "pendingReadOps": 0,
        "messagesConsumedCounter": 0,
        "cursorLedger": -1,
        "cursorLedgerLastEntry": -1,
        "individuallyDeletedMessages": f"[{shown}]",
        "lastLedgerSwitchTimestamp": "",
        "state": "Open",
        "numberOfEntriesSinceFirstNotAckedMessage": backlog,
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "subscriptionHavePendingRead": False,
        "subscriptionHavePendingReplayRead": False,
        "properties": {k: int(v) for k, v in dict(properties).items()},
    }


def _iso(ms: int) -> str:
    """Pulsar prints connection and ledger times as ISO-8601 UTC."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
