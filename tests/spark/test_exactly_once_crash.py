"""The exactly-once sink across a SIGKILLed Spark driver: a streaming query (its own driver process) is
killed at an exact point (``MAGNETAR_SPARK_TEST_HOOK``), restarted on the same checkpoint in the shared
session, and, as soon as the restart ends, the official client finds every input row in the output topic
exactly once, with no transaction left open on it (issue 38: nothing waits for ``txnTimeoutMs``, which is
the default ten minutes here).

The killed drivers start together (a JVM start is the slow part) and each is killed when its hook point is
reached: with a transaction opened and recorded (the batch's other task has sent its rows), with the rows
sent in the tasks' open transactions, between the tasks and the commit, after the intent is recorded but
before any transaction commits (the restart rolls them forward), and after every commit but before Spark
records the batch as done (the restart must not publish twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from magnetar.spark.sink_state import SinkFiles
from magnetar.spark.test_hooks import ENV
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import PARTITIONS, produce, topic_name
from tests.spark.crash import open_txns, read_now, wait_and_kill
from tests.spark.eo_job import SINK_ID, start_query

ROWS = 60
TXN_TIMEOUT_MS = 600_000  # the default: the test passes only if nothing waits for it
POINTS = ("txn_opened", "task_written", "commit_start", "intent_written", "committed")


@dataclass
class Crashed:
    source: str
    sink: str
    checkpoint: Path
    sent: list[str]


@pytest.fixture(scope="module")
def crashed(broker: BrokerProcess, client: Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        dict[str, Crashed]]:
    runs: dict[str, Crashed] = {}
    procs = {}
    for point in POINTS:
        work = tmp_path_factory.mktemp(f"eo-{point}")
        run = Crashed(topic_name(f"eo-in-{point}"), topic_name(f"eo-out-{point}"), work / "cp", [])
        run.sent = list(produce(client, run.source, ROWS, prefix=point))
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **{ENV: f"{point}:{work}"})
        log = work / "driver.log"
        with log.open("wb") as out:
            procs[point] = (subprocess.Popen(
                [sys.executable, "-m", "tests.spark.eo_job", broker.url, run.source, run.sink, str(run.checkpoint),
                 str(TXN_TIMEOUT_MS)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            ), work / point, log)
        runs[point] = run
    try:
        for proc, signal_file, log in procs.values():
            wait_and_kill(proc, signal_file, log)
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
    yield runs


@pytest.mark.timeout(900)  # the first one waits for five Spark drivers to start and be killed
@pytest.mark.parametrize("point", POINTS)
def test_killed_driver_restarts_to_exactly_once_output_at_once(
    point: str, crashed: dict[str, Crashed], spark: SparkSession, broker: BrokerProcess
) -> None:
    run = crashed[point]
    query = start_query(spark, broker.url, run.source, run.sink, str(run.checkpoint), TXN_TIMEOUT_MS)
    assert query.awaitTermination(300), "the restarted query did not finish"
    assert query.exception() is None, query.exception()
    got = read_now(broker.url, run.sink)
    assert sorted(got) == sorted(v.upper() for v in run.sent), (point, len(got), len(set(got)))
    assert open_txns(broker.web_url, run.sink) == [0] * PARTITIONS
    assert SinkFiles(str(run.checkpoint), SINK_ID).open_records() == []  # every recorded txn ended
