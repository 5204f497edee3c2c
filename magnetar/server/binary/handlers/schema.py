"""Schema commands: GET_SCHEMA (latest or by version, as clients fetch a message's writer schema) and
GET_OR_CREATE_SCHEMA, plus the wire <-> registry conversions the PRODUCER and SUBSCRIBE handlers use."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from magnetar.broker.schema import SchemaInfo, StoredSchema, version_bytes
from magnetar.broker.schema.types import version_of
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand


def declared(schema: proto.pb.Schema) -> SchemaInfo:
    return SchemaInfo(int(schema.type), bytes(schema.schema_data), {kv.key: kv.value for kv in schema.properties},
                      schema.name)


def declared_in(req: proto.pb.CommandProducer | proto.pb.CommandSubscribe) -> SchemaInfo | None:
    return declared(req.schema) if req.HasField("schema") else None


def wire_schema(stored: StoredSchema, name: str) -> proto.pb.Schema:
    schema = proto.pb.Schema(name=name, schema_data=stored.info.data, type=stored.info.type)  # type: ignore[arg-type]
    for key, value in sorted(stored.info.properties.items()):
        schema.properties.add(key=key, value=value)
    return schema


def topic_idle(topic: PersistentTopic) -> bool:
    """Nobody attached and nothing stored: a consumer's schema may become the topic's first one."""
    attached = topic.producers or any(sub.consumers for sub in topic.subscriptions.values())
    return not attached and topic.ledger.number_of_entries() == 0


def _code(exc: BrokerError) -> int:
    return int(getattr(exc, "server_error", proto.ServerErrorCode.UnknownError))


async def on_get_schema(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.getSchema
    reply = T(type=T.GET_SCHEMA_RESPONSE)
    r = reply.getSchemaResponse
    r.request_id = req.request_id
    try:
        topic = TopicName.parse(req.topic)
        await conn.auth.require_lookup(topic, "GetSchema")
        version = version_of(req.schema_version) if req.HasField("schema_version") else None
        stored = await conn.broker.schemas.get(topic, version)
    except BrokerError as exc:
        r.error_code = _code(exc)  # type: ignore[assignment]
        r.error_message = str(exc)
    else:
        r.schema.CopyFrom(wire_schema(stored, topic.local_name))
        r.schema_version = version_bytes(stored.version)
    conn.send_frame(proto.encode_command(reply))


async def on_get_or_create_schema(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.getOrCreateSchema
    reply = T(type=T.GET_OR_CREATE_SCHEMA_RESPONSE)
    r = reply.getOrCreateSchemaResponse
    r.request_id = req.request_id
    try:
        topic = TopicName.parse(req.topic)
        await conn.auth.require(topic, AuthAction.PRODUCE)  # it may register a new version
        version = await conn.broker.schemas.add(topic, declared(req.schema))
    except BrokerError as exc:
        r.error_code = _code(exc)  # type: ignore[assignment]
        r.error_message = str(exc)
    else:
        r.schema_version = version_bytes(version)
    conn.send_frame(proto.encode_command(reply))


HANDLERS: dict[int, Handler] = {
    T.GET_SCHEMA: on_get_schema,
    T.GET_OR_CREATE_SCHEMA: on_get_or_create_schema,
}
