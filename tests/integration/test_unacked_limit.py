"""maxUnackedMessagesPerConsumer: a Shared consumer that never acks stops receiving, others carry on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.collect import Collector
from tests.integration.conftest import make_client
from tests.integration.naming import topic_name

LIMIT = 10


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = ("--set", f"maxUnackedMessagesPerConsumer={LIMIT}")
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("unacked")), extra_args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_a_consumer_holding_too_many_unacked_messages_is_skipped_until_it_acks(
    limited_broker: BrokerProcess,
) -> None:
    topic = topic_name("unacked")
    client = make_client(limited_broker.url)
    try:
        hoarder = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="hoarder")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(40):
            producer.send(f"m{i}".encode())
        held = [hoarder.receive(10_000) for _ in range(LIMIT)]
        with pytest.raises(pulsar.Timeout):
            hoarder.receive(300)  # blocked at the limit although it has permits
        collector = Collector()
        worker = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="worker",
                                  message_listener=collector.listener("worker"))
        got = collector.wait_for(40 - LIMIT)
        assert len({g.data for g in got}) == 40 - LIMIT
        worker.close()
        for m in held:
            hoarder.acknowledge(m)
        producer.send(b"after-acks")
        assert hoarder.receive(10_000).data() == b"after-acks"
    finally:
        client.close()
