"""Value types the application sees: ``MessageId`` and ``Message``; plus topic-name helpers.

``MessageId`` orders like Pulsar's (ledger, entry, batch index); partition is carried but not
compared across partitions. Both types are frozen and picklable. Knows nothing of connections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from magnetar.client.errors import InvalidConfiguration
from magnetar.protocol import ids, pb

__all__ = ["EARLIEST", "LATEST", "Message", "MessageId", "full_topic_name", "partition_name"]

_PARTITION_MARK: Final = "-partition-"


@dataclass(frozen=True, slots=True, order=True)
class MessageId:
    ledger_id: int
    entry_id: int
    batch_index: int = -1
    partition: int = field(default=-1, compare=False)

    def __str__(self) -> str:
        return f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"

    @property
    def entry(self) -> tuple[int, int]:
        return self.ledger_id, self.entry_id

    def to_pb(self, *, with_batch_index: bool = False) -> pb.MessageIdData:
        """Ledger and entry only (as ACK/SEEK/REDELIVER want), batch index when asked."""
        return ids.message_id(
            self.ledger_id, self.entry_id, batch_index=self.batch_index if with_batch_index else None
        )

    @classmethod
    def from_pb(cls, mid: pb.MessageIdData, *, partition: int | None = None) -> MessageId:
        return cls(
            ids.signed(mid.ledgerId),
            ids.signed(mid.entryId),
            mid.batch_index if mid.HasField("batch_index") else -1,
            mid.partition if partition is None else partition,
        )

    def serialize(self) -> bytes:
        return self.to_pb(with_batch_index=True).SerializeToString()

    @classmethod
    def deserialize(cls, raw: bytes) -> MessageId:
        return cls.from_pb(pb.MessageIdData.FromString(raw))


EARLIEST: Final = MessageId(*ids.EARLIEST)
LATEST: Final = MessageId(*ids.LATEST)


@dataclass(frozen=True, slots=True)
class Message:
    """One message as delivered to the application."""

    topic: str
    message_id: MessageId
    data: bytes
    properties: dict[str, str]
    key: str | None
    ordering_key: bytes | None
    event_time_ms: int
    publish_time_ms: int
    producer_name: str
    sequence_id: int
    redelivery_count: int
    batch_size: int = 1
    chunk_ids: tuple[MessageId, ...] = ()

    def value(self) -> bytes:
        return self.data


def full_topic_name(topic: str) -> str:
    """Expand short names as the reference client does: ``t`` and ``tenant/ns/t``."""
    if "://" in topic:
        domain, _, rest = topic.partition("://")
        if domain not in ("persistent", "non-persistent") or len(rest.split("/")) < 3:
            raise InvalidConfiguration(f"invalid topic name {topic!r}")
        return topic
    parts = topic.split("/")
    if len(parts) == 1 and topic:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidConfiguration(f"invalid topic name {topic!r}")


def partition_name(topic: str, index: int) -> str:
    return f"{topic}{_PARTITION_MARK}{index}"


def partition_index(topic: str) -> int:
    """The partition index of ``…-partition-N``, or -1."""
    if _PARTITION_MARK not in topic:
        return -1
    tail = topic.rsplit("-", 1)[1]
    return int(tail) if tail.isdigit() else -1
