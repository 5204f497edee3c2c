"""Consumer commands: SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES, SEEK, UNSUBSCRIBE,
CLOSE_CONSUMER, GET_LAST_MESSAGE_ID.

Commands for a consumer id this connection does not know are ignored (FLOW, ACK, REDELIVER have no reply)
or answered with an error (those with a request id): a confused client never harms anyone else.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction
from magnetar.broker.errors import ConsumerBusy, ConsumerNotFound, NotAllowed
from magnetar.broker.names import TopicName, valid_subscription_name
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.server.binary.handlers import txn_topic
from magnetar.server.binary.handlers.identity import checked_metadata, checked_name
from magnetar.server.binary.handlers.schema import declared_in, topic_idle
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
READER_SEEKS_MAX = 10_000  # pending reader seeks per topic (each is popped when the reader resubscribes)


def _position(mid: proto.pb.MessageIdData) -> Position:
    return Position(proto.ids.signed(mid.ledgerId), proto.ids.signed(mid.entryId))


def _start_position(topic: PersistentTopic, mid: proto.pb.MessageIdData) -> Position:
    """Where a reader (or a seek) starts: the given entry itself, or the sentinels' ends."""
    ledger = topic.ledger
    if proto.ids.is_earliest(mid):
        return ledger.next_valid_position(ledger.first_position())
    if proto.ids.is_latest(mid):
        return ledger.next_valid_position(ledger.last_confirmed)
    pos = _position(mid)
    if pos.ledger_id < 0 or pos.entry_id < 0:
        return ledger.next_valid_position(ledger.first_position())
    return pos


def _found(conn: Session, consumer_id: int) -> tuple[Consumer, PersistentTopic, Subscription] | None:
    consumer = conn.consumers.get(consumer_id)
    if consumer is None:
        return None
    topic = conn.broker.registry.loaded.get(consumer.topic_name)
    if topic is None:
        return None
    sub = topic.subscriptions.get(consumer.subscription_name)
    if sub is None:
        return None
    return consumer, topic, sub


def _required(conn: Session, consumer_id: int) -> tuple[Consumer, PersistentTopic, Subscription]:
    found = _found(conn, consumer_id)
    if found is None:
        raise ConsumerNotFound(f"Consumer {consumer_id} not found on this connection")
    return found


def _key_shared_options(req: proto.pb.CommandSubscribe) -> dict[str, Any]:
    if req.subType != SubType.KEY_SHARED or not req.HasField("keySharedMeta"):
        return {}
    meta = req.keySharedMeta
    return {
        "key_shared_mode": int(meta.keySharedMode),
        "hash_ranges": tuple((r.start, r.end) for r in meta.hashRanges),
        "allow_out_of_order": bool(meta.allowOutOfOrderDelivery),
    }


def new_consumer(conn: Session, req: proto.pb.CommandSubscribe, topic_name: TopicName) -> Consumer:
    config = conn.broker.config
    checked_name(req.consumer_name, "Consumer", config.max_client_name_length)
    metadata = checked_metadata(req.metadata, "Consumer", config.max_consumer_metadata_size)
    return Consumer(
        endpoint=conn,
        consumer_id=req.consumer_id,
        name=req.consumer_name,
        topic_name=str(topic_name),
        subscription_name=req.subscription,
        sub_type=req.subType,
        priority_level=req.priority_level,
        partition=topic_name.partition_index,
        created_ms=conn.clock.now_ms(),
        metadata=metadata,
        read_compacted=req.read_compacted,
        max_permits=conn.broker.config.max_consumer_permits,
        max_unacked_messages=(
            conn.broker.config.max_unacked_messages_per_consumer
            if req.subType in (SubType.SHARED, SubType.KEY_SHARED) else 0
        ),
        **_key_shared_options(req),
    )


async def on_subscribe(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.subscribe
    if req.consumer_id in conn.consumers:
        existing = conn.consumers[req.consumer_id]
        if existing.subscription_name == req.subscription:
            conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))
            return
        raise ConsumerBusy(f"Consumer id {req.consumer_id} is already used on this connection")
    if not valid_subscription_name(req.subscription):
        raise NotAllowed("Invalid subscription name")
    if req.subType not in SubType.LABELS:
        raise NotAllowed(f"Unknown subscription type {req.subType}")
    topic_name = TopicName.parse(req.topic)
    await conn.auth.require(topic_name, AuthAction.CONSUME, req.subscription)
    create = req.force_topic_creation if req.HasField("force_topic_creation") else True
    topic = await conn.broker.registry.get(topic_name, create=create)
    await conn.broker.schemas.for_consumer(topic_name, declared_in(req), idle=topic_idle(topic))
    durable = req.durable if req.HasField("durable") else True
    start = _start_position(topic, req.start_message_id) if req.HasField("start_message_id") else None
    initial = InitialPosition.EARLIEST if req.initialPosition == 1 else InitialPosition.LATEST
    consumer = new_consumer(conn, req, topic_name)
    if not conn.is_open or req.consumer_id in conn.consumers:
        raise ConsumerBusy("Connection closed or consumer id reused while subscribing")
    cap = conn.broker.config.max_consumers_per_subscription
    joining = topic.subscriptions.get(req.subscription)
    if cap > 0 and joining is not None and len(joining.consumers) >= cap:
        raise ConsumerBusy("Subscription reached max consumers limit")  # Pulsar's words (maxConsumersPerSubscription)
    sub = await topic.subscribe(consumer, durable=durable, initial_position=initial, start=start)
    await conn.broker.replicated_subscriptions.subscribed(topic, sub, req.replicate_subscription_state)
    if not conn.is_open:
        await topic.remove_consumer(consumer)
        return
    conn.consumers[req.consumer_id] = consumer
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


def on_flow(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    found = _found(conn, cmd.flow.consumer_id)
    if found is not None:
        consumer, _topic, sub = found
        sub.flow(consumer, cmd.flow.messagePermits)


def on_ack(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None] | None:
    req = cmd.ack
    found = _found(conn, req.consumer_id)
    if txn_topic.is_txn_ack(req):  # held in the pending-ack store, answered once durable
        return txn_topic.on_txn_ack(conn, req, found)
    if found is not None:
        consumer, _topic, sub = found
        sub.acknowledge(consumer, req.ack_type, list(req.message_id))
        if req.HasField("request_id") and sub.durable:
            return _answer_when_durable(conn, req, sub)
    if req.HasField("request_id"):
        conn.send_frame(proto.encode_command(proto.commands.ack_response(req.consumer_id, req.request_id)))
    return None


async def _answer_when_durable(conn: Session, req: proto.pb.CommandAck, sub: Subscription) -> None:
    """An ack receipt promises the ack survives a crash: answer once the cursor holding it is written
    (concurrent receipts share one write), or with PersistenceError if it could not be."""
    try:
        await sub.cursor.flush()
    except ManagedLedgerError as exc:
        answer = proto.commands.ack_response(req.consumer_id, req.request_id,
                                             code=proto.ServerErrorCode.PersistenceError,
                                             message=f"ack not persisted: {exc}")
    else:
        answer = proto.commands.ack_response(req.consumer_id, req.request_id)
    conn.send_frame(proto.encode_command(answer))


def on_redeliver(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.redeliverUnacknowledgedMessages
    found = _found(conn, req.consumer_id)
    if found is not None:
        consumer, _topic, sub = found
        sub.redeliver(consumer, list(req.message_ids))


async def on_close_consumer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.close_consumer
    consumer = conn.consumers.get(req.consumer_id)
    if consumer is not None:
        await conn.detach_consumer(consumer)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_unsubscribe(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.unsubscribe
    consumer, topic, _sub = _required(conn, req.consumer_id)
    await topic.unsubscribe(consumer)
    conn.consumers.pop(req.consumer_id, None)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_seek(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.seek
    _consumer, topic, sub = _required(conn, req.consumer_id)
    if req.HasField("message_id"):
        position = _start_position(topic, req.message_id)
    elif req.HasField("message_publish_time"):
        position = await topic.position_for_publish_time(req.message_publish_time)
    else:
        raise NotAllowed("SEEK needs a message id or a publish time")
    to_close = await sub.reset(position)
    if not sub.durable:
        topic.remember_reader_seek(sub.name, position, READER_SEEKS_MAX)
    for c in to_close:
        # the client reconnects each consumer with the same id and reads from the new position
        c.endpoint.send_frame(proto.encode_command(proto.commands.close_consumer(c.consumer_id, -1)))
        await topic.remove_consumer(c)
        c.endpoint.forget_consumer(c.consumer_id)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_get_last_message_id(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.getLastMessageId
    consumer, topic, sub = _required(conn, req.consumer_id)
    last, batch_index = await topic.last_message_id()
    if consumer.read_compacted and topic.compacted is not None:
        last, batch_index = await topic.compacted.last_message_id(last, batch_index)
    mark_delete = sub.cursor.mark_delete_position
    conn.send_frame(
        proto.encode_command(
            proto.commands.get_last_message_id_response(
                req.request_id,
                proto.ids.message_id(
                    last.ledger_id, last.entry_id, partition=consumer.partition, batch_index=batch_index
                ),
                proto.ids.message_id(mark_delete.ledger_id, mark_delete.entry_id),
            )
        )
    )


HANDLERS: dict[int, Handler] = {
    T.SUBSCRIBE: on_subscribe,
    T.FLOW: on_flow,
    T.ACK: on_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: on_redeliver,
    T.CLOSE_CONSUMER: on_close_consumer,
    T.UNSUBSCRIBE: on_unsubscribe,
    T.SEEK: on_seek,
    T.GET_LAST_MESSAGE_ID: on_get_last_message_id,
}
