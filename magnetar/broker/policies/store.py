"""Topic policies in the metadata store, and effective values over topic, namespace and broker config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from magnetar.broker.errors import MetadataError
from magnetar.broker.names import TopicName
from magnetar.broker.policies.quota import BacklogQuota
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources

DESTINATION_STORAGE = "destination_storage"
MESSAGE_AGE = "message_age"
QUOTA_TYPES = (DESTINATION_STORAGE, MESSAGE_AGE)


class TopicPolicyStore:
    """A topic's own policies (retention, TTL, dedup, backlog quotas), one record per partitioned or plain topic."""

    def __init__(self, resources: MetadataResources) -> None:
        self._policies = resources.topic_policies

    async def get(self, topic: TopicName) -> dict[str, Any]:
        try:
            record = await self._policies.get(topic.partitioned_topic_name)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
        return dict(record.value) if record is not None else {}

    async def set(self, topic: TopicName, field: str, value: Any) -> None:
        """Set (or with ``None`` remove) one field, compare-and-set on the record."""
        parent = topic.partitioned_topic_name
        try:
            record = await self._policies.get(parent)
            stored = dict(record.value) if record is not None else {}
            if value is None:
                stored.pop(field, None)
            else:
                stored[field] = value
            await self._policies.put(parent, stored, record.version if record is not None else md.NEW_KEY)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc


class DedupSettings(Protocol):
    @property
    def broker_deduplication_enabled(self) -> bool: ...


def effective_dedup(config: DedupSettings, namespace: Mapping[str, Any], topic: Mapping[str, Any]) -> bool:
    for value in (topic.get("deduplicationEnabled"), namespace.get("deduplicationEnabled")):
        if isinstance(value, bool):
            return value
    return config.broker_deduplication_enabled


def effective_quotas(namespace: Mapping[str, Any], topic: Mapping[str, Any]) -> dict[str, BacklogQuota]:
    """The backlog quotas by type (``destination_storage``, ``message_age``): the topic's, else the namespace's."""
    for holder in (topic.get("backLogQuotaMap"), namespace.get("backlog_quota_map")):
        if isinstance(holder, dict) and holder:
            return {kind: BacklogQuota.parse(q) for kind, q in holder.items() if kind in QUOTA_TYPES}
    return {}
