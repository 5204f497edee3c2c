"""Stats and metrics that used to read 0, against the real broker: backlogSize, rates (two readers over a
fixed window), last consumed / acked / mark-delete timestamps, messagesConsumedCounter, the pulsar_storage,
subscription ack, connection, managed-ledger and process metrics, exposeTopicLevelMetricsInPrometheus, and a
Grafana dashboard that only uses metrics the broker serves."""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
POLL_S = 10.0
DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "magnetar-broker.json"


def scrape(broker: BrokerProcess) -> str:
    with urllib.request.urlopen(f"{broker.web_url}/metrics", timeout=15) as answer:
        return str(answer.read().decode())


def value(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        named = line.startswith((name + "{", name + " "))
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not served")


def settled(broker: BrokerProcess, path: str) -> dict[str, Any]:
    """Stats once the client's grouped acks (sent every 100 ms) have reached the broker (bounded poll)."""
    stats: dict[str, Any] = {}

    def acked() -> bool:
        stats.update(call(broker.web_url, "GET", path + "/stats")[1])
        return stats["subscriptions"]["s"]["msgBacklog"] == 0  # type: ignore[no-any-return]

    broker.wait_until(acked, POLL_S, recheck_s=0.05)
    return stats


def test_stats_that_used_to_read_zero(broker: BrokerProcess, client: pulsar.Client) -> None:
    name = f"stats-{uuid.uuid4().hex[:6]}"
    path = f"/admin/v2/persistent/public/default/{name}"
    consumer = client.subscribe(name, "s")
    lagging = client.subscribe(name, "lagging")  # never acks: its backlog stays
    producer = client.create_producer(name, batching_enabled=False)
    for _ in range(10):
        producer.send(b"x" * 200)
    first = call(broker.web_url, "GET", path + "/stats")[1]  # reader one starts its window here
    scrape(broker)  # and reader two (the metrics) its own
    for _ in range(10):
        producer.send(b"y" * 200)
    for _ in range(20):
        consumer.acknowledge(consumer.receive(TIMEOUT_MS))
    lagging.receive(TIMEOUT_MS)
    stats = settled(broker, path)
    metrics = scrape(broker)  # the second reader's reading does not change the first's measurement
    again = call(broker.web_url, "GET", path + "/stats")[1]
    assert first["msgInCounter"] == 10 and stats["msgInCounter"] == 20
    assert stats["msgRateIn"] > 0 and again["msgRateIn"] > 0
    sub, lag = stats["subscriptions"]["s"], stats["subscriptions"]["lagging"]
    assert lag["backlogSize"] > 0 and sub["backlogSize"] == 0 and stats["backlogSize"] == lag["backlogSize"]
    assert sub["lastAckedTimestamp"] > 0 and sub["lastMarkDeleteAdvancedTimestamp"] > 0
    assert sub["lastConsumedTimestamp"] > 0 and sub["consumers"][0]["lastAckedTimestamp"] > 0
    assert lag["lastAckedTimestamp"] == 0 and lag["lastConsumedTimestamp"] > 0
    assert again["subscriptions"]["s"]["messageAckRate"] > 0
    internal = call(broker.web_url, "GET", path + "/internalStats")[1]
    assert internal["cursors"]["s"]["messagesConsumedCounter"] == 20
    labels = {"topic": f"persistent://public/default/{name}"}
    assert value(metrics, "pulsar_storage_backlog_size", **labels) == lag["backlogSize"]
    assert value(metrics, "pulsar_storage_write_rate", **labels) > 0
    assert value(metrics, "pulsar_subscription_msg_ack_rate", subscription="s", **labels) > 0
    later = scrape(broker)
    assert value(later, "pulsar_storage_write_rate", **labels) > 0  # over the window: a re-read is not reset
    assert value(later, "pulsar_active_connections") >= 1
    assert value(later, "pulsar_connection_created_total_count") >= value(later, "pulsar_active_connections")
    assert value(later, "pulsar_ml_StoredMessagesSize", namespace="public/default") > 0
    assert value(later, "process_resident_memory_bytes") > 0 and value(later, "process_cpu_seconds_total") > 0


def test_grafana_dashboard_uses_served_metrics(broker: BrokerProcess, client: pulsar.Client) -> None:
    client.create_producer(f"dash-{uuid.uuid4().hex[:6]}").send(b"x")
    served = {line.split("{")[0].split(" ")[0] for line in scrape(broker).splitlines() if not line.startswith("#")}
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b((?:pulsar|process)_[A-Za-z_]+)", e)}
    assert used and used <= served, used - served


@pytest.fixture(scope="module")
def namespace_level(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("ns-metrics")),
                         extra_args=("--set", "exposeTopicLevelMetricsInPrometheus=false")).start()
    try:
        yield proc
    finally:
        proc.kill()


def test_namespace_level_metrics_only(namespace_level: BrokerProcess) -> None:
    c = make_client(namespace_level.url)
    try:
        for topic in ("a", "b"):
            producer = c.create_producer(f"nslevel-{topic}")
            for _ in range(3):
                producer.send(b"x")
        text = scrape(namespace_level)
    finally:
        c.close()
    assert 'topic="' not in text
    assert value(text, "pulsar_in_messages_total", namespace="public/default") == 6
