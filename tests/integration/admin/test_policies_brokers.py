"""Admin gaps against the real broker: deduplication policies (namespace and topic) acting on dedup,
backlog quotas refusing producers (hold / exception) and the quota monitor closing producers, topic-level
retention and TTL, effective namespace values, message reads, lookup, namespace unload, the broker endpoints,
and pulsar-admin style printing of peeked messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

import magnetar
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
POLL_S = 15.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("policies")),
                         extra_args=("--set", "backlogQuotaCheckIntervalInSeconds=1")).start()
    try:
        yield proc
    finally:
        proc.kill()


def admin(broker: BrokerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def ok(broker: BrokerProcess, *argv: str) -> str:
    done = admin(broker, *argv)
    assert done.returncode == 0, done.stderr
    return done.stdout


def namespace(broker: BrokerProcess) -> str:
    ns = f"public/pol-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    return ns


def stored_after_resend(client: pulsar.Client, topic: str, producer_name: str) -> int:
    """Send sequence id 7 twice (as a producer that lost its receipt would); how many messages are stored."""
    consumer = client.subscribe(topic, f"count-{uuid.uuid4().hex[:4]}")  # from now on
    for _ in range(2):
        producer = client.create_producer(topic, producer_name=producer_name, batching_enabled=False)
        producer.send(b"payload", sequence_id=7)
        producer.close()
    marker = client.create_producer(topic)
    marker.send(b"end")
    marker.close()
    count = 0
    while consumer.receive(TIMEOUT_MS).data() != b"end":
        count += 1
    consumer.close()
    return count


def test_deduplication_policy_acts_on_dedup(broker: BrokerProcess) -> None:
    ns = namespace(broker)
    c = make_client(broker.url)
    try:
        ok(broker, "namespaces", "set-deduplication", ns, "--disable")
        assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/deduplication") == (200, False)
        topic = f"persistent://{ns}/dedup"
        assert stored_after_resend(c, topic, "p1") == 2  # off: the resend is stored again
        assert call(broker.web_url, "POST", f"/admin/v2/namespaces/{ns}/deduplication", True)[0] == 204
        assert stored_after_resend(c, topic, "p2") == 1
        path = f"/admin/v2/persistent/{ns}/dedup/deduplicationEnabled"
        assert call(broker.web_url, "POST", path, False)[0] == 204  # the topic's policy wins
        assert call(broker.web_url, "GET", path) == (200, False)
        assert stored_after_resend(c, topic, "p3") == 2
        stats = call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/dedup/stats")[1]
        assert stats["deduplicationStatus"] == "Disabled"
        assert call(broker.web_url, "DELETE", path)[0] == 204
        assert stored_after_resend(c, topic, "p4") == 1
    finally:
        c.close()


def test_backlog_quota_refuses_and_closes_producers(broker: BrokerProcess) -> None:
    ns = namespace(broker)
    topic = f"persistent://{ns}/quota"
    c = make_client(broker.url)
    try:
        slow = c.subscribe(topic, "slow")
        producer = c.create_producer(topic, batching_enabled=False)
        for _ in range(20):
            producer.send(b"x" * 100)
        ok(broker, "namespaces", "set-backlog-quota", ns, "-l", "1K", "-p", "producer_exception")
        quotas = call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/backlogQuotaMap")[1]
        assert quotas == {"destination_storage": {"limitSize": 1024, "limitTime": -1, "policy": "producer_exception"}}
        with pytest.raises(pulsar.PulsarException, match="ProducerBlockedQuotaExceededException"):
            c.create_producer(topic)
        hold = {"limitSize": 1024, "limitTime": -1, "policy": "producer_request_hold"}
        assert call(broker.web_url, "POST", f"/admin/v2/persistent/{ns}/quota/backlogQuota", hold)[0] == 204
        with pytest.raises(pulsar.PulsarException, match="ProducerBlockedQuotaExceededError"):
            c.create_producer(topic)
        # the monitor (every 1 s here) closes the producer already there
        broker.wait_until(lambda: not call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/quota/stats")[1][
            "publishers"], POLL_S)
        assert not call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/quota/stats")[1]["publishers"]
        age = {"limitSize": -1, "limitTime": 0, "policy": "producer_exception"}  # any unacked message is too old
        assert call(broker.web_url, "POST", f"/admin/v2/persistent/{ns}/quota/backlogQuota?backlogQuotaType="
                    "message_age", {**hold, "limitSize": 1 << 30})[0] == 204
        assert call(broker.web_url, "POST", f"/admin/v2/persistent/{ns}/quota/backlogQuota?backlogQuotaType="
                    "message_age", age)[0] == 204
        assert set(call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/quota/backlogQuotaMap")[1]) == {
            "destination_storage", "message_age"}
        assert call(broker.web_url, "POST", f"/admin/v2/persistent/{ns}/quota/backlogQuota",
                    {**hold, "limitSize": 1 << 30})[0] == 204  # size is fine now: the age quota refuses
        with pytest.raises(pulsar.PulsarException, match="ProducerBlockedQuotaExceededException"):
            c.create_producer(topic)
        for _ in range(20):
            slow.acknowledge(slow.receive(TIMEOUT_MS))
        assert call(broker.web_url, "DELETE", f"/admin/v2/persistent/{ns}/quota/backlogQuota")[0] == 204
        assert call(broker.web_url, "DELETE", f"/admin/v2/namespaces/{ns}/backlogQuota")[0] == 204
        c.create_producer(topic).send(b"fits again")
    finally:
        c.close()


def test_topic_retention_ttl_and_effective_namespace_values(broker: BrokerProcess) -> None:
    ns = namespace(broker)
    base = f"/admin/v2/persistent/{ns}/pol"
    assert call(broker.web_url, "PUT", base)[0] == 204
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/retention") == (
        200, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})  # the broker's defaults, not null
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/replication") == (200, ["standalone"])
    retention = {"retentionTimeInMinutes": 120, "retentionSizeInMB": 1024}
    assert call(broker.web_url, "POST", base + "/retention", retention)[0] == 204
    assert call(broker.web_url, "GET", base + "/retention") == (200, retention)
    assert call(broker.web_url, "POST", base + "/messageTTL?messageTTL=30")[0] == 204
    assert call(broker.web_url, "GET", base + "/messageTTL") == (200, 30)
    assert call(broker.web_url, "POST", base + "/retention", {"retentionTimeInMinutes": "x"})[0] == 400
    for suffix in ("/messageTTL", "/retention"):
        assert call(broker.web_url, "DELETE", base + suffix)[0] == 204
        assert call(broker.web_url, "GET", base + suffix) == (200, None)


def test_reading_messages_and_peek_printing(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/read-{uuid.uuid4().hex[:6]}"
    c = make_client(broker.url)
    try:
        c.subscribe(topic, "peeker")
        plain = c.create_producer(topic, batching_enabled=False)
        first = plain.send(b"\x00\x01binary\xff", properties={"color": "red"})
        batched = c.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50)
        for i in range(2):
            batched.send_async(f"in-batch-{i}".encode(), None, properties={"i": str(i)})
        batched.flush()
    finally:
        c.close()
    peeked = ok(broker, "topics", "peek-messages", topic, "-s", "peeker", "-n", "5")  # only 2 entries exist
    assert f"Message ID: {first.ledger_id()}:{first.entry_id()}" in peeked
    assert '"color": "red"' in peeked and "|00000000| 00 01 62 69 6e 61 72 79 ff" in peeked
    assert peeked.count("Batch Message ID:") == 2 and ":1\n" in peeked and '"i": "1"' in peeked
    examined = ok(broker, "topics", "examine-message", topic, "-i", "earliest", "-m", "1")
    assert f"Message ID: {first.ledger_id()}:{first.entry_id()}" in examined
    by_id = ok(broker, "topics", "get-message-by-id", topic, "-l", str(first.ledger_id()), "-e", str(first.entry_id()))
    assert "62 69 6e 61 72 79" in by_id
    assert admin(broker, "topics", "get-message-by-id", topic, "-l", "999999", "-e", "0").returncode == 1


def test_lookup_unload_and_broker_endpoints(broker: BrokerProcess) -> None:
    topic = f"ops-{uuid.uuid4().hex[:6]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/persistent/public/default/{topic}")[0] == 204
    lookup = call(broker.web_url, "GET", f"/lookup/v2/topic/persistent/public/default/{topic}")[1]
    assert lookup["brokerUrl"] == f"pulsar://127.0.0.1:{broker.port}"
    call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{topic}/stats")  # loads it
    assert call(broker.web_url, "PUT", "/admin/v2/namespaces/public/default/unload")[0] == 204
    loaded = call(broker.web_url, "GET", "/admin/v2/broker-stats/topics")[1]
    assert f"persistent://public/default/{topic}" not in json.dumps(loaded)
    host = f"127.0.0.1:{broker.web_port}"
    assert call(broker.web_url, "GET", "/admin/v2/brokers/standalone") == (200, [host])
    assert call(broker.web_url, "GET", "/admin/v2/brokers/leaderBroker")[1]["serviceUrl"] == f"http://{host}"
    assert call(broker.web_url, "GET", "/admin/v2/broker-stats/load-report")[1]["name"] == host
    assert isinstance(call(broker.web_url, "GET", "/admin/v2/broker-stats/metrics")[1], list)
    assert call(broker.web_url, "GET", "/admin/v2/brokers/no-such-cluster")[0] == 404


def test_backlog_quota_eviction_moves_slow_subscriptions(broker: BrokerProcess) -> None:
    ns = namespace(broker)
    c = make_client(broker.url)
    try:
        c.subscribe(f"persistent://{ns}/evict", "slow")
        producer = c.create_producer(f"persistent://{ns}/evict", batching_enabled=False)
        for _ in range(40):
            producer.send(b"x" * 100)
        quota = {"limitSize": 1024, "limitTime": -1, "policy": "consumer_backlog_eviction"}
        assert call(broker.web_url, "POST", f"/admin/v2/namespaces/{ns}/backlogQuota", quota)[0] == 204
        producer.send(b"still allowed")  # eviction never blocks producers
        stats: dict[str, object] = {}

        def evicted() -> bool:
            stats.update(call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}/evict/stats")[1])
            return stats["backlogSize"] <= 1024  # type: ignore[operator,no-any-return]

        broker.wait_until(evicted, POLL_S)  # the monitor (every 1 s here) moves the subscription
        assert 0 < stats["backlogSize"] <= 1024  # type: ignore[operator]
        assert 0 < stats["subscriptions"]["slow"]["msgBacklog"] < 41  # type: ignore[index]
    finally:
        c.close()


def test_encryption_required_is_stored_and_answered_as_pulsar_does(broker: BrokerProcess) -> None:
    ns = namespace(broker)
    path = f"/admin/v2/namespaces/{ns}/encryptionRequired"
    assert call(broker.web_url, "GET", path) == (200, False)
    assert call(broker.web_url, "POST", path, True)[0] == 204
    assert call(broker.web_url, "GET", path) == (200, True)
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}")[1]["encryption_required"] is True
    assert call(broker.web_url, "POST", path, "yes")[0] == 400
    assert call(broker.web_url, "POST", path, False)[0] == 204
    assert call(broker.web_url, "GET", path) == (200, False)


def test_cli_and_rest_friction_items(broker: BrokerProcess) -> None:
    """Issue 35's small ones: brokers version, compact's confirmation, the local cluster's brokerServiceUrl,
    system topics left out of lists, an unknown verb's choices listed once, and a closed pipe ends quietly."""
    assert call(broker.web_url, "GET", "/admin/v2/brokers/version") == (200, magnetar.__version__)
    assert ok(broker, "brokers", "version").strip() == magnetar.__version__
    ns = namespace(broker)
    topic = f"persistent://{ns}/t"
    assert call(broker.web_url, "PUT", f"/admin/v2/persistent/{ns}/t")[0] == 204
    assert ok(broker, "topics", "compact", topic).strip() == f"Topic compaction requested for {topic}"
    local = json.loads(ok(broker, "clusters", "get", "standalone"))
    assert local["brokerServiceUrl"] == f"pulsar://127.0.0.1:{broker.url.rsplit(':', 1)[1]}"
    snapshot = f"persistent://{ns}/__transaction_buffer_snapshot"
    assert call(broker.web_url, "PUT", f"/admin/v2/persistent/{ns}/__transaction_buffer_snapshot")[0] == 204
    assert ok(broker, "topics", "list", ns).split() == [topic]
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/topics")[1] == [topic]
    status, everything = call(broker.web_url, "GET", f"/admin/v2/persistent/{ns}?includeSystemTopic=true")
    assert status == 200 and sorted(everything) == sorted([topic, snapshot])
    unknown = admin(broker, "topics", "no-such-verb")
    assert unknown.returncode == 2 and unknown.stderr.count("'list-partitioned-topics'") == 1
    read_end, write_end = os.pipe()
    os.close(read_end)  # a reader that has gone, as `| head` after its first line: every write meets EPIPE
    try:
        piped = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url,
                                "topics", "list", ns], stdout=write_end, stderr=subprocess.PIPE, text=True,
                               timeout=60, check=False)
    finally:
        os.close(write_end)
    assert (piped.returncode, piped.stderr) == (0, "")
