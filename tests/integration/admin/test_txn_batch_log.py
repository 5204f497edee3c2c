"""PIP-160's runtime switch and metrics on the real process: HTTP, ``magnetar admin transactions``,
Pulsar's buffered-writer metric names, and startup refusing invalid batching settings."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration
BASE = "/admin/v3/transactions/batchedLog"


def _admin(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_switch_over_http_changes_the_setting_and_refuses_invalid_ones(broker: BrokerProcess) -> None:
    status, before = call(broker.web_url, "GET", BASE)
    assert status == 200
    assert before["transactionLog"]["enabled"] is False and before["pendingAckLog"]["maxRecords"] == 512
    status, after = call(broker.web_url, "POST", BASE + "/pendingAckLog", {"enabled": True, "maxRecords": 64})
    assert status == 200, after
    assert (after["enabled"], after["maxRecords"], after["maxSize"]) == (True, 64, 4 * 1024 * 1024)
    status, err = call(broker.web_url, "POST", BASE + "/transactionLog", {"enabled": True, "maxRecords": 5})
    assert status == 400 and "transactionLogBatchedWriteMaxRecords" in err["reason"]
    status, err = call(broker.web_url, "POST", BASE + "/transactionLog", {"enabled": "yes"})
    assert status == 400
    _, now = call(broker.web_url, "GET", BASE)
    assert now["transactionLog"]["enabled"] is False  # the refused change left nothing behind
    assert now["pendingAckLog"]["enabled"] is True


def test_cli_verbs_switch_both_logs(broker: BrokerProcess) -> None:
    done = _admin(broker, "transactions", "set-tc-batch-log", "--enable", "true", "--max-delay-ms", "2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["maxDelayInMillis"] == 2
    bad = _admin(broker, "transactions", "set-pending-ack-batch-log", "--enable", "true", "--max-size", "10")
    assert bad.returncode == 1 and "MaxSize" in bad.stderr
    shown = json.loads(_admin(broker, "transactions", "get-batch-log").stdout)
    assert shown["transactionLog"]["enabled"] is True
    assert _admin(broker, "transactions", "set-tc-batch-log", "--enable", "false").returncode == 0


def test_pulsars_dynamic_config_routes_switch_the_logs_persist_and_revert(tmp_path: Path) -> None:
    """``brokers update-dynamic-config`` / ``delete-dynamic-config`` as pulsar-admin spells them: the running
    logs follow, the value outlives a restart, and deleting it brings back what broker.conf says."""
    broker = BrokerProcess(tmp_path / "data").start()  # broker.conf: batching off
    key = "transactionLogBatchedWriteEnabled"
    try:
        status, names = call(broker.web_url, "GET", "/admin/v2/brokers/configuration")
        assert status == 200 and key in names and "transactionPendingAckBatchedWriteMaxDelayInMillis" in names
        done = _admin(broker, "brokers", "update-dynamic-config", "--config", key, "--value", "true")
        assert done.returncode == 0, done.stderr
        assert call(broker.web_url, "GET", BASE)[1]["transactionLog"]["enabled"] is True  # the live switch
        status, values = call(broker.web_url, "GET", "/admin/v2/brokers/configuration/values")
        assert status == 200 and values[key] == "true"
        status, err = call(broker.web_url, "POST", "/admin/v2/brokers/configuration/brokerShutdownTimeoutMs/1")
        assert status == 412 and err["reason"] == "Can't update non-dynamic configuration"
        for bad in ("abc", "5"):  # not a number; under the minimum of 10 records
            status, err = call(broker.web_url, "POST",
                               f"/admin/v2/brokers/configuration/transactionLogBatchedWriteMaxRecords/{bad}")
            assert status == 412 and "Invalid dynamic-config value" in err["reason"], err
        broker.restart()
        assert call(broker.web_url, "GET", BASE)[1]["transactionLog"]["enabled"] is True  # stored, applied at start
        done = _admin(broker, "brokers", "delete-dynamic-config", "--config", key)
        assert done.returncode == 0, done.stderr
        assert call(broker.web_url, "GET", BASE)[1]["transactionLog"]["enabled"] is False  # broker.conf's again
        assert key not in json.loads(_admin(broker, "brokers", "get-all-dynamic-config").stdout)
        broker.restart()
        assert call(broker.web_url, "GET", BASE)[1]["transactionLog"]["enabled"] is False
    finally:
        broker.kill()


def test_buffered_writer_metrics_have_pulsars_names(broker: BrokerProcess) -> None:
    with urllib.request.urlopen(broker.web_url + "/metrics", timeout=15) as resp:
        names = {s.name for f in text_string_to_metric_families(resp.read().decode()) for s in f.samples}
    for prefix in ("pulsar_txn_tc", "pulsar_txn_pending_ack_store"):
        for suffix in ("batch_records_bucket", "batch_size_bytes_count", "batch_oldest_record_delay_seconds_sum",
                       "flush_trigger_max_records_total", "flush_trigger_max_size_total",
                       "flush_trigger_max_delay_total", "flush_trigger_large_data_total",
                       "flush_trigger_idle_total"):
            assert f"{prefix}_bufferedwriter_{suffix}" in names, suffix


def test_startup_refuses_invalid_batching_settings_naming_the_key(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", extra_args=(
        "--set", "transactionLogBatchedWriteEnabled=true", "--set", "transactionLogBatchedWriteMaxDelayInMillis=0",
    ))
    with pytest.raises(RuntimeError) as failed:
        proc.start()
    assert "transactionLogBatchedWriteMaxDelayInMillis must be at least 1" in str(failed.value)


async def run_transactions(url: str, in_flight: int = 16, rounds: int = 8) -> None:
    """``in_flight`` transactions at a time, each a send and an ack: records queue behind the logs' appends."""
    from magnetar.client import Client

    topic = "persistent://public/default/batched-txn"
    async with Client(url, operation_timeout_ms=10_000) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s", subscription_type="Shared", initial_position="earliest")
        for i in range(in_flight * rounds):
            await producer.send(f"in{i}".encode())

        async def one() -> None:
            msg = await consumer.receive()
            async with client.transaction(timeout_ms=30_000) as txn:
                await producer.send(b"out", txn=txn)
                await consumer.acknowledge(msg, txn=txn)

        for _ in range(rounds):
            await asyncio.gather(*(one() for _ in range(in_flight)))


def test_batched_transactions_count_their_flush_triggers_in_metrics(tmp_path: Path) -> None:
    """With both logs batched and transactions in flight together, records share entries and /metrics counts
    why each batch was flushed."""
    broker = BrokerProcess(tmp_path / "data", extra_args=(
        "--set", "transactionLogBatchedWriteEnabled=true", "--set", "transactionPendingAckBatchedWriteEnabled=true",
    )).start()
    try:
        asyncio.run(asyncio.wait_for(run_transactions(broker.url), 120))
        with urllib.request.urlopen(broker.web_url + "/metrics", timeout=15) as resp:
            samples = {s.name: s.value for f in text_string_to_metric_families(resp.read().decode())
                       for s in f.samples}
        for prefix in ("pulsar_txn_tc", "pulsar_txn_pending_ack_store"):
            flushes = sum(samples[f"{prefix}_bufferedwriter_flush_trigger_{t}_total"]
                          for t in ("max_records", "max_size", "max_delay", "idle"))
            assert flushes > 0 and samples[f"{prefix}_bufferedwriter_batch_records_count"] > 0, prefix
        status, shown = call(broker.web_url, "GET", BASE)
        assert status == 200
        assert shown["transactionLog"]["recordsWritten"] > shown["transactionLog"]["entriesWritten"] > 0
    finally:
        broker.kill()
