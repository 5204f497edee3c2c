"""Admin operations on subscriptions: list, create at a position, delete, skip, reset, expire, peek.

As in Pulsar, an operation on a partitioned topic applies to every partition (peek excepted). Moving a
cursor disconnects the subscription's consumers with CLOSE_CONSUMER so the clients resubscribe and read
from the new position, exactly as a client SEEK does. This module knows no HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.errors import (
    Conflict,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PersistenceError,
    PreconditionFailed,
)
from magnetar.broker.names import TopicName, valid_subscription_name
from magnetar.broker.reserved import is_reserved_cursor
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.ledger.api import Entry, InitialPosition, InvalidPosition, ManagedLedger, ManagedLedgerError, Position

log = logging.getLogger("magnetar.broker.admin")

PEEK_SCAN_MAX = 100_000  # entries looked at (acked ones included) to find the nth unacked one
SKIP_MAX = 1_000_000
LATEST = Position(2**63 - 1, 2**63 - 1)


@dataclass(frozen=True, slots=True)
class PeekedMessage:
    position: Position
    metadata: proto.pb.MessageMetadata
    payload: bytes


def parse_message_id(body: Any) -> tuple[Position | None, bool]:
    """A MessageId body ``{"ledgerId", "entryId", "partitionIndex", "isExcluded"}``; None means latest."""
    if body is None:
        return None, False
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a MessageId object")
    ledger_id, entry_id = body.get("ledgerId"), body.get("entryId")
    for value in (ledger_id, entry_id):
        if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**63:
            raise InvalidRequest("ledgerId and entryId must be integers")
    excluded = body.get("isExcluded", False)
    if not isinstance(excluded, bool):
        raise InvalidRequest("isExcluded must be a boolean")
    assert isinstance(ledger_id, int) and isinstance(entry_id, int)
    position = Position(ledger_id, entry_id)
    return (None if position == LATEST else position), excluded


def _earliest(ledger: ManagedLedger) -> Position:
    return ledger.next_valid_position(ledger.first_position())


def _previous(ledger: ManagedLedger, position: Position) -> Position:
    """The entry just before ``position`` (the first position if there is none)."""
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    before = [s for s in ledger.ledgers() if s.ledger_id < position.ledger_id and s.entries > 0]
    return Position(before[-1].ledger_id, before[-1].entries - 1) if before else ledger.first_position()


class SubscriptionAdmin:
    def __init__(self, admin: BrokerAdmin) -> None:
        self.admin = admin

    async def _subscription(self, topic: TopicName, name: str) -> tuple[PersistentTopic, Subscription]:
        _check_not_reserved(name)
        loaded = await self.admin.view(topic)  # a partition never written to has no subscription
        sub = loaded.subscriptions.get(name) if loaded is not None else None
        if loaded is None or sub is None:
            raise NotFound("Subscription not found")
        return loaded, sub

    async def list(self, topic: TopicName) -> list[str]:
        names: set[str] = set()
        for target in await self.admin.targets(topic):
            if await self.admin.exists(target):
                viewed = await self.admin.view(target)
                names.update(viewed.subscriptions if viewed is not None else ())
            elif target == topic:
                raise NotFound("Topic not found")
        return sorted(names)

    async def create(self, topic: TopicName, name: str, body: Any, *, replicated: bool) -> None:
        position, excluded = parse_message_id(body)
        if not valid_subscription_name(name):
            raise InvalidRequest("Invalid subscription name")
        _check_not_reserved(name)
        targets = await self.admin.targets(topic)
        loaded = [await self.admin.load(t) for t in targets]
        if any(name in t.subscriptions for t in loaded):
            raise Conflict("Subscription already exists for topic")
        for t in loaded:
            try:
                cursor = await t.ledger.open_cursor(name, InitialPosition.LATEST)
                if position is not None:
                    start = _earliest(t.ledger) if position.ledger_id < 0 else position
                    await cursor.reset(t.ledger.next_valid_position(start) if excluded else start)
            except ManagedLedgerError as exc:
                raise PreconditionFailed(f"Cannot create the subscription at that position: {exc}") from exc
            # built the way the topic builds the subscriptions it restores
            sub = t._new_subscription(name, cursor, durable=True)
            sub.replicated = replicated
            t.subscriptions[name] = sub
        log.info("created subscription %s on %s", name, topic)

    async def set_replicated(self, topic: TopicName, name: str, enabled: Any) -> None:
        """PIP-33's replicatedSubscriptionStatus: the only way to turn replicated state off."""
        if not isinstance(enabled, bool):
            raise InvalidRequest("The body must be true or false")
        service = self.admin.broker.replicated_subscriptions
        if enabled and not service.enabled:
            raise PreconditionFailed("Replicated subscriptions are disabled on this broker")
        pairs = [await self._subscription(t, name) for t in await self.admin.targets(topic)]
        for loaded, sub in pairs:
            if not sub.durable:
                raise PreconditionFailed("Only durable subscriptions can be replicated")
            await service.set_status(loaded, sub, enabled)
        log.info("subscription %s on %s: replicated state %s", name, topic, "on" if enabled else "off")

    async def get_replicated(self, topic: TopicName, name: str) -> dict[str, bool]:
        found = {}
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            found[str(loaded.name)] = sub.replicated
        return found

    async def delete(self, topic: TopicName, name: str, *, force: bool) -> None:
        pairs = [await self._subscription(t, name) for t in await self.admin.targets(topic)]
        if not force and any(sub.consumers for _t, sub in pairs):
            raise PreconditionFailed("Subscription has active connected consumers")
        for loaded, sub in pairs:
            await _close_consumers(loaded, sub.consumers)
            await loaded.delete_subscription(sub)
        log.info("deleted subscription %s on %s", name, topic)

    async def skip_all(self, topic: TopicName, name: str) -> None:
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            last = loaded.ledger.last_confirmed
            if last.entry_id >= 0:
                sub.cursor.acknowledge_cumulative(last)
                await sub.cursor.flush()

    async def skip(self, topic: TopicName, name: str, count: int) -> None:
        if not 0 <= count <= SKIP_MAX:
            raise InvalidRequest(f"The number of messages to skip must be between 0 and {SKIP_MAX}")
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            positions = _unacked(loaded.ledger, sub, count)
            if positions:
                sub.cursor.acknowledge(positions)
                await sub.cursor.flush()

    async def reset_to_time(self, topic: TopicName, name: str, timestamp_ms: int) -> None:
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            await _reset(loaded, sub, await loaded.position_for_publish_time(timestamp_ms))

    async def reset_to_id(self, topic: TopicName, name: str, body: Any) -> None:
        position, excluded = parse_message_id(body)
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            ledger = loaded.ledger
            if position is None:
                start = ledger.next_valid_position(ledger.last_confirmed)
            else:
                start = _earliest(ledger) if position.ledger_id < 0 else position
                start = ledger.next_valid_position(start) if excluded else start
            await _reset(loaded, sub, start)

    async def expire(self, topic: TopicName, name: str, seconds: int, now_ms: int) -> None:
        """Acknowledge every message published more than ``seconds`` ago."""
        if not 0 <= seconds < 2**40:
            raise InvalidRequest("expireTimeInSeconds must be a non-negative integer")
        for target in await self.admin.targets(topic):
            loaded, sub = await self._subscription(target, name)
            first_kept = await loaded.position_for_publish_time(now_ms - seconds * 1000)
            last_expired = _previous(loaded.ledger, first_kept)
            if last_expired > sub.cursor.mark_delete_position and last_expired.entry_id >= 0:
                sub.cursor.acknowledge_cumulative(last_expired)
                await sub.cursor.flush()

    async def peek(self, topic: TopicName, name: str, nth: int) -> PeekedMessage:
        """The nth (from 1) unacknowledged entry of the subscription."""
        if await self.admin.partitions(topic) > 0:
            raise MethodNotAllowed("Peek messages on a partitioned topic is not allowed")
        if not 1 <= nth <= PEEK_SCAN_MAX:
            raise InvalidRequest(f"The message position must be between 1 and {PEEK_SCAN_MAX}")
        loaded, sub = await self._subscription(topic, name)
        seen = 0
        for position in _unacked(loaded.ledger, sub, nth + PEEK_SCAN_MAX):
            entry = await read_for_admin(loaded.ledger, position)
            meta = proto.parse_entry_metadata(entry.data)
            if meta.HasField("marker_type"):  # the broker's own entries are never messages (as Pulsar skips them)
                continue
            seen += 1
            if seen == nth:
                return PeekedMessage(entry.position, meta, bytes(proto.entry_payload(entry.data)))
        raise NotFound("Message not found")


async def read_for_admin(ledger: ManagedLedger, position: Position) -> Entry:
    """One entry for an admin read: 404 when there is no such entry, 500 with the reason when the read
    fails (the offload store down, a damaged entry), as Pulsar answers."""
    try:
        return await ledger.read_entry(position)
    except InvalidPosition as exc:
        raise NotFound(f"Message not found: {exc}") from exc
    except ManagedLedgerError as exc:
        raise PersistenceError(f"Failed to read message {position}: {exc}") from exc


def _check_not_reserved(name: str) -> None:
    if is_reserved_cursor(name):
        raise MethodNotAllowed(f"Subscription name {name!r} is reserved for the broker's own cursors")


def _unacked(ledger: ManagedLedger, sub: Subscription, count: int) -> Iterator[Position]:
    """Up to ``count`` unacknowledged positions after the mark-delete position, in order (bounded scan)."""
    found = 0
    position = ledger.next_valid_position(sub.cursor.mark_delete_position)
    last = ledger.last_confirmed
    for _ in range(min(count + PEEK_SCAN_MAX, ledger.number_of_entries() + 1)):
        if found >= count or position > last:
            break
        if not sub.cursor.is_acknowledged(position):
            found += 1
            yield position
        position = ledger.next_valid_position(position)


async def _close_consumers(topic: PersistentTopic, consumers: list[Consumer]) -> None:
    for consumer in consumers:
        consumer.endpoint.send_frame(proto.encode_command(proto.commands.close_consumer(consumer.consumer_id, -1)))
        await topic.remove_consumer(consumer)
        consumer.endpoint.forget_consumer(consumer.consumer_id)


async def _reset(topic: PersistentTopic, sub: Subscription, position: Position) -> None:
    try:
        to_close = await sub.reset(position)
    except ManagedLedgerError as exc:
        raise PreconditionFailed(f"Unable to reset the cursor: {exc}") from exc
    await _close_consumers(topic, to_close)
