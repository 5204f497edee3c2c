"""The exactly-once sink across a SIGKILLed Spark driver: a streaming query (its own driver process) is
killed at an exact point (``MAGNETAR_SPARK_TEST_HOOK``), restarted on the same checkpoint in the shared
session, and the official client finds every input row in the output topic exactly once.

The four killed drivers start together (a JVM start is the slow part) and each is killed when its hook
point is reached: mid-task (rows sent in the task's open transaction), between the tasks and the commit,
after the intent is recorded but before any transaction commits (the restart rolls them forward), and
after every commit but before Spark records the batch as done (the restart must not publish twice)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest
from pyspark.sql import SparkSession

from magnetar.client.sync import Client
from magnetar.spark.test_hooks import ENV
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import PARTITIONS, produce, topic_name
from tests.spark.eo_job import start_query

ROWS = 60
KILL_WAIT_S = 300.0
SHORT_TXN_MS = 30_000  # orphans of the killed run are reaped soon after
LONG_TXN_MS = 600_000  # recorded transactions must outlive the restart to be rolled forward
POINTS = {"task_written": SHORT_TXN_MS, "commit_start": SHORT_TXN_MS, "intent_written": LONG_TXN_MS,
          "committed": SHORT_TXN_MS}


@dataclass
class Crashed:
    source: str
    sink: str
    checkpoint: Path
    txn_timeout_ms: int
    sent: list[str]


def _wait_and_kill(proc: subprocess.Popen[bytes], signal_file: Path, log: Path) -> None:
    for _ in range(int(KILL_WAIT_S / 0.5)):  # bounded: the process exits or the hook point is reached
        if signal_file.exists() and signal_file.read_text():
            break
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the query exited before {signal_file.name}:\n{log.read_text()[-4000:]}")
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"{signal_file.name} not reached within {KILL_WAIT_S} s")
    os.killpg(proc.pid, signal.SIGKILL)  # the driver: its JVM, its Python and its Python workers
    with contextlib.suppress(ProcessLookupError):  # the blocked worker, if in a group of its own
        os.kill(int(signal_file.read_text()), signal.SIGKILL)
    proc.wait(60)


@pytest.fixture(scope="module")
def crashed(broker: BrokerProcess, client: Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        dict[str, Crashed]]:
    runs: dict[str, Crashed] = {}
    procs = {}
    for point, timeout_ms in POINTS.items():
        work = tmp_path_factory.mktemp(f"eo-{point}")
        run = Crashed(topic_name(f"eo-in-{point}"), topic_name(f"eo-out-{point}"), work / "cp", timeout_ms, [])
        run.sent = list(produce(client, run.source, ROWS, prefix=point))
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **{ENV: f"{point}:{work}"})
        log = work / "driver.log"
        with log.open("wb") as out:
            procs[point] = (subprocess.Popen(
                [sys.executable, "-m", "tests.spark.eo_job", broker.url, run.source, run.sink, str(run.checkpoint),
                 str(timeout_ms)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            ), work / point, log)
        runs[point] = run
    try:
        for proc, signal_file, log in procs.values():
            _wait_and_kill(proc, signal_file, log)
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
    yield runs


def read_all(url: str, topic: str, expected: int, timeout_ms: int) -> list[str]:
    """Every message the official client can read from the topic's partitions: waits (bounded) until
    ``expected`` arrived (orphaned transactions hold later output back until their timeout), then reads on
    until nothing more is available."""
    client = pulsar.Client(url)
    try:
        readers = [client.create_reader(f"{topic}-partition-{p}", pulsar.MessageId.earliest)
                   for p in range(PARTITIONS)]
        got: list[str] = []
        for _ in range(timeout_ms // 500):  # bounded
            for reader in readers:
                while reader.has_message_available():
                    got.append(reader.read_next(10_000).data().decode())
            if len(got) >= expected:
                break
            try:
                got.append(readers[0].read_next(500).data().decode())  # wait on the broker, not on a sleep
            except pulsar.Timeout:
                continue
        for reader in readers:  # and nothing beyond
            while reader.has_message_available():
                got.append(reader.read_next(10_000).data().decode())
        return got
    finally:
        client.close()


@pytest.mark.timeout(900)  # the first one waits for four Spark drivers to start and be killed
@pytest.mark.parametrize("point", list(POINTS))
def test_killed_driver_restarts_to_exactly_once_output(
    point: str, crashed: dict[str, Crashed], spark: SparkSession, broker: BrokerProcess
) -> None:
    run = crashed[point]
    query = start_query(spark, broker.url, run.source, run.sink, str(run.checkpoint), run.txn_timeout_ms)
    assert query.awaitTermination(300), "the restarted query did not finish"
    assert query.exception() is None, query.exception()
    got = read_all(broker.url, run.sink, ROWS, timeout_ms=run.txn_timeout_ms + 60_000 if run.txn_timeout_ms
                   == SHORT_TXN_MS else 60_000)
    assert sorted(got) == sorted(v.upper() for v in run.sent), (point, len(got))
