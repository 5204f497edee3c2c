"""``http://`` service URLs (HTTP lookup and partitioned metadata, as the official client uses them) and
``advertisedListeners`` / ``internalListenerName``: a client's ``listener_name`` gets that listener's URL."""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    port = free_port()
    listeners = f"internal:pulsar://127.0.0.1:{port},external:pulsar://localhost:{port},broken:pulsar://127.0.0.1:1"
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("listeners")), extra_args=(
        "--set", f"advertisedListeners={listeners}", "--set", "internalListenerName=internal"))
    proc.port = port
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


def client(url: str, **options: object) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=5, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
                         **options)


def test_http_service_url_produces_and_consumes_partitioned(broker: BrokerProcess) -> None:
    topic = f"http-lookup-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", 3)[0] == 204
    c = client(f"http://localhost:{broker.web_port}")
    try:
        assert len(c.get_topic_partitions(topic)) == 3  # partitioned metadata over HTTP
        consumer = c.subscribe(topic, "s")
        producer = c.create_producer(topic)
        for i in range(6):
            producer.send(f"m{i}".encode(), partition_key=str(i))
        assert sorted(consumer.receive(TIMEOUT_MS).data() for _ in range(6)) == [f"m{i}".encode() for i in range(6)]
    finally:
        c.close()


def test_http_lookup_answers_per_listener(broker: BrokerProcess) -> None:
    path = "/lookup/v2/topic/persistent/public/default/any-topic"
    status, default = call(broker.web_url, "GET", path)
    assert status == 200 and default["brokerUrl"] == f"pulsar://127.0.0.1:{broker.port}"  # the internal listener
    status, external = call(broker.web_url, "GET", path + "?listenerName=external")
    assert status == 200 and external["brokerUrl"] == external["nativeUrl"] == f"pulsar://localhost:{broker.port}"
    request = urllib.request.Request(broker.web_url + path, headers={"X-Pulsar-ListenerName": "broken"})
    with urllib.request.urlopen(request, timeout=15) as answer:
        assert json.loads(answer.read())["brokerUrl"] == "pulsar://127.0.0.1:1"
    status, body = call(broker.web_url, "GET", path + "?listenerName=nope")
    assert status == 503 and "nope" in body["reason"]
    assert call(broker.web_url, "GET", "/lookup/v2/topic/persistent/no-tenant/no-ns/t")[0] == 404


def test_listener_name_picks_the_url(broker: BrokerProcess) -> None:
    """Over pulsar:// (pulsar-client 3.13's HTTP lookup sends no listener name: HTTP is tested above)."""
    url = broker.url
    topic = f"listener-{uuid.uuid4().hex[:6]}"
    external = client(url, listener_name="external")
    try:
        consumer = external.subscribe(topic, "s")
        external.create_producer(topic).send(b"via external")
        assert consumer.receive(TIMEOUT_MS).data() == b"via external"
    finally:
        external.close()
    for name in ("broken", "nope"):  # a listener that points nowhere, and one the broker does not have
        c = pulsar.Client(url, listener_name=name, operation_timeout_seconds=2,
                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            with pytest.raises(pulsar.PulsarException):
                c.create_producer(topic)
        finally:
            c.close()
