"""The schema registry as the official client uses it: versions registered by producers and stamped on
messages, a consumer decoding each message with its writer's schema (GET_SCHEMA by version), refusals with
IncompatibleSchema, the namespace switches, AUTO_CONSUME / AUTO_PUBLISH, and schemas after a restart."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import _pulsar
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, Schema, String, StringSchema

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = [pytest.mark.integration, pytest.mark.metadata_backends("sqlite", "zookeeper")]

TIMEOUT_MS = 10_000


def user(**fields: Any) -> type[Record]:
    """A record class named ``User`` (versions of one record keep its name, as Avro resolution needs)."""
    return type("User", (Record,), fields)


V0 = user(name=String(required_default=True))
V1 = user(age=Integer(required_default=True), name=String(required_default=True))  # a field before name
OTHER = user(id=Integer(required=True))


class AutoConsume(Schema):  # type: ignore[misc]
    """The C++ client's AUTO_CONSUME: declare nothing, accept what the topic has (payload as bytes)."""

    def __init__(self) -> None:
        super().__init__(bytes, _pulsar.SchemaType.AUTO_CONSUME, None, "AUTO_CONSUME")

    def encode(self, obj: bytes) -> bytes:
        return obj

    def decode(self, data: bytes) -> bytes:
        return data


class AutoPublish(AutoConsume):
    """AUTO_PUBLISH: the producer takes the topic's schema from the broker at creation."""

    def __init__(self) -> None:
        Schema.__init__(self, bytes, _pulsar.SchemaType.AUTO_PUBLISH, None, "AUTO_PUBLISH")


def version(msg: pulsar.Message) -> int:
    raw = msg.schema_version()
    return int(struct.unpack(">q", raw.encode("latin-1") if isinstance(raw, str) else raw)[0])


def topic() -> str:
    return f"schema-{uuid.uuid4().hex[:8]}"


def namespace(broker: BrokerProcess, **policies: Any) -> str:
    ns = f"public/schema-{uuid.uuid4().hex[:8]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    for path, value in policies.items():
        method = "PUT" if path == "schemaCompatibilityStrategy" else "POST"
        assert call(broker.web_url, method, f"/admin/v2/namespaces/{ns}/{path}", value)[0] == 204
    return ns


def test_versions_on_messages_and_decoding_by_writer_schema(client: pulsar.Client) -> None:
    name = topic()
    consumer = client.subscribe(name, "s", schema=AvroSchema(V0))
    first = client.create_producer(name, schema=AvroSchema(V0))
    first.send(V0(name="ada"))
    second = client.create_producer(name, schema=AvroSchema(V1))  # FULL: a nullable field with a default
    second.send(V1(age=36, name="grace"))
    m0, m1 = consumer.receive(TIMEOUT_MS), consumer.receive(TIMEOUT_MS)
    assert (version(m0), version(m1)) == (0, 1)
    assert (m0.value().name, m1.value().name) == ("ada", "grace")  # v1 data read through v1's schema
    info = client._client.get_schema_info(f"persistent://public/default/{name}", 1)
    assert info.schema_type() == _pulsar.SchemaType.AVRO and '"age"' in info.schema()
    again = client.create_producer(name, schema=AvroSchema(V0))  # an existing version: no new one
    again.send(V0(name="x"))
    assert version(consumer.receive(TIMEOUT_MS)) == 0


def test_incompatible_producer_and_consumer_are_refused(client: pulsar.Client) -> None:
    name = topic()
    client.create_producer(name, schema=AvroSchema(V0)).close()
    for schema in (AvroSchema(OTHER), StringSchema(), JsonSchema(OTHER)):
        with pytest.raises(Exception, match="IncompatibleSchema"):
            client.create_producer(name, schema=schema)
    with pytest.raises(Exception, match="IncompatibleSchema"):
        client.subscribe(name, "s", schema=AvroSchema(OTHER))
    client.create_producer(name).close()  # no schema declared: allowed unless validation is enforced


def test_namespace_switches_auto_update_and_validation(client: pulsar.Client, broker: BrokerProcess) -> None:
    ns = namespace(broker, isAllowAutoUpdateSchema=False, schemaValidationEnforced=True)
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/isAllowAutoUpdateSchema") == (200, False)
    local = topic()
    name = f"persistent://{ns}/{local}"
    with pytest.raises(Exception, match="IncompatibleSchema"):  # no version yet, and clients may not add one
        client.create_producer(name, schema=AvroSchema(V0))
    payload = {"type": "AVRO", "schema": AvroSchema(V0).schema_info().schema(), "properties": {}}
    assert call(broker.web_url, "POST", f"/admin/v2/schemas/{ns}/{local}/schema", payload)[0] == 200
    client.create_producer(name, schema=AvroSchema(V0)).close()  # the uploaded version
    with pytest.raises(Exception, match="IncompatibleSchema"):
        client.create_producer(name, schema=AvroSchema(V1))  # compatible, but auto update is off
    with pytest.raises(Exception, match="IncompatibleSchema"):
        client.create_producer(name)  # validation enforced: a schema topic needs a schema


def test_auto_consume_and_auto_publish(client: pulsar.Client) -> None:
    name = topic()
    typed = client.create_producer(name, schema=JsonSchema(V0))
    consumer = client.subscribe(name, "auto", schema=AutoConsume())  # never refused: it adopts the topic's
    typed.send(V0(name="typed"))
    msg = consumer.receive(TIMEOUT_MS)
    assert version(msg) == 0 and b'"typed"' in msg.data()
    # pulsar-client 3.13's AUTO_PUBLISH declares no schema on PRODUCER: accepted like a schemaless producer
    producer = client.create_producer(name, schema=AutoPublish())
    producer.send(JsonSchema(V0).encode(V0(name="auto")))
    assert b'"auto"' in consumer.receive(TIMEOUT_MS).data()


def test_schemas_survive_restart(fresh_broker: BrokerProcess) -> None:
    name = topic()
    c = make_client(fresh_broker.url)
    try:
        c.create_producer(name, schema=AvroSchema(V0)).close()
        c.create_producer(name, schema=AvroSchema(V1)).close()
    finally:
        c.close()
    fresh_broker.restart()
    status, body = call(fresh_broker.web_url, "GET", f"/admin/v2/schemas/public/default/{name}/schemas")
    assert status == 200 and [v["version"] for v in body["getSchemaResponses"]] == [0, 1]
    c = make_client(fresh_broker.url)
    try:
        producer = c.create_producer(name, schema=AvroSchema(V1))
        consumer = c.subscribe(name, "s", schema=AvroSchema(V1), initial_position=pulsar.InitialPosition.Earliest)
        producer.send(V1(age=1, name="after"))
        assert version(consumer.receive(TIMEOUT_MS)) == 1  # the stored version, not a new one
    finally:
        c.close()


def test_pulsars_broker_conf_key_enforces_schema_validation(tmp_path: Path) -> None:
    """``isSchemaValidationEnforced`` in a broker.conf (Pulsar's spelling) refuses schemaless producers."""
    conf = tmp_path / "broker.conf"
    conf.write_text("# as in Pulsar's broker.conf\nisSchemaValidationEnforced=true\n", encoding="utf-8")
    broker = BrokerProcess(tmp_path / "data", extra_args=("--config", str(conf))).start()
    try:
        client = make_client(broker.url)
        try:
            name = topic()
            client.create_producer(name, schema=AvroSchema(V0)).close()
            with pytest.raises(Exception, match="IncompatibleSchema"):
                client.create_producer(name)  # no schema declared on a topic with one
        finally:
            client.close()
    finally:
        broker.kill()
