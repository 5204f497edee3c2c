"""GET_OR_CREATE_SCHEMA and GET_SCHEMA at the wire (the official Python client does not send the first):
a new schema gets the next version, the same one its version, an incompatible one IncompatibleSchema."""

from __future__ import annotations

import json
import struct

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from tests.component.wire import T, WirePeer

TOPIC = "persistent://public/default/wire-schema"


def avro(*fields: str) -> proto.pb.Schema:
    record = {"type": "record", "name": "R", "fields": [{"name": f, "type": "int"} for f in fields]}
    return proto.pb.Schema(name="R", schema_data=json.dumps(record).encode(), type=proto.pb.Schema.Avro)


def get_or_create(peer: WirePeer, request_id: int, schema: proto.pb.Schema) -> None:
    cmd = T(type=T.GET_OR_CREATE_SCHEMA)
    cmd.getOrCreateSchema.request_id = request_id
    cmd.getOrCreateSchema.topic = TOPIC
    cmd.getOrCreateSchema.schema.CopyFrom(schema)
    peer.send(cmd)


async def test_get_or_create_and_get_schema(standalone: Standalone) -> None:
    peer = await WirePeer.connect(standalone.broker_port)
    try:
        replies = []
        for request_id, schema in enumerate((avro("a"), avro("a"), avro("b")), 1):
            get_or_create(peer, request_id, schema)
            replies.append((await peer.expect(T.GET_OR_CREATE_SCHEMA_RESPONSE)).command.getOrCreateSchemaResponse)
        assert [struct.unpack(">q", r.schema_version)[0] for r in replies[:2]] == [0, 0]
        assert replies[2].error_code == proto.pb.IncompatibleSchema  # FULL: "a" cannot be read as "b"
        cmd = T(type=T.GET_SCHEMA)
        cmd.getSchema.request_id = 9
        cmd.getSchema.topic = TOPIC
        cmd.getSchema.schema_version = struct.pack(">q", 0)
        peer.send(cmd)
        got = (await peer.expect(T.GET_SCHEMA_RESPONSE)).command.getSchemaResponse
        assert got.schema.schema_data == avro("a").schema_data and got.schema.type == proto.pb.Schema.Avro
        cmd.getSchema.request_id, cmd.getSchema.schema_version = 10, struct.pack(">q", 5)
        peer.send(cmd)
        missing = (await peer.expect(T.GET_SCHEMA_RESPONSE)).command.getSchemaResponse
        assert missing.error_code == proto.pb.TopicNotFound
    finally:
        await peer.close()
