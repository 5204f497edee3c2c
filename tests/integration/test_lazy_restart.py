"""A restart loads no topic until it is used: admin still lists every topic and answers its stats, and the first
consumer after a SIGKILL reads everything receipted (the ledger's data file is scanned on that first use)."""

from __future__ import annotations

import pulsar

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

NS = "public/default"
TOPICS = [f"persistent://{NS}/lazy-restart-{i}" for i in range(3)]
RECEIVE_MS = 10_000


def _loaded_since(broker: BrokerProcess, mark: int) -> list[str]:
    return [line for line in broker.log_lines[mark:] if "loaded topic persistent://public/default/lazy-" in line]


def test_restart_lists_and_serves_topics_it_has_not_loaded(fresh_broker: BrokerProcess) -> None:
    client = make_client(fresh_broker.url)
    try:
        for topic in TOPICS:
            client.subscribe(topic, "sub").close()
        producer = client.create_producer(TOPICS[0], batching_enabled=False)
        receipted = [f"m{i}".encode() for i in range(5)]
        for body in receipted:
            producer.send(body)
    finally:
        client.close()
    fresh_broker.kill()  # a crash: every ledger is recovered on its first use, not at start
    fresh_broker.start()
    mark = len(fresh_broker.log_lines)

    status, listed = call(fresh_broker.web_url, "GET", f"/admin/v2/persistent/{NS}")
    assert status == 200 and set(TOPICS) <= set(listed)
    assert _loaded_since(fresh_broker, mark) == []  # listing loads nothing

    path = f"/admin/v2/persistent/{NS}/lazy-restart-0/stats"
    status, stats = call(fresh_broker.web_url, "GET", path)
    assert status == 200 and stats["subscriptions"]["sub"]["msgBacklog"] == len(receipted)
    assert not any("lazy-restart-1" in line or "lazy-restart-2" in line for line in _loaded_since(fresh_broker, mark))

    client = make_client(fresh_broker.url)
    try:
        consumer = client.subscribe(TOPICS[0], "sub", initial_position=pulsar.InitialPosition.Earliest)
        assert [consumer.receive(RECEIVE_MS).data() for _ in receipted] == receipted
    finally:
        client.close()
