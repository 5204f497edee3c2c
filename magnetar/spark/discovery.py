"""Driver-side questions to the broker: which partitions a source covers, where each one ends, and
what the first unread message looks like (for admission limits).

Every answer comes from ``magnetar.client`` (partition metadata, namespace listing,
GET_LAST_MESSAGE_ID through a short-lived non-durable reader); nothing here leaves a subscription
behind. Knows nothing of Spark.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from magnetar.client import Client, MessageId
from magnetar.client.errors import OperationTimeout
from magnetar.spark.options import OptionError, TopicSpec

__all__ = ["Peek", "full_name", "last_ids", "list_partitions", "partition_of", "peek_next"]

_PROBE_TIMEOUT_MS = 5_000
log = logging.getLogger(__name__)


def full_name(topic: str) -> str:
    """``t`` -> ``persistent://public/default/t``; ``tenant/ns/t`` -> ``persistent://tenant/ns/t``."""
    if "://" in topic:
        return topic
    return f"persistent://public/default/{topic}" if "/" not in topic else f"persistent://{topic}"


def partition_of(topic: str) -> int:
    """The partition index of ``...-partition-N``, or -1."""
    tail = topic.rsplit("-partition-", 1)
    return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else -1


async def _expand(client: Client, topics: list[str]) -> list[str]:
    out: list[str] = []
    for topic in topics:
        out += await client.get_topic_partitions(topic)
    return out


async def _existing(client: Client, topics: list[str]) -> list[str]:
    """The named topics that exist (as a topic or as partitions), asked without creating any: a misspelled
    name must not auto-create a topic. Missing ones are logged and read as empty."""
    listed: dict[str, set[str]] = {}
    out = []
    for topic in (full_name(t) for t in topics):
        _, _, rest = topic.partition("://")
        namespace = "/".join(rest.split("/")[:2])
        if namespace not in listed:
            listed[namespace] = set(await client.get_topics_of_namespace(namespace))
        names = listed[namespace]
        if topic in names or any(n.startswith(f"{topic}-partition-") for n in names):
            out.append(topic)
        else:
            log.warning("topic %s does not exist: read as empty", topic)
    return out


async def list_partitions(client: Client, spec: TopicSpec) -> list[str]:
    """The (partition) topics a source reads now, sorted; partitioned topics expand to their partitions."""
    if spec.pattern is None:
        return sorted(set(await _expand(client, await _existing(client, list(spec.topics)))))
    full = full_name(spec.pattern)
    domain, _, rest = full.partition("://")
    tenant, namespace, _ = rest.split("/", 2)
    try:
        regex = re.compile(full)
    except re.error as exc:
        raise OptionError(f"option topicsPattern is not a regular expression: {exc}") from exc
    names = await client.get_topics_of_namespace(f"{tenant}/{namespace}")
    parents = {n.rsplit("-partition-", 1)[0] if partition_of(n) >= 0 else n for n in names}
    chosen = sorted(p for p in parents if regex.fullmatch(p) and p.startswith(domain))
    return sorted(set(await _expand(client, chosen)))


async def last_ids(client: Client, topics: list[str]) -> dict[str, MessageId]:
    """The id of each partition's last message; entry id -1 for an empty partition."""
    out: dict[str, MessageId] = {}
    for topic in topics:
        reader = await client.create_reader(topic, "latest", receiver_queue_size=1)
        try:
            last = await reader.last_message_id()
        finally:
            await reader.close()
        out[topic] = MessageId(last.ledger_id, last.entry_id, last.batch_index)
    return out


@dataclass(frozen=True, slots=True)
class Peek:
    """The first unread message of a partition: its id, how many messages its entry holds, its size."""

    first: MessageId
    batch_size: int
    size_bytes: int


async def peek_next(client: Client, topic: str, start: MessageId) -> Peek | None:
    reader = await client.create_reader(topic, start, receiver_queue_size=1)
    try:
        msg = await reader.read_next(_PROBE_TIMEOUT_MS)
    except OperationTimeout:
        return None
    finally:
        await reader.close()
    mid = msg.message_id
    return Peek(MessageId(mid.ledger_id, mid.entry_id, mid.batch_index), max(msg.batch_size, 1), len(msg.data) + 64)
