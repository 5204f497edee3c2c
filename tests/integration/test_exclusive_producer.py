"""PIP-68 with the official client: Exclusive, WaitForExclusive, ExclusiveWithFencing, the topic epoch."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import uuid

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

WAIT_S = 20.0
Mode = pulsar.ProducerAccessMode


def topic_name() -> str:
    return f"persistent://public/default/excl-{uuid.uuid4().hex[:8]}"


def wait_for_log(broker: BrokerProcess, text: str) -> None:
    """Wait (bounded) until the broker logged ``text``."""
    assert broker.wait_for_log(text, WAIT_S), f"broker never logged {text!r}:\n{broker.log_text()[-3000:]}"


def read_all(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(10_000).data())
    reader.close()
    return out


def test_exclusive_against_exclusive_is_fenced(client: pulsar.Client) -> None:
    topic = topic_name()
    client.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)


def test_shared_against_exclusive_is_busy(client: pulsar.Client) -> None:
    topic = topic_name()
    client.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)


def test_exclusive_against_existing_shared_is_fenced(client: pulsar.Client) -> None:
    topic = topic_name()
    client.create_producer(topic)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)


def test_waiter_is_promoted_when_the_holder_closes(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = topic_name()
    holder = client.create_producer(topic, access_mode=Mode.Exclusive)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        name = f"waiter-{uuid.uuid4().hex[:6]}"
        waiting = pool.submit(
            client.create_producer, topic, producer_name=name, access_mode=Mode.WaitForExclusive
        )
        wait_for_log(broker, f"producer {name} is waiting for exclusive access")
        assert not waiting.done()
        holder.send(b"from-holder")
        holder.close()
        promoted = waiting.result(WAIT_S)
        promoted.send(b"from-waiter")
    assert read_all(client, topic) == [b"from-holder", b"from-waiter"]


HOLDER_SCRIPT = """
import sys, pulsar
client = pulsar.Client(sys.argv[1], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
producer = client.create_producer(sys.argv[2], access_mode=pulsar.ProducerAccessMode.Exclusive)
producer.send(b"from-killed-holder")
print("holding", flush=True)
sys.stdin.read()
"""


def test_waiter_is_promoted_when_the_holders_connection_dies(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = topic_name()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, broker.url, topic],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            name = f"waiter-{uuid.uuid4().hex[:6]}"
            waiting = pool.submit(
                client.create_producer, topic, producer_name=name, access_mode=Mode.WaitForExclusive
            )
            wait_for_log(broker, f"producer {name} is waiting for exclusive access")
            holder.kill()
            holder.wait(WAIT_S)
            waiting.result(WAIT_S).send(b"from-waiter")
    finally:
        holder.kill()
    assert read_all(client, topic) == [b"from-killed-holder", b"from-waiter"]


def test_three_waiters_are_promoted_one_at_a_time_in_order(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = topic_name()
    holder = client.create_producer(topic, access_mode=Mode.Exclusive)
    tag = uuid.uuid4().hex[:6]
    names = [f"w{i}-{tag}" for i in range(3)]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = []
        for name in names:  # queue them in a known order
            futures.append(pool.submit(
                client.create_producer, topic, producer_name=name, access_mode=Mode.WaitForExclusive
            ))
            wait_for_log(broker, f"producer {name} is waiting for exclusive access")
        holder.close()
        for i, future in enumerate(futures):
            producer = future.result(WAIT_S)
            assert not any(f.done() for f in futures[i + 1 :]), "promoted while the topic was held"
            producer.send(names[i].encode())
            producer.close()
    assert read_all(client, topic) == [n.encode() for n in names]
    log = broker.log_text()
    positions = [log.index(f"promoted waiting producer {n}") for n in names]
    assert positions == sorted(positions)


def test_waiter_behind_shared_producers(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = topic_name()
    shared = [client.create_producer(topic) for _ in range(2)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        name = f"waiter-{uuid.uuid4().hex[:6]}"
        waiting = pool.submit(client.create_producer, topic, producer_name=name, access_mode=Mode.WaitForExclusive)
        wait_for_log(broker, f"producer {name} is waiting for exclusive access")
        shared[0].close()
        assert not waiting.done()
        shared[1].close()
        waiting.result(WAIT_S).send(b"exclusive-now")


def test_fencing_takes_over_and_the_fenced_producer_lands_nothing_more(
    broker: BrokerProcess, client: pulsar.Client
) -> None:
    topic = topic_name()
    holder = client.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False)
    receipted = [holder.send(b"h0"), holder.send(b"h1")]
    assert len(receipted) == 2
    fencer = make_client(broker.url)
    try:
        new = fencer.create_producer(topic, access_mode=Mode.ExclusiveWithFencing)
        new.send(b"f0")
        with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
            for i in range(20):  # the fenced producer learns of it on a send (bounded)
                holder.send(f"late{i}".encode())
        new.send(b"f1")
        assert read_all(fencer, topic) == [b"h0", b"h1", b"f0", b"f1"]
    finally:
        fencer.close()


def test_topic_epoch_survives_a_restart(fresh_broker: BrokerProcess) -> None:
    topic = topic_name()
    client = make_client(fresh_broker.url)
    for _ in range(3):  # epochs 0, 1, 2
        client.create_producer(topic, access_mode=Mode.Exclusive).close()
    client.close()
    fresh_broker.restart()
    client = make_client(fresh_broker.url)
    try:
        producer = client.create_producer(topic, access_mode=Mode.Exclusive)  # epoch 3
        path = "/admin/v2/" + topic.replace("://", "/")
        status, internal = call(fresh_broker.web_url, "GET", path + "/internalStats")
        assert status == 200 and internal["properties"]["pulsar.topic.epoch"] == "3"
        status, stats = call(fresh_broker.web_url, "GET", path + "/stats")
        assert stats["topicEpoch"] == 3 and stats["publishers"][0]["accessMode"] == "Exclusive"
        producer.close()
    finally:
        client.close()
