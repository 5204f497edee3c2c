"""/metrics with Pulsar's names, the ``magnetar admin`` command, and a schemathesis run over the OpenAPI document."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid

import hypothesis
import pulsar
import pytest
import schemathesis
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration
#: no 500, and nothing that breaks the document: statuses, content types and bodies as declared
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _metrics(base: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(base + "/metrics", timeout=15) as resp:
        text = resp.read().decode()
    values: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, sample.labels.get("topic", ""))] = sample.value
    return values


def test_metrics_move_with_traffic(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/metrics-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "m")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"one")
    first = _metrics(broker.web_url)
    for name in ("pulsar_rate_in", "pulsar_throughput_out", "pulsar_storage_size", "pulsar_msg_backlog",
                 "pulsar_producers_count", "pulsar_consumers_count", "pulsar_subscriptions_count",
                 "pulsar_subscription_back_log", "pulsar_out_messages_total"):
        assert (name, topic) in first, name
    assert first[("pulsar_in_messages_total", topic)] == 1
    assert first[("pulsar_producers_count", topic)] == 1 and first[("pulsar_consumers_count", topic)] == 1
    for _ in range(4):
        producer.send(b"more")
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    second = _metrics(broker.web_url)
    assert second[("pulsar_in_messages_total", topic)] == 5
    assert second[("pulsar_in_bytes_total", topic)] > first[("pulsar_in_bytes_total", topic)]
    assert second[("pulsar_out_messages_total", topic)] == 5
    assert second[("pulsar_storage_write_latency_count", topic)] == 5
    bucket_names = {n for n, _ in second if n.startswith("pulsar_storage_write_latency_le_")}
    bucket_names.add("pulsar_storage_write_latency_overflow")
    latency_buckets = [second[(n, topic)] for n in bucket_names]
    assert sum(latency_buckets) == 5, "each write lands in exactly one latency bucket"
    assert second[("pulsar_entry_size_le_128", topic)] == 5


def _admin(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_admin_command_round_trips(broker: BrokerProcess) -> None:
    tenant, topic = f"cli{uuid.uuid4().hex[:6]}", f"cli-{uuid.uuid4().hex[:8]}"
    assert _admin(broker, "tenants", "create", tenant, "-c", "standalone").returncode == 0
    assert tenant in _admin(broker, "tenants", "list").stdout.split()
    assert _admin(broker, "namespaces", "create", f"{tenant}/ns").returncode == 0
    assert _admin(broker, "namespaces", "list", tenant).stdout.split() == [f"{tenant}/ns"]
    assert _admin(broker, "namespaces", "set-retention", f"{tenant}/ns", "--time", "2h", "--size", "1G").returncode == 0
    retention = json.loads(_admin(broker, "namespaces", "get-retention", f"{tenant}/ns").stdout)
    assert retention == {"retentionTimeInMinutes": 120, "retentionSizeInMB": 1024}
    full = f"persistent://{tenant}/ns/{topic}"
    assert _admin(broker, "topics", "create-partitioned-topic", "-p", "4", full).returncode == 0
    again = _admin(broker, "topics", "create-partitioned-topic", "-p", "4", full)
    assert again.returncode == 1 and "already exists" in again.stderr
    assert len(_admin(broker, "topics", "list", f"{tenant}/ns").stdout.split()) == 4
    meta = json.loads(_admin(broker, "topics", "get-partitioned-topic-metadata", full).stdout)
    assert meta == {"partitions": 4}
    assert _admin(broker, "topics", "create-subscription", "-s", "s1", "-m", "earliest", full).returncode == 0
    assert _admin(broker, "topics", "subscriptions", full).stdout.split() == ["s1"]
    stats = json.loads(_admin(broker, "topics", "partitioned-stats", full).stdout)
    assert stats["metadata"]["partitions"] == 4 and "s1" in stats["subscriptions"]
    internal = json.loads(_admin(broker, "topics", "internal-stats", full + "-partition-0").stdout)
    assert "ledgers" in internal and "s1" in internal["cursors"]
    assert _admin(broker, "subscriptions", "delete", full, "-s", "s1").returncode == 0
    assert _admin(broker, "topics", "delete-partitioned-topic", full).returncode == 0
    missing = _admin(broker, "topics", "stats", full + "-nope")
    assert missing.returncode == 1 and "404" in missing.stderr
    assert _admin(broker, "namespaces", "delete", f"{tenant}/ns").returncode == 0
    assert _admin(broker, "tenants", "delete", tenant).returncode == 0
    assert _admin(broker, "topics", "stats", "a/b/c/d/e").returncode == 2


def test_openapi_document_holds_under_schemathesis(broker: BrokerProcess) -> None:
    """Every operation, fed generated input: no 500, and every answer fits the document's own schema."""
    schema = schemathesis.openapi.from_url(broker.web_url + "/admin/v2/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @hypothesis.settings(max_examples=8, deadline=None, database=None, derandomize=True,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=broker.web_url, checks=CHECKS)

        try:
            check()
        except Exception as exc:  # collect, so one run reports every broken operation
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
