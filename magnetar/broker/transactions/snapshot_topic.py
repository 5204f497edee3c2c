"""The namespace's ``__transaction_buffer_snapshot`` topic as a :class:`KeyedTopic`: keyed messages
appended in-process (so compaction sees them like any other), read back through compaction's latest-value
view, compacted after snapshots once enough was written since the last compaction.

The broker supplies how to load the topic (:data:`LoadTopic`); this module knows only the topic's append
and its compacted view.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from magnetar.broker.transactions.segmented_snapshot import SNAPSHOT_TOPIC, KeyedTopic
from magnetar.broker.transactions.snapshot import SnapshotError
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedgerError, Position
from magnetar.storage.api import StorageError

log = logging.getLogger("magnetar.broker.transactions.snapshot_topic")

PRODUCER_NAME = "__transaction_buffer_snapshot_writer"
COMPACT_AFTER_BYTES = 1024 * 1024  # bytes written after the compaction horizon that start a compaction


class SnapshotHostTopic(Protocol):
    clock: Clock
    compacted: CompactedTopic | None

    async def append_internal(self, entry: bytes) -> Position: ...


#: the loaded topic of that name; None when it does not exist and ``create`` is False
LoadTopic = Callable[[TopicName, bool], Awaitable[SnapshotHostTopic | None]]
#: start a compaction of the topic unless one is running
Compact = Callable[[CompactedTopic], None]


def snapshot_topic_of(topic: str) -> TopicName:
    name = TopicName.parse(topic)
    return TopicName("persistent", name.tenant, name.namespace, SNAPSHOT_TOPIC)


def is_snapshot_topic(topic: str) -> bool:
    return TopicName.parse(topic).local_name == SNAPSHOT_TOPIC


class SystemKeyedTopic:
    def __init__(self, topic: SnapshotHostTopic, compact: Compact, compact_after_bytes: int) -> None:
        self._topic = topic
        self._compact = compact
        self._compact_after_bytes = compact_after_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        meta = proto.pb.MessageMetadata(producer_name=PRODUCER_NAME, sequence_id=0,
                                        publish_time=self._topic.clock.now_ms(), partition_key=key)
        if value is None:
            meta.null_value = True
        try:
            await self._topic.append_internal(proto.make_entry(meta, value or b""))
        except (BrokerError, ManagedLedgerError, StorageError) as exc:
            raise SnapshotError(f"snapshot key {key!r} not written: {exc}") from exc

    async def latest(self, prefix: str) -> dict[str, bytes]:
        compacted = self._topic.compacted
        if compacted is None:
            raise SnapshotError("the snapshot topic has no compacted view (no ledger store)")
        try:
            table = await compacted.latest_values()
        except (BrokerError, ManagedLedgerError, StorageError) as exc:
            raise SnapshotError(f"snapshot topic unreadable: {exc}") from exc
        return {key: m.value for key, m in table.items() if key.startswith(prefix)}

    async def written(self) -> None:
        compacted = self._topic.compacted
        if compacted is not None and compacted.backlog_bytes() >= self._compact_after_bytes:
            self._compact(compacted)


def keyed_topics(load: LoadTopic, compact: Compact, *,
                 compact_after_bytes: int = COMPACT_AFTER_BYTES) -> Callable[[str, bool], Awaitable[KeyedTopic | None]]:
    """What :class:`~magnetar.broker.transactions.segmented_snapshot.SegmentedSnapshotStore` takes."""

    async def of(topic: str, create: bool) -> KeyedTopic | None:
        try:
            host = await load(snapshot_topic_of(topic), create)
        except (BrokerError, ManagedLedgerError) as exc:
            raise SnapshotError(f"snapshot topic of {topic} unavailable: {exc}") from exc
        return None if host is None else SystemKeyedTopic(host, compact, compact_after_bytes)

    return of
