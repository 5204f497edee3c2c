"""Topics' records outside the managed ledger (which keeps its own, in ``ledger/``):

- ``/admin/partitioned-topics/<tenant>/<namespace>/<domain>/<local>``: a partitioned topic's
  :class:`PartitionedTopicMetadata` (``{"partitions": n}``); its presence declares the name partitioned.
- ``/admin/topic-policies/<tenant>/<namespace>/<domain>/<local>``: a topic's own policies (retention, TTL,
  dedup, backlog quotas), one JSON object, per partitioned (parent) topic as Pulsar keeps them.
- ``/admin/topic-policies/<tenant>/<namespace>/<local>``: the topic-level replication clusters. This record
  has no domain segment: it was written so from the start, and existing data dirs hold it there.

Local names are URL-encoded into one key segment. Every write is compare-and-set when the caller names a
version; ``BadVersion`` goes back to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.metadata import api as md
from magnetar.resources._names import NamespaceRef, TopicRef, quoted, unquoted
from magnetar.resources._records import Versioned, decode_object, encode

PARTITIONED_TOPICS_ROOT = "/admin/partitioned-topics"
TOPIC_POLICIES_ROOT = "/admin/topic-policies"


@dataclass(frozen=True, slots=True)
class PartitionedTopicMetadata:
    partitions: int

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PartitionedTopicMetadata:
        return cls(int(value.get("partitions", 0)))

    def to_json(self) -> dict[str, int]:
        return {"partitions": self.partitions}


def partitioned_topic_key(topic: TopicRef) -> str:
    return f"{PARTITIONED_TOPICS_ROOT}/{topic.tenant}/{topic.namespace}/{topic.domain}/{quoted(topic.local_name)}"


class PartitionedTopicResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store

    key = staticmethod(partitioned_topic_key)

    async def get(self, topic: TopicRef) -> Versioned[PartitionedTopicMetadata] | None:
        record = await self._store.get(partitioned_topic_key(topic))
        if record is None:
            return None
        return Versioned(PartitionedTopicMetadata.from_json(decode_object(record.value, record.key)), record.version)

    async def partitions(self, topic: TopicRef) -> int:
        """The partition count; 0 when ``topic`` is not declared partitioned."""
        stored = await self.get(topic)
        return stored.value.partitions if stored is not None else 0

    async def exists(self, topic: TopicRef) -> bool:
        return await self._store.exists(partitioned_topic_key(topic))

    async def create(self, topic: TopicRef, partitions: int) -> None:
        """Declare the name partitioned; BadVersion if it already is."""
        await self.put(topic, partitions, md.NEW_KEY)

    async def put(self, topic: TopicRef, partitions: int, expected_version: int | None = None) -> None:
        value = PartitionedTopicMetadata(partitions).to_json()
        await self._store.put(partitioned_topic_key(topic), encode(value), expected_version)

    async def delete(self, topic: TopicRef) -> None:
        """NotFound if the name is not declared partitioned."""
        await self._store.delete(partitioned_topic_key(topic))

    async def local_names(self, ns: NamespaceRef, domain: str = "persistent") -> list[str]:
        """The local names of the namespace's partitioned topics (decoded), sorted by their stored form."""
        parent = f"{PARTITIONED_TOPICS_ROOT}/{ns.tenant}/{ns.namespace}/{domain}"
        return [unquoted(name) for name in await self._store.children(parent)]


def topic_policies_key(topic: TopicRef) -> str:
    """``topic`` is the partitioned (parent) topic, or a plain one: partitions share their parent's policies."""
    return f"{TOPIC_POLICIES_ROOT}/{topic.tenant}/{topic.namespace}/{topic.domain}/{quoted(topic.local_name)}"


def replication_policies_key(topic: TopicRef) -> str:
    """The topic-level replication clusters' record of the partitioned (parent) or plain ``topic``."""
    return f"{TOPIC_POLICIES_ROOT}/{topic.tenant}/{topic.namespace}/{quoted(topic.local_name)}"


class TopicPolicyResources:
    """Both topic-level records: ``policies`` (by :func:`topic_policies_key`) and ``replication`` (by
    :func:`replication_policies_key`). Each is a JSON object rewritten whole."""

    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store

    async def _get(self, key: str) -> Versioned[dict[str, Any]] | None:
        record = await self._store.get(key)
        return None if record is None else Versioned(decode_object(record.value, record.key), record.version)

    async def get(self, topic: TopicRef) -> Versioned[dict[str, Any]] | None:
        return await self._get(topic_policies_key(topic))

    async def put(self, topic: TopicRef, fields: Mapping[str, Any], expected_version: int | None = None) -> None:
        await self._store.put(topic_policies_key(topic), encode(dict(fields)), expected_version)

    async def get_replication(self, topic: TopicRef) -> Versioned[dict[str, Any]] | None:
        return await self._get(replication_policies_key(topic))

    async def put_replication(
        self, topic: TopicRef, fields: Mapping[str, Any], expected_version: int | None = None
    ) -> None:
        await self._store.put(replication_policies_key(topic), encode(dict(fields)), expected_version)

    async def has_replication(self, topic: TopicRef) -> bool:
        return await self._store.exists(replication_policies_key(topic))

    async def any(self) -> bool:
        """Whether any topic has topic-level policies of either kind."""
        return bool(await self._store.children(TOPIC_POLICIES_ROOT))
