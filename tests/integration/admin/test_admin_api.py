"""The admin HTTP API on the real broker: Pulsar's paths, statuses and the JSON fields tools read."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.metadata_backends("sqlite", "zookeeper")]
V2 = "/admin/v2"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_clusters_tenants_and_namespaces(broker: BrokerProcess) -> None:
    b = broker.web_url
    assert call(b, "GET", V2 + "/clusters") == (200, ["standalone"])
    status, cluster = call(b, "GET", V2 + "/clusters/standalone")
    assert status == 200 and cluster["serviceUrl"].startswith("http://")
    assert call(b, "GET", V2 + "/clusters/nope")[0] == 404
    tenant = _name("t")
    assert call(b, "PUT", f"{V2}/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})[0] == 204
    assert call(b, "PUT", f"{V2}/tenants/{tenant}", {})[0] == 409
    assert call(b, "PUT", f"{V2}/tenants/{_name('t')}", {"allowedClusters": ["nowhere"]})[0] == 412
    assert tenant in call(b, "GET", V2 + "/tenants")[1]
    assert call(b, "GET", f"{V2}/tenants/{tenant}")[1]["allowedClusters"] == ["standalone"]
    ns = f"{tenant}/ns1"
    assert call(b, "PUT", f"{V2}/namespaces/{ns}")[0] == 204
    assert call(b, "PUT", f"{V2}/namespaces/{ns}")[0] == 409
    assert call(b, "PUT", f"{V2}/namespaces/{_name('missing')}/ns")[0] == 404
    assert call(b, "GET", f"{V2}/namespaces/{tenant}") == (200, [ns])
    assert call(b, "DELETE", f"{V2}/tenants/{tenant}")[0] == 409  # it still has a namespace
    assert call(b, "GET", f"{V2}/namespaces/{ns}")[1]["replication_clusters"] == []
    assert call(b, "PUT", f"{V2}/persistent/{ns}/topic-a")[0] == 204
    assert call(b, "DELETE", f"{V2}/namespaces/{ns}")[0] == 409  # not empty
    assert call(b, "DELETE", f"{V2}/namespaces/{ns}?force=true")[0] == 204
    assert call(b, "GET", f"{V2}/namespaces/{ns}")[0] == 404
    assert call(b, "DELETE", f"{V2}/tenants/{tenant}")[0] == 204
    assert call(b, "GET", f"{V2}/tenants/{tenant}")[0] == 404


def test_namespace_policies(broker: BrokerProcess) -> None:
    b, ns = broker.web_url, f"{V2}/namespaces/public/{_name('pol')}"
    assert call(b, "PUT", ns)[0] == 204
    assert call(b, "POST", ns + "/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024})[0] == 204
    assert call(b, "GET", ns + "/retention")[1] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
    assert call(b, "GET", ns)[1]["retention_policies"]["retentionSizeInMB"] == 1024
    assert call(b, "POST", ns + "/messageTTL", 3600)[0] == 204
    assert call(b, "GET", ns + "/messageTTL") == (200, 3600)
    assert call(b, "POST", ns + "/messageTTL", "soon")[0] == 400
    assert call(b, "DELETE", ns + "/messageTTL")[0] == 204
    assert call(b, "GET", ns + "/messageTTL") == (200, None)
    assert call(b, "POST", ns + "/replication", ["standalone"])[0] == 204
    assert call(b, "GET", ns + "/replication") == (200, ["standalone"])
    assert call(b, "POST", ns + "/replication", ["elsewhere"])[0] == 412
    body = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}
    assert call(b, "POST", ns + "/autoTopicCreation", body)[0] == 204
    assert call(b, "GET", ns + "/autoTopicCreation")[1] == body
    assert call(b, "POST", ns + "/autoTopicCreation", {"topicType": "x"})[0] == 400
    assert call(b, "GET", f"{V2}/namespaces/public/{_name('none')}/retention")[0] == 404


def test_topic_lifecycle_and_statuses(broker: BrokerProcess) -> None:
    b, base = broker.web_url, f"{V2}/persistent/public/default"
    plain, parted = _name("plain"), _name("parted")
    assert call(b, "PUT", f"{base}/{plain}")[0] == 204
    assert call(b, "PUT", f"{base}/{plain}")[0] == 409
    assert call(b, "PUT", f"{base}/{parted}/partitions", 3)[0] == 204
    assert call(b, "PUT", f"{base}/{parted}/partitions", 3)[0] == 409
    assert call(b, "PUT", f"{base}/{_name('zero')}/partitions", 0)[0] == 406
    assert call(b, "PUT", f"{base}/{_name('bad')}/partitions", "three")[0] == 400
    assert call(b, "GET", f"{base}/{parted}/partitions") == (200, {"partitions": 3})
    assert call(b, "GET", f"{base}/{plain}/partitions") == (200, {"partitions": 0})
    assert call(b, "POST", f"{base}/{parted}/partitions", 5)[0] == 204
    assert call(b, "POST", f"{base}/{parted}/partitions", 2)[0] == 400
    names = call(b, "GET", base)[1]
    assert f"persistent://public/default/{plain}" in names
    assert {f"persistent://public/default/{parted}-partition-{i}" for i in range(5)} <= set(names)
    assert f"persistent://public/default/{parted}" in call(b, "GET", base + "/partitioned")[1]
    assert call(b, "GET", f"{base}/{_name('ghost')}/stats")[0] == 404
    assert call(b, "GET", f"{V2}/persistent/public/nons/{plain}/stats")[0] == 404
    status, stats = call(b, "GET", f"{base}/{parted}/partitioned-stats?perPartition=true")
    assert status == 200 and stats["metadata"] == {"partitions": 5} and len(stats["partitions"]) == 5
    status, internal = call(b, "GET", f"{base}/{parted}/partitioned-internalStats")
    assert status == 200 and len(internal["partitions"]) == 5
    assert call(b, "POST", f"{base}/{parted}/terminate")[0] == 405
    assert call(b, "DELETE", f"{base}/{parted}")[0] == 409
    assert call(b, "DELETE", f"{base}/{parted}/partitions")[0] == 204
    assert call(b, "GET", f"{base}/{parted}/partitions") == (200, {"partitions": 0})
    assert call(b, "DELETE", f"{base}/{plain}")[0] == 204
    assert call(b, "DELETE", f"{base}/{plain}")[0] == 404


def test_stats_fields_tools_read(broker: BrokerProcess, client: pulsar.Client) -> None:
    b, topic = broker.web_url, _name("stats")
    path = f"{V2}/persistent/public/default/{topic}"
    consumer = client.subscribe(topic, "sub-a", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    status, stats = call(b, "GET", path + "/stats")
    assert status == 200
    assert stats["msgInCounter"] == 5 and stats["bytesInCounter"] > 0 and stats["storageSize"] > 0
    assert stats["publishers"][0]["accessMode"] == "Shared"
    assert stats["publishers"][0]["producerName"] == producer.producer_name()
    assert stats["topicEpoch"] is None and stats["waitingPublishers"] == 0
    sub = stats["subscriptions"]["sub-a"]
    assert sub["type"] == "Shared" and sub["isDurable"] is True and len(sub["consumers"]) == 1
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    status, internal = call(b, "GET", path + "/internalStats")
    assert status == 200 and internal["numberOfEntries"] == 5 and internal["ledgers"]
    assert internal["ledgers"][0]["entries"] >= 1 and ":" in internal["lastConfirmedEntry"]
    assert "sub-a" in internal["cursors"]
    status, last = call(b, "GET", path + "/lastMessageId")
    assert status == 200 and f"{last['ledgerId']}:{last['entryId']}" == internal["lastConfirmedEntry"]
    deadline = time.monotonic() + 10
    while call(b, "GET", path + "/stats")[1]["subscriptions"]["sub-a"]["msgBacklog"] != 0:
        assert time.monotonic() < deadline, "the acknowledgements never reached the broker"
    producer.close()
    exclusive = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    stats = call(b, "GET", path + "/stats")[1]
    assert stats["publishers"][0]["accessMode"] == "Exclusive" and stats["topicEpoch"] == 0
    assert call(b, "GET", path + "/internalStats")[1]["properties"]["pulsar.topic.epoch"] == "0"
    exclusive.close()
    consumer.close()


def test_partitioned_topic_created_by_the_api_serves_the_official_client(
    broker: BrokerProcess, client: pulsar.Client
) -> None:
    topic = _name("ptopic")
    assert call(broker.web_url, "PUT", f"{V2}/persistent/public/default/{topic}/partitions", 4)[0] == 204
    consumer = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = {f"m{i}".encode() for i in range(40)}
    for body in sorted(sent):
        producer.send(body, partition_key=body.decode())
    got = set()
    for _ in range(len(sent)):
        msg = consumer.receive(timeout_millis=10_000)
        got.add(msg.data())
        consumer.acknowledge(msg)
    assert got == sent
    stats = call(broker.web_url, "GET", f"{V2}/persistent/public/default/{topic}/partitioned-stats")[1]
    assert stats["msgInCounter"] == 40 and stats["metadata"]["partitions"] == 4
    producer.close()
    consumer.close()


def test_broker_endpoints(broker: BrokerProcess, client: pulsar.Client) -> None:
    b = broker.web_url
    assert call(b, "GET", V2 + "/brokers/health") == (200, "ok")
    assert call(b, "GET", "/status.html") == (200, "OK")
    topic = _name("bs")
    client.create_producer(topic).send(b"x")
    nested = call(b, "GET", V2 + "/broker-stats/topics")[1]
    assert f"persistent://public/default/{topic}" in nested["public/default"]["0x00000000_0xffffffff"]["persistent"]
    status, body = call(b, "GET", V2 + "/openapi.json")
    assert status == 200 and body["openapi"].startswith("3.")
    assert f"{V2}/persistent/{{tenant}}/{{namespace}}" in body["paths"]
    assert call(b, "GET", V2 + "/no/such/thing")[0] == 404
