"""Commands on non-persistent topics: the same commands as for persistent ones, routed here by the topic's
domain (PRODUCER, SUBSCRIBE) or by the producer or consumer they name, and GET_TOPICS_OF_NAMESPACE with its
mode (PERSISTENT / NON_PERSISTENT / ALL, as regex subscriptions ask). ``route`` wraps the dispatch table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction
from magnetar.broker.errors import ChecksumError, ConsumerBusy, NotAllowed, ProducerBusy, TopicNotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.nonpersistent import NonPersistentTopic
from magnetar.broker.schema import version_bytes
from magnetar.broker.topic.producer import failed_publish
from magnetar.server.binary.handlers.consume import new_consumer
from magnetar.server.binary.handlers.produce import new_producer
from magnetar.server.binary.handlers.schema import declared_in
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
PREFIX = "non-persistent://"
MODE_PERSISTENT, MODE_NON_PERSISTENT, MODE_ALL = 0, 1, 2


async def _topic(conn: Session, name: TopicName) -> NonPersistentTopic:
    if not await conn.broker.catalog.namespace_exists(name.namespace_name):
        raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
    return conn.broker.non_persistent.get_or_create(name)


async def on_producer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.producer
    name = TopicName.parse(req.topic)
    await conn.auth.require(name, AuthAction.PRODUCE)
    if req.producer_id in conn.producers:
        raise ProducerBusy(f"Producer id {req.producer_id} is already used on this connection")
    topic = await _topic(conn, name)
    version = await conn.broker.schemas.for_producer(name, declared_in(req))
    producer = new_producer(conn, req, name)
    topic.add_producer(producer)
    conn.producers[req.producer_id] = producer
    conn.send_frame(proto.encode_command(proto.commands.producer_success(
        req.request_id, producer.name, -1, schema_version=version_bytes(version) if version is not None else None)))


def on_send(conn: Session, cmd: proto.pb.BaseCommand, payload: memoryview | None) -> None:
    req = cmd.send
    if payload is None:
        raise proto.MalformedFrame("SEND without a payload")
    producer = conn.producers[req.producer_id]
    highest = req.highest_sequence_id if req.HasField("highest_sequence_id") else None
    topic = conn.broker.non_persistent.get(producer.topic_name)
    if topic is None or producer.closed:
        producer.track(req.sequence_id, highest, failed_publish(NotAllowed("Producer is closed")))
        return
    try:
        parsed = proto.parse_send_payload(payload)
    except proto.ChecksumMismatch as exc:
        producer.track(req.sequence_id, highest, failed_publish(ChecksumError(str(exc))))
        return
    num = req.num_messages if req.HasField("num_messages") else 1
    topic.publish(producer, req.sequence_id, highest, num, parsed.entry, parsed.metadata)


async def on_close_producer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.close_producer
    producer = conn.producers.pop(req.producer_id)
    topic = conn.broker.non_persistent.get(producer.topic_name)
    if topic is not None:
        topic.remove_producer(producer)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_subscribe(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.subscribe
    name = TopicName.parse(req.topic)
    await conn.auth.require(name, AuthAction.CONSUME, req.subscription)
    if req.consumer_id in conn.consumers:
        raise ConsumerBusy(f"Consumer id {req.consumer_id} is already used on this connection")
    if not req.subscription:
        raise NotAllowed("Invalid subscription name")
    topic = await _topic(conn, name)
    await conn.broker.schemas.for_consumer(name, declared_in(req), idle=topic.idle)
    consumer = new_consumer(conn, req, name)
    topic.subscribe(consumer)
    conn.consumers[req.consumer_id] = consumer
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


def on_flow(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    conn.consumers[cmd.flow.consumer_id].add_permits(cmd.flow.messagePermits)


def on_ignored(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    """ACK and REDELIVER: nothing is kept, so nothing to acknowledge or give back."""


async def on_close_consumer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.close_consumer
    consumer = conn.consumers.pop(req.consumer_id)
    topic = conn.broker.non_persistent.get(consumer.topic_name)
    if topic is not None:
        topic.remove_consumer(consumer)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_unsubscribe(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.unsubscribe
    consumer = conn.consumers[req.consumer_id]
    topic = conn.broker.non_persistent.get(consumer.topic_name)
    if topic is not None:
        topic.unsubscribe(consumer)
    conn.consumers.pop(req.consumer_id, None)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


async def on_unsupported(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    what = "Seek" if cmd.type == T.SEEK else "GetLastMessageId"
    raise NotAllowed(f"{what} is not supported on a non-persistent topic")


async def on_get_topics(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.getTopicsOfNamespace
    ns = NamespaceName.parse(req.namespace)
    await conn.auth.require_namespace(ns)
    mode = req.mode if req.HasField("mode") else MODE_PERSISTENT
    topics = await conn.broker.catalog.list_topics(ns) if mode != MODE_NON_PERSISTENT else []
    if mode != MODE_PERSISTENT:
        topics += conn.broker.non_persistent.names(ns)
    conn.send_frame(proto.encode_command(proto.commands.get_topics_of_namespace_response(req.request_id, topics)))


Predicate = Callable[["Session", proto.pb.BaseCommand], bool]


def _named_topic(field: str) -> Predicate:
    return lambda conn, cmd: str(getattr(cmd, field).topic).startswith(PREFIX)


def _producer_of(field: str) -> Predicate:
    def check(conn: Session, cmd: proto.pb.BaseCommand) -> bool:
        producer = conn.producers.get(getattr(cmd, field).producer_id)
        return producer is not None and producer.topic_name.startswith(PREFIX)
    return check


def _consumer_of(field: str) -> Predicate:
    def check(conn: Session, cmd: proto.pb.BaseCommand) -> bool:
        consumer = conn.consumers.get(getattr(cmd, field).consumer_id)
        return consumer is not None and consumer.topic_name.startswith(PREFIX)
    return check


ROUTES: dict[int, tuple[Predicate, Handler]] = {
    T.PRODUCER: (_named_topic("producer"), on_producer),
    T.SEND: (_producer_of("send"), on_send),
    T.CLOSE_PRODUCER: (_producer_of("close_producer"), on_close_producer),
    T.SUBSCRIBE: (_named_topic("subscribe"), on_subscribe),
    T.FLOW: (_consumer_of("flow"), on_flow),
    T.ACK: (_consumer_of("ack"), on_ignored),
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: (_consumer_of("redeliverUnacknowledgedMessages"), on_ignored),
    T.CLOSE_CONSUMER: (_consumer_of("close_consumer"), on_close_consumer),
    T.UNSUBSCRIBE: (_consumer_of("unsubscribe"), on_unsubscribe),
    T.SEEK: (_consumer_of("seek"), on_unsupported),
    T.GET_LAST_MESSAGE_ID: (_consumer_of("getLastMessageId"), on_unsupported),
}


def _either(predicate: Predicate, here: Handler, persistent: Handler) -> Handler:
    def handler(conn: Session, cmd: proto.pb.BaseCommand,
                payload: memoryview | None) -> Awaitable[None] | None:
        return (here if predicate(conn, cmd) else persistent)(conn, cmd, payload)
    return handler


def route(table: dict[int, Handler]) -> dict[int, Handler]:
    """The dispatch table with commands on non-persistent topics sent here."""
    out = dict(table)
    for kind, (predicate, handler) in ROUTES.items():
        if kind in out:
            out[kind] = _either(predicate, handler, out[kind])
    out[T.GET_TOPICS_OF_NAMESPACE] = on_get_topics
    return out
