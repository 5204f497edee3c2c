"""A consumer attached to a subscription: permits, the entries it holds unacked, and delivery.

Permits count messages, not entries (facts §5.3): a batch entry costs ``num_messages_in_batch``. The
consumer remembers what it was sent and not yet acked, so a close or a redelivery request gives exactly
those entries back. It writes MESSAGE frames through its endpoint and knows nothing of sockets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from magnetar.broker.endpoint import Endpoint
from magnetar.ledger.api import Position
from magnetar.protocol.message_frame import MessageFrames


class SubType:
    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3

    LABELS = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


#: What ``Consumer.deliver`` takes per entry: a :class:`Delivery` or a plain tuple of its fields (dispatch
#: builds plain tuples: one is made per entry, and a named tuple's constructor is a Python call).
DeliveryFields = tuple[Position, bytes, int, int, "list[int] | None"]


class Delivery(NamedTuple):
    """One entry on its way to a consumer, with what dispatch needs to know of it (a tuple: one per entry)."""

    position: Position
    data: bytes
    num_messages: int
    redelivery_count: int
    ack_set: list[int] | None


@dataclass(eq=False, slots=True)
class Consumer:
    endpoint: Endpoint
    consumer_id: int
    name: str
    topic_name: str
    subscription_name: str
    sub_type: int
    priority_level: int
    partition: int
    created_ms: int
    metadata: dict[str, str] = field(default_factory=dict)
    key_shared_mode: int = 0  # AUTO_SPLIT=0, STICKY=1
    hash_ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order: bool = False
    read_compacted: bool = False  # SUBSCRIBE.read_compacted: the compacted view first (compaction/)
    max_permits: int = 1_000_000
    max_unacked_messages: int = 0  # maxUnackedMessagesPerConsumer; 0 = no limit
    permits: int = 0
    unacked: dict[Position, int] = field(default_factory=dict)  # position -> messages in the entry
    unacked_messages: int = 0
    blocked: bool = False  # too many unacked messages: nothing more until half of them are acked
    msg_out_counter: int = 0
    bytes_out_counter: int = 0
    closed: bool = False
    last_consumed_ms: int = 0  # stats: when a message last went out, and when the consumer last acked
    last_acked_ms: int = 0
    _frames: MessageFrames | None = field(default=None, repr=False)  # made on the first delivery

    def add_permits(self, n: int) -> None:
        self.permits = min(self.permits + max(n, 0), self.max_permits)

    def deliver(self, deliveries: Sequence[DeliveryFields], now_ms: int = 0) -> None:
        """Encode and queue MESSAGE frames; the caller awaits ``endpoint.drain()``."""
        if not deliveries:
            return
        if now_ms:
            self.last_consumed_ms = now_ms
        frames = self._frames
        if frames is None:
            frames = self._frames = MessageFrames(self.consumer_id, self.partition)
        send, unacked = self.endpoint.send_frame_parts, self.unacked
        messages = out_bytes = newly_unacked = 0
        for position, data, num_messages, redelivery_count, ack_set in deliveries:
            send(frames.header(position.ledger_id, position.entry_id, len(data), redelivery_count, ack_set), data)
            messages += num_messages
            out_bytes += len(data)
            newly_unacked += num_messages - unacked.get(position, 0)
            unacked[position] = num_messages
        self.permits -= messages
        self.unacked_messages += newly_unacked
        self.msg_out_counter += messages
        self.bytes_out_counter += out_bytes
        if self.max_unacked_messages and self.unacked_messages >= self.max_unacked_messages:
            self.blocked = True

    @property
    def can_receive(self) -> bool:
        return self.wants_messages and self.endpoint.has_output_room()

    @property
    def wants_messages(self) -> bool:
        """Has permits and room for unacked messages (its connection may still be backed up)."""
        return self.permits > 0 and not self.blocked and not self.closed and self.endpoint.is_open

    def forget(self, position: Position) -> bool:
        """Drop an acked entry; True when that unblocked the consumer."""
        self.unacked_messages -= self.unacked.pop(position, 0)
        return self._maybe_unblock()

    def forget_all(self, positions: list[Position]) -> bool:
        """Drop acked entries; True when that unblocked the consumer."""
        pop = self.unacked.pop
        self.unacked_messages -= sum([pop(p, 0) for p in positions])
        return self._maybe_unblock()

    def forget_up_to(self, position: Position) -> list[Position]:
        forgotten = [p for p in self.unacked if p <= position]
        for pos in forgotten:
            self.unacked_messages -= self.unacked.pop(pos)
        self._maybe_unblock()
        return forgotten

    def take_unacked(self) -> list[Position]:
        taken = sorted(self.unacked)
        self.unacked.clear()
        self.unacked_messages = 0
        self._maybe_unblock()
        return taken

    def _maybe_unblock(self) -> bool:
        if self.blocked and self.unacked_messages <= self.max_unacked_messages // 2:
            self.blocked = False
            return True
        return False
