"""Subscription operations, unload, terminate and delete through the admin API, seen by the official client."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration
V2 = "/admin/v2/persistent/public/default"


def _backlog(base: str, path: str, sub: str) -> int:
    return int(call(base, "GET", path + "/stats")[1]["subscriptions"][sub]["msgBacklog"])


def test_subscription_operations(broker: BrokerProcess, client: pulsar.Client) -> None:
    b, topic = broker.web_url, f"subs-{uuid.uuid4().hex[:8]}"
    path = f"{V2}/{topic}"
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]
    assert call(b, "PUT", path + "/subscription/from-start", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call(b, "PUT", path + "/subscription/from-start")[0] == 409
    assert call(b, "PUT", path + "/subscription/from-end")[0] == 204
    assert call(b, "GET", path + "/subscriptions") == (200, ["from-end", "from-start"])
    assert _backlog(b, path, "from-start") == 10 and _backlog(b, path, "from-end") == 0
    assert call(b, "POST", path + "/subscription/from-start/skip/3")[0] == 204
    assert _backlog(b, path, "from-start") == 7
    assert call(b, "POST", path + "/subscription/from-start/skip/x")[0] == 400
    status, peeked = call(b, "GET", path + "/subscription/from-start/position/1")
    assert status == 200 and peeked == "m3"
    assert call(b, "GET", path + "/subscription/from-start/position/99")[0] == 404
    assert call(b, "POST", path + "/subscription/from-start/skip_all")[0] == 204
    assert _backlog(b, path, "from-start") == 0
    assert call(b, "POST", path + "/subscription/from-start/resetcursor/0")[0] == 204
    assert _backlog(b, path, "from-start") == 10
    fifth = {"ledgerId": ids[5].ledger_id(), "entryId": ids[5].entry_id()}
    assert call(b, "POST", path + "/subscription/from-start/resetcursor", fifth)[0] == 204
    assert _backlog(b, path, "from-start") == 5
    consumer = client.subscribe(topic, "from-start")
    assert consumer.receive(timeout_millis=10_000).data() == b"m5"
    assert call(b, "POST", path + "/subscription/from-start/expireMessages/0")[0] == 204
    assert _backlog(b, path, "from-start") == 0
    assert call(b, "DELETE", path + "/subscription/from-start")[0] == 412  # a consumer is connected
    assert call(b, "DELETE", path + "/subscription/from-start?force=true")[0] == 204
    assert call(b, "DELETE", path + "/subscription/from-start")[0] == 404
    assert call(b, "GET", path + "/subscriptions") == (200, ["from-end"])
    assert call(b, "POST", path + "/subscription/nope/skip_all")[0] == 404
    producer.close()


def test_reset_cursor_moves_a_connected_consumer(broker: BrokerProcess, client: pulsar.Client) -> None:
    b, topic = broker.web_url, f"reset-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"m{i}".encode())
    for _ in range(3):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    assert call(b, "POST", f"{V2}/{topic}/subscription/s/resetcursor/0")[0] == 204
    assert consumer.receive(timeout_millis=10_000).data() == b"m0"  # the client was moved back


def test_unload_terminate_and_delete(broker: BrokerProcess, client: pulsar.Client) -> None:
    b, topic = broker.web_url, f"ops-{uuid.uuid4().hex[:8]}"
    path = f"{V2}/{topic}"
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert call(b, "PUT", path + "/unload")[0] == 204
    producer.send(b"after unload")  # the client reconnected on its own
    assert call(b, "GET", path + "/stats")[1]["msgInCounter"] == 1  # a reloaded topic counts afresh
    assert call(b, "DELETE", path)[0] == 412  # an active producer
    expected = call(b, "GET", path + "/lastMessageId")[1]
    status, last = call(b, "POST", path + "/terminate")
    assert status == 200 and last == expected
    terminated = call(b, "GET", path + "/internalStats")[1]["properties"]["pulsar.terminated"]
    assert terminated == f"{last['ledgerId']}:{last['entryId']}"
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    assert call(b, "DELETE", path + "?force=true")[0] == 204
    deadline = time.monotonic() + 10
    while call(b, "GET", path + "/stats")[0] != 404:
        assert time.monotonic() < deadline
    assert call(b, "PUT", path + "/unload")[0] == 404
