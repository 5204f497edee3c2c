"""What the durability tests share: seed a topic, read back what a broker stored, and check it against the
receipts (every receipted value stored exactly once, each sender's values in send order)."""

from __future__ import annotations

from collections.abc import Iterable

import pulsar

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

RECEIVE_MS = 10_000


def seed_topic(broker: BrokerProcess, topic: str, count: int, prefix: str) -> None:
    """Subscription ``sub`` from the earliest position, then ``count`` messages ``<prefix>0``.. sent one by one."""
    client = make_client(broker.url)
    try:
        client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            producer.send(f"{prefix}{i}".encode())
    finally:
        client.close()


def read_all(broker: BrokerProcess, topic: str) -> list[str]:
    """Every value stored on ``topic``, from the earliest, with any '.' padding removed."""
    client = make_client(broker.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        values = []
        while reader.has_message_available():  # bounded by what is stored
            values.append(reader.read_next(timeout_millis=RECEIVE_MS).data().rstrip(b".").decode())
        return values
    finally:
        client.close()


def assert_stored_once_in_order(stored: list[str], receipted: Iterable[str]) -> None:
    """Values are ``<one-letter prefix><number>``: none stored twice, each prefix in order, none receipted lost."""
    assert len(stored) == len(set(stored)), "an entry is stored twice"
    for prefix in {v[0] for v in stored}:
        numbers = [int(v[1:]) for v in stored if v[0] == prefix]
        assert numbers == sorted(numbers), f"{prefix}: stored out of send order"
    missing = set(receipted) - set(stored)
    assert not missing, f"receipted but lost: {sorted(missing)[:10]}"
