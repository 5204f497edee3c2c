"""Compaction with the official client against the real ``magnetar standalone``: the compacted view holds the
latest value per key in order, tombstones delete, batches are compacted per message, readers and table views
read it, and the admin API, stats and metrics report it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request

import pulsar
import pytest

from magnetar.client import Client
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.compaction.helpers import (
    RECEIVE_TIMEOUT_MS,
    compact,
    compaction_status,
    finished,
    key_values,
    read_all,
    topic_path,
)

pytestmark = pytest.mark.integration

EARLIEST = pulsar.MessageId.earliest
LATEST = pulsar.MessageId.latest


def _topic(name: str) -> str:
    return f"persistent://public/default/compaction-{name}"


def _send(producer: pulsar.Producer, pairs: list[tuple[str, bytes | None]]) -> list[pulsar.MessageId]:
    return [producer.send(value, partition_key=key) for key, value in pairs]


def _compacted_reader(client: pulsar.Client, topic: str, start: pulsar.MessageId = EARLIEST,
                      **kwargs: object) -> pulsar.Reader:
    return client.create_reader(topic, start, is_read_compacted=True, **kwargs)


def test_compacted_view_is_latest_value_per_key_in_order(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("latest")
    producer = client.create_producer(topic)
    assert compaction_status(broker, topic) == {"status": "NOT_RUN", "lastError": ""}
    _send(producer, [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b"b2"), ("a", b"a3")])
    producer.send(b"keyless")
    compact(broker, topic)
    assert key_values(read_all(_compacted_reader(client, topic))) == [("c", b"c1"), ("b", b"b2"), ("a", b"a3")]
    full = client.create_reader(topic, EARLIEST)
    assert len(read_all(full)) == 7  # a plain reader still sees every message
    _send(producer, [("b", b"b3")])  # after the horizon: the live topic follows the view
    assert key_values(read_all(_compacted_reader(client, topic))) == [
        ("c", b"c1"), ("b", b"b2"), ("a", b"a3"), ("b", b"b3")]
    compact(broker, topic)  # a second compaction folds the previous view in
    assert key_values(read_all(_compacted_reader(client, topic))) == [("c", b"c1"), ("a", b"a3"), ("b", b"b3")]
    stats = call(broker.web_url, "GET", topic_path(topic) + "/stats")[1]["compaction"]
    assert stats["lastCompactionRemovedEventCount"] == 1  # b2 was replaced by b3
    assert stats["lastCompactionSucceedTimestamp"] > 0
    metrics = urllib.request.urlopen(broker.web_url + "/metrics", timeout=15).read().decode()
    assert f'pulsar_compaction_succeed_count{{cluster="standalone",namespace="public/default",topic="{topic}"}} 2.0' \
        in metrics


def test_tombstones_delete_keys_and_empty_values_stay(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("tombstones")
    producer = client.create_producer(topic)
    _send(producer, [("gone", b"1"), ("empty", b"x"), ("kept", b"k"), ("gone", None), ("empty", b"")])
    compact(broker, topic)
    assert key_values(read_all(_compacted_reader(client, topic))) == [("kept", b"k"), ("empty", b"")]


def test_properties_and_event_time_survive(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("properties")
    producer = client.create_producer(topic)
    producer.send(b"old", partition_key="k", properties={"v": "1"})
    producer.send(b"new", partition_key="k", properties={"v": "2", "x": "y"}, event_timestamp=1234)
    compact(broker, topic)
    [msg] = read_all(_compacted_reader(client, topic))
    assert (msg.data(), msg.properties(), msg.event_timestamp()) == (b"new", {"v": "2", "x": "y"}, 1234)


def test_batches_are_compacted_per_message(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("batches")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=60_000)
    batches: list[list[tuple[str, bytes | None]]] = [
        [("a", b"a1"), ("b", b"b1"), ("c", b"c1"), ("a", b"a2"), ("d", b"d1")],
        [("b", b"b2"), ("d", None)],
    ]
    for batch in batches:
        for key, value in batch:
            producer.send_async(value, None, partition_key=key)
        producer.flush()
    compact(broker, topic)
    messages = read_all(_compacted_reader(client, topic))
    assert key_values(messages) == [("c", b"c1"), ("a", b"a2"), ("b", b"b2")]
    first_batch = [m.message_id() for m in messages[:2]]
    assert first_batch[0].entry_id() == first_batch[1].entry_id()
    assert [m.batch_index() for m in first_batch] == [2, 3]  # ids inside the batch are kept


def test_readers_at_earliest_latest_and_ids(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("readers")
    producer = client.create_producer(topic)
    ids = _send(producer, [("a", b"a1"), ("b", b"b1"), ("c", b"c1"), ("a", b"a2"), ("d", b"d1"), ("d", None)])
    compact(broker, topic)
    # GET_LAST_MESSAGE_ID answers from the view: the tombstone at the end is not "available"
    assert key_values(read_all(_compacted_reader(client, topic))) == [("b", b"b1"), ("c", b"c1"), ("a", b"a2")]
    assert not _compacted_reader(client, topic, LATEST).has_message_available()
    inclusive_latest = _compacted_reader(client, topic, LATEST, start_message_id_inclusive=True)
    inclusive_latest.has_message_available()  # the client seeks to the last id the broker names
    assert inclusive_latest.read_next(RECEIVE_TIMEOUT_MS).data() == b"a2"
    assert key_values(read_all(_compacted_reader(client, topic, ids[1]))) == [("c", b"c1"), ("a", b"a2")]
    inclusive = _compacted_reader(client, topic, ids[2], start_message_id_inclusive=True)
    assert key_values(read_all(inclusive)) == [("c", b"c1"), ("a", b"a2")]
    seeking = _compacted_reader(client, topic)
    assert seeking.read_next(RECEIVE_TIMEOUT_MS).data() == b"b1"
    seeking.seek(ids[0])  # inside the compacted range
    assert key_values(read_all(seeking)) == [("b", b"b1"), ("c", b"c1"), ("a", b"a2")]
    _send(producer, [("e", b"e1")])
    latest = _compacted_reader(client, topic, LATEST)
    _send(producer, [("f", b"f1")])
    assert key_values(read_all(latest)) == [("f", b"f1")]


def test_durable_subscription_reads_compacted(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("durable")
    producer = client.create_producer(topic)
    _send(producer, [("a", b"a1"), ("b", b"b1"), ("a", b"a2")])
    compact(broker, topic)
    consumer = client.subscribe(topic, "compacted", is_read_compacted=True,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(2)]
    assert key_values(got) == [("b", b"b1"), ("a", b"a2")]
    consumer.acknowledge_cumulative(got[-1])
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared, is_read_compacted=True)


def test_table_view_sees_updates_and_deletions(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("table-view")
    producer = client.create_producer(topic)
    _send(producer, [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("c", None)])
    compact(broker, topic)
    _send(producer, [("d", b"d1")])  # after the horizon
    view = client.create_table_view(topic)
    assert (view.get("a"), view.get("b"), view.get("c"), view.get("d"), len(view)) == (b"a2", b"b1", None, b"d1", 3)
    changed = threading.Condition()
    seen: list[tuple[str, bytes]] = []

    def listen(key: str, value: bytes) -> None:
        with changed:
            seen.append((key, value))
            changed.notify_all()

    view.for_each_and_listen(listen)
    _send(producer, [("b", b"b2"), ("a", None)])
    with changed:
        assert changed.wait_for(lambda: ("a", b"") in seen, 15)
    assert (view.get("a"), view.get("b"), len(view)) == (None, b"b2", 2)
    view.close()


def test_compaction_threshold_policy_is_validated(broker: BrokerProcess) -> None:
    path = "/admin/v2/namespaces/public/default/compactionThreshold"
    assert call(broker.web_url, "GET", path) == (200, None)
    assert call(broker.web_url, "PUT", path, -1)[0] == 412
    assert call(broker.web_url, "PUT", path, 1 << 40)[0] == 204
    assert call(broker.web_url, "GET", path) == (200, 1 << 40)
    assert call(broker.web_url, "DELETE", path)[0] == 204


def _admin(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_admin_cli_compact_and_status(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("cli")
    _send(client.create_producer(topic), [("a", b"1"), ("a", b"2")])
    assert compaction_status(broker, topic)["status"] == "NOT_RUN"
    before = finished(broker.log_text(), topic)
    assert _admin(broker, "topics", "compact", topic).returncode == 0
    assert broker.wait_for(lambda log: finished(log, topic) > before, 60)
    assert json.loads(_admin(broker, "topics", "compaction-status", topic).stdout)["status"] == "SUCCESS"
    assert _admin(broker, "namespaces", "set-compaction-threshold", "public/default", "-t", "10M").returncode == 0
    assert json.loads(_admin(broker, "namespaces", "get-compaction-threshold", "public/default").stdout) == 10 << 20
    assert call(broker.web_url, "DELETE", "/admin/v2/namespaces/public/default/compactionThreshold")[0] == 204


async def test_aborted_transactions_never_reach_the_view(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("transactions")
    async with Client(broker.url, operation_timeout_ms=10_000) as mclient:
        producer = await mclient.create_producer(topic)
        await producer.send(b"a1", key="a")
        aborted = await mclient.new_transaction()
        await producer.send(b"a-aborted", key="a", txn=aborted)
        await producer.send(b"", key="gone-if-aborted", txn=aborted)
        committed = await mclient.new_transaction()
        await producer.send(b"b-committed", key="b", txn=committed)
        await aborted.abort()
        await committed.commit()
        await producer.close()
    compact(broker, topic)
    assert key_values(read_all(_compacted_reader(client, topic))) == [("a", b"a1"), ("b", b"b-committed")]


def test_partitioned_topic_compacts_every_partition(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = _topic("partitioned")
    assert call(broker.web_url, "PUT", topic_path(topic) + "/partitions", 2)[0] == 204
    producer = client.create_producer(topic)
    _send(producer, [(f"k{i % 6}", f"v{i}".encode()) for i in range(30)])
    parts = [f"{topic}-partition-{i}" for i in range(2)]
    before = [finished(broker.log_text(), p) for p in parts]
    assert call(broker.web_url, "PUT", topic_path(topic) + "/compaction")[0] == 204
    assert broker.wait_for(lambda log: all(finished(log, p) > b for p, b in zip(parts, before, strict=True)), 60)
    consumer = client.subscribe(topic, "all", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest)
    got = {m.partition_key(): m.data() for m in (consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(6))}
    assert got == {f"k{i}": f"v{24 + i}".encode() for i in range(6)}
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)


def test_replaced_compacted_ledgers_leave_through_two_phase_deletion(
    broker: BrokerProcess, client: pulsar.Client
) -> None:
    topic = _topic("two-phase")
    producer = client.create_producer(topic)
    _send(producer, [("a", b"1"), ("a", b"2")])
    compact(broker, topic)
    first = call(broker.web_url, "GET", topic_path(topic) + "/internalStats")[1]["compactedLedger"]["ledgerId"]
    _send(producer, [("a", b"3")])
    compact(broker, topic)
    internal = call(broker.web_url, "GET", topic_path(topic) + "/internalStats")[1]
    second = internal["compactedLedger"]["ledgerId"]
    assert first != second >= 0
    assert internal["cursors"]["__compaction"]["properties"]["CompactedTopicLedger"] == second
    body = {"ledgerComponent": "COMPACTED_LEDGER", "cursorName": "__compaction"}
    # the deletion service's owner check: the view's ledger is in use, the replaced one is not (and is gone)
    assert call(broker.web_url, "DELETE", f"{topic_path(topic)}/ledger/{second}", body)[0] == 409
    assert call(broker.web_url, "DELETE", f"{topic_path(topic)}/ledger/{first}", body)[0] == 204
    audit = call(broker.web_url, "GET", "/admin/v2/broker-stats/ledger-audit")[1]
    assert not [o for o in audit["orphans"] if o["ledgerId"] in (first, second)]
    assert key_values(read_all(_compacted_reader(client, topic))) == [("a", b"3")]
