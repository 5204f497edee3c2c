"""``magnetar perf txn`` against the real broker: a short run's output shape and counts, never timings."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


def test_perf_txn_runs_every_transaction(broker: BrokerProcess) -> None:
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "txn", "-u", broker.url, "-c", "4", "-m", "40", "--json",
           "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["transactions"], summary["errors"]) == (40, 0)
    assert summary["txn_per_s"] > 0 and summary["p50_ms"] <= summary["p999_ms"]


def test_perf_txn_refuses_bad_flags(broker: BrokerProcess) -> None:
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", "txn", "-u", broker.url, "-c", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--concurrency" in done.stderr
