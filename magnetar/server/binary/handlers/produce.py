"""Producer commands: PRODUCER, SEND, CLOSE_PRODUCER."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction
from magnetar.broker.errors import AuthorizationError, ChecksumError, NotAllowed, ProducerBusy, ServiceNotReady
from magnetar.broker.names import TopicName
from magnetar.broker.replication import senders
from magnetar.broker.schema import version_bytes
from magnetar.broker.topic.access import Queued
from magnetar.broker.topic.producer import AccessMode, Producer, failed_publish
from magnetar.server.binary.handlers import txn_topic
from magnetar.server.binary.handlers.identity import checked_metadata, checked_name
from magnetar.server.binary.handlers.schema import declared_in
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand


def new_producer(conn: Session, req: proto.pb.CommandProducer, topic_name: TopicName) -> Producer:
    mode = AccessMode(req.producer_access_mode) if req.HasField("producer_access_mode") else AccessMode.SHARED
    chosen = req.producer_name if req.HasField("producer_name") else ""
    name = chosen or conn.broker.producer_names.next()
    config = conn.broker.config
    checked_name(name, "Producer", config.max_client_name_length)
    metadata = checked_metadata(req.metadata, "Producer", config.max_producer_metadata_size)
    return Producer(
        endpoint=conn,
        producer_id=req.producer_id,
        name=name,
        topic_name=str(topic_name),
        partition=topic_name.partition_index,
        epoch=req.epoch,
        access_mode=mode,
        user_provided_name=req.user_provided_producer_name,
        created_ms=conn.clock.now_ms(),
        metadata=metadata,
    )


async def on_producer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.producer
    topic_name = TopicName.parse(req.topic)
    await conn.auth.require(topic_name, AuthAction.PRODUCE)
    if req.producer_name.startswith(senders.REPLICATOR_PREFIX):
        await _require_replicator(conn, req.producer_name)
    existing = conn.producers.get(req.producer_id)
    if existing is not None:
        if existing.topic_name != str(topic_name) or not existing.topic_epoch_known:
            raise ProducerBusy(f"Producer id {req.producer_id} is already used on this connection")
        conn.send_frame(proto.encode_command(proto.commands.producer_success(
            req.request_id, existing.name, -1, topic_epoch=existing.topic_epoch)))
        return
    topic = await conn.broker.registry.get(topic_name, create=True)
    refusal = await conn.broker.policies.producer_refusal(topic)
    if refusal is not None:  # backlog quota: producer_request_hold (retriable) or producer_exception
        raise refusal
    version = await conn.broker.schemas.for_producer(topic_name, declared_in(req))
    schema_version = version_bytes(version) if version is not None else None
    producer = new_producer(conn, req, topic_name)
    name = producer.name
    if not conn.is_open or req.producer_id in conn.producers:
        raise ProducerBusy(f"Producer id {req.producer_id} is already used on this connection")
    conn.producers[req.producer_id] = producer  # from here on, a disconnect releases it
    try:
        admission = await topic.admit_producer(producer, req.topic_epoch if req.HasField("topic_epoch") else None)
    except BaseException:
        conn.producers.pop(req.producer_id, None)
        raise
    last_seq = topic.last_sequence_id(name)
    if isinstance(admission, Queued):
        conn.send_frame(proto.encode_command(
            proto.commands.producer_success(req.request_id, name, last_seq, producer_ready=False)))
        try:
            epoch = await admission.promoted
        except BaseException:
            conn.producers.pop(req.producer_id, None)
            raise
        topic.promoted(producer)
        conn.send_frame(proto.encode_command(
            proto.commands.producer_success(req.request_id, name, last_seq, topic_epoch=epoch,
                                            schema_version=schema_version)))
        return
    if not conn.is_open or conn.producers.get(req.producer_id) is not producer:
        topic.remove_producer(producer)
        return
    conn.send_frame(proto.encode_command(
        proto.commands.producer_success(req.request_id, name, last_seq, topic_epoch=admission.topic_epoch,
                                        schema_version=schema_version)))


async def _require_replicator(conn: Session, name: str) -> None:
    """The ``pulsar.repl`` prefix is a replicator's (see ``broker.replication.senders``)."""
    refusal = await conn.broker.replication.replicator_name_refusal(name)
    if refusal is not None:
        raise NotAllowed(refusal)
    if not conn.auth.is_super_user():
        raise AuthorizationError(f"Role {conn.auth.role!r} may not create replicator producer {name!r}")


def on_send(conn: Session, cmd: proto.pb.BaseCommand, payload: memoryview | None) -> None:
    req = cmd.send
    if payload is None:
        raise proto.MalformedFrame("SEND without a payload")
    producer = conn.producers.get(req.producer_id)
    highest = req.highest_sequence_id if req.HasField("highest_sequence_id") else None
    if producer is None:
        _fail(conn, req.producer_id, req.sequence_id, NotAllowed("Producer is not connected"))
        return
    if producer.closing:  # the broker is closing it: the client resends this where it reconnects
        return
    topic = conn.broker.registry.loaded.get(producer.topic_name)
    if topic is None or producer.closed:
        producer.track(req.sequence_id, highest, failed_publish(ServiceNotReady("Producer is closed")))
        return
    if not producer.ready:  # PIP-68: queued for exclusive access, it publishes nothing until promoted
        refused = NotAllowed("Producer is not ready: it is waiting for exclusive access to the topic")
        producer.track(req.sequence_id, highest, failed_publish(refused))
        return
    try:
        parsed = proto.parse_send_payload(payload)
    except proto.ChecksumMismatch as exc:
        producer.track(req.sequence_id, highest, failed_publish(ChecksumError(str(exc))))
        return
    forged = senders.send_refusal(producer.name, parsed.metadata)
    if forged is not None:  # replicated_from or a marker from a client: only replicators send those
        producer.track(req.sequence_id, highest, failed_publish(NotAllowed(forged)))
        return
    txn_refusal = txn_topic.send_refusal(conn, req, parsed.metadata, producer.topic_name)
    if txn_refusal is not None:  # a transactional SEND the coordinator does not allow here
        producer.track(req.sequence_id, highest, failed_publish(txn_refusal))
        return
    num_messages = req.num_messages if req.HasField("num_messages") else 1
    try:
        proto.check_send_metadata(
            parsed.metadata, num_messages=num_messages, payload_bytes=len(proto.entry_payload(parsed.entry)),
            max_message_size=conn.max_message_size,
            chunked_message_bytes_max=conn.broker.config.max_chunked_message_bytes,
        )
    except proto.InvalidMessageMetadata as exc:  # refused before storage: no consumer ever reads it
        producer.track(req.sequence_id, highest, failed_publish(NotAllowed(f"Invalid message: {exc}")))
        return
    conn.publish_started()
    future = topic.publish(producer, req.sequence_id, highest, num_messages, parsed.entry, parsed.metadata)
    future.add_done_callback(conn.publish_finished)


def _fail(conn: Session, producer_id: int, sequence_id: int, exc: NotAllowed) -> None:
    cmd = proto.commands.send_error(producer_id, sequence_id, exc.server_error, str(exc))
    conn.send_frame(proto.encode_command(cmd))


async def on_close_producer(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.close_producer
    producer = conn.producers.get(req.producer_id)
    if producer is not None:
        producer.closed = True
        await producer.wait_pending()
        await conn.detach_producer(producer)
    conn.send_frame(proto.encode_command(proto.commands.success(req.request_id)))


HANDLERS: dict[int, Handler] = {
    T.PRODUCER: on_producer,
    T.SEND: on_send,
    T.CLOSE_PRODUCER: on_close_producer,
}
