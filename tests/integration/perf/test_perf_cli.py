"""``magnetar perf`` against the real broker: short runs with small counts; output shapes, never timings."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 90


def perf(broker: BrokerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", *argv, "-u", broker.url, "--admin-url", broker.web_url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def perf_json(broker: BrokerProcess, *argv: str) -> dict[str, Any]:
    done = perf(broker, *argv, "--json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_produce_then_consume_the_backlog(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/perf-backlog"
    # the subscription exists first, so the backlog is kept for it
    first = perf_json(broker, "consume", topic, "-m", "1", "--test-duration", "0.5")
    assert first["totals"]["consume"]["messages"] == 0
    produced = perf_json(broker, "produce", topic, "-m", "300", "-s", "200", "--sample-every", "7")
    publish = produced["totals"]["publish"]
    assert produced["verb"] == "produce" and "consume" not in produced["totals"]
    assert publish["messages"] == 300 and publish["bytes"] == 300 * 200 and publish["errors"] == 0
    assert publish["latency_ms"]["count"] == 300 // 7 + 1  # one timed send in 7, plus the last one
    assert publish["latency_ms"]["p50"] <= publish["latency_ms"]["max"]
    consumed = perf_json(broker, "consume", topic, "-m", "300")
    assert consumed["totals"]["consume"]["messages"] == 300
    assert consumed["totals"]["consume"]["latency_ms"]["count"] == 300


def test_e2e_unbatched_at_a_rate(broker: BrokerProcess) -> None:
    document = perf_json(broker, "e2e", "perf-e2e", "-m", "200", "-r", "400", "--no-batching", "-z", "lz4")
    totals = document["totals"]
    assert totals["publish"]["messages"] == 200 and totals["consume"]["messages"] == 200
    assert totals["consume"]["latency_ms"]["count"] == 200
    assert document["options"]["batching"] is False and document["options"]["compression"] == "lz4"
    assert document["intervals"], "at least the closing interval is reported"


def test_magnetar_client_and_several_topics(broker: BrokerProcess) -> None:
    document = perf_json(broker, "e2e", "perf-native", "--client", "magnetar", "-t", "3", "-n", "2", "-m", "120",
                         "--subscription-type", "shared", "--initial-position", "earliest")
    assert document["client"] == "magnetar"
    assert document["totals"]["publish"]["messages"] == 120
    assert document["totals"]["consume"]["messages"] == 120


def test_partitioned_topics_are_created_through_admin(broker: BrokerProcess) -> None:
    document = perf_json(broker, "produce", "perf-partitioned", "--partitions", "3", "-m", "90", "--no-batching")
    assert document["totals"]["publish"]["messages"] == 90
    assert document["options"]["partitions"] == 3


def test_table_output_and_progress_lines(broker: BrokerProcess) -> None:
    done = perf(broker, "produce", "perf-table", "-m", "50", "-s", "64")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("magnetar perf produce: official client, 1 topic(s), 1 producer(s)/topic, 64 B")
    rows = {line[:18].strip(): line[18:].strip() for line in done.stdout.splitlines()}
    assert rows["messages"] == "50" and rows["errors"] == "0"
    assert {"msg/s", "MB/s", "latency p50 ms", "latency p99 ms", "latency p999 ms"} <= set(rows)
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert progress and "publish" in progress[-1] and "msg/s" in progress[-1] and "p999" in progress[-1]
    quiet = perf(broker, "produce", "perf-table", "-m", "5", "--no-progress")
    assert quiet.returncode == 0 and not [line for line in quiet.stderr.splitlines() if line.startswith("[")]


def test_no_broker_is_an_error_not_a_hang(broker: BrokerProcess) -> None:
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "produce", "-m", "5", "--client", "magnetar",
           "-u", "pulsar://127.0.0.1:1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 1 and "magnetar perf:" in done.stderr


def test_ctrl_c_on_an_unlimited_run_stops_cleanly(broker: BrokerProcess) -> None:
    """``-m 0`` runs until Ctrl-C; the official client is closed before exit (no std::terminate, exit 0)."""
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "produce", "perf-ctrl-c", "-m", "0", "-r", "200",
           "-u", broker.url, "--admin-url", broker.web_url]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the first full-second progress line: the run is producing
        assert first.startswith("[") and "publish" in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "terminate called" not in err
    rows = {line[:18].strip(): line[18:].strip() for line in out.splitlines()}
    assert int(rows["messages"].replace(",", "")) > 0 and rows["errors"] == "0"
    assert err.splitlines()[-1].startswith("[total "), "the closing line covers the run, not a partial second"


def test_several_processes_merge_their_counts_and_latencies(broker: BrokerProcess) -> None:
    assert broker.proc is not None
    produced = perf_json(broker, "produce", "perf-procs", "--processes", "2", "-m", "301", "--no-batching",
                         "--broker-pid", str(broker.proc.pid))
    publish = produced["totals"]["publish"]
    server = produced["server"]  # the broker's CPU over the run, read from /proc (ticks: may round to 0)
    assert server["pid"] == broker.proc.pid and server["cpu_s"] >= 0 and set(server["cpu_us_per_msg"]) == {"publish"}
    assert publish["messages"] == 301 and publish["errors"] == 0  # 151 + 150 from two clients
    assert publish["latency_ms"]["count"] == 301  # every send timed, histograms merged
    assert produced["options"]["processes"] == 2
    # consumers: four topics split between the processes (an exclusive subscription each), end to end
    e2e = perf_json(broker, "e2e", "perf-procs-e2e", "--processes", "2", "-t", "4", "-m", "200", "-r", "400")
    assert e2e["totals"]["publish"]["messages"] == 200 and e2e["totals"]["consume"]["messages"] == 200
    assert e2e["totals"]["consume"]["latency_ms"]["count"] == 200


def test_processes_with_one_exclusive_subscription_are_refused(broker: BrokerProcess) -> None:
    done = perf(broker, "consume", "perf-procs-x", "--processes", "2", "-m", "10")
    assert done.returncode == 2 and "--processes" in done.stderr
