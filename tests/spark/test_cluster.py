"""The connector on a real Spark standalone cluster (a master and two workers, ``cluster.py``): executors are
processes of their own, started by the workers, so every option, partition, writer and commit message crosses a
pickle and every module is imported fresh on the workers.

Two drivers run, in client mode, each in a process of its own. The first, with magnetar installed where its
executors run (the test interpreter), runs the exactly-once query and is SIGKILLed while its rows sit in its tasks'
open transactions (on the executors). The second (``cluster_jobs``) gives its executors an interpreter without
magnetar and ships the connector with ``--py-files`` (``spark.submit.pyFiles``: an archive made as the docs say),
and runs the exactly-once query of another topic with one executor SIGKILLed mid-task (Spark retries the task on
another executor), then resumes the killed driver's query on its checkpoint, then a batch write, a batch read, a
streaming read, ``magnetar spark export``, ``magnetar spark audit-ledgers``, and a direct read
(``readFrom=storage``: the executors read a broker's ledgers from a bucket of a real ``moto_server``, with the AWS
credentials ``spark.executorEnv`` gives them). The tests judge what each job left behind with the official client,
right after the driver ends: no waiting for any transaction timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import magnetar
from magnetar.client.sync import Client
from magnetar.spark.sink_state import SinkFiles
from magnetar.spark.test_hooks import ENV
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS, MotoServer
from tests.spark.cluster import SparkCluster, executor_of
from tests.spark.conftest import (
    PARTITIONS,
    planned_ledger_ranges,
    produce,
    send_kinds,
    storage_options,
    topic_name,
)
from tests.spark.crash import open_txns, read_now, wait_and_kill
from tests.spark.eo_job import SINK_ID
from tests.spark.test_ledger_audit import make_data_dir

DRIVER_TIMEOUT_S = 900.0
EO_ROWS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    spark_cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()


@dataclass
class Run:
    """What the test drivers were given, and what they returned."""

    work: Path
    topics: dict[str, str] = field(default_factory=dict)
    sent: dict[str, list[str]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    killed_executor: int | None = None
    audit_expected: tuple[set[int], tuple[str, int]] = (set(), ("", 0))
    driver_log: Path | None = None

    def job(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.results.get(name, {"ok": False, "error": "did not run"})
        assert result["ok"], f"{name} failed on the cluster:\n{result.get('error')}\n(driver log: {self.driver_log})"
        return result


def _kill_driver_mid_task(cluster: SparkCluster, broker: BrokerProcess, run: Run) -> None:
    """The first driver: stopped by the hook in an executor with rows in its open transaction, then SIGKILLed."""
    hooks = run.work / "driver-hook"
    hooks.mkdir()
    conf = {**cluster.driver_conf(), f"spark.executorEnv.{ENV}": f"task_written:{hooks}"}
    log = run.work / "killed-driver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.eo_job", broker.url, run.topics["k_in"], run.topics["k_out"],
             str(run.work / "k-cp"), "600000", json.dumps(conf)],
            env={**os.environ, "PYSPARK_PYTHON": str(cluster.python)}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_and_kill(proc, hooks / "task_written", log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)


def _kill_executor(signal_file: Path) -> int:
    pid = int(signal_file.read_text())
    executor = executor_of(pid)
    assert executor is not None, f"the hooked Python worker {pid} has no executor JVM above it"
    os.kill(executor, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return executor


def _pyfiles(work: Path) -> Path:
    """The connector's archive for ``--py-files``, made the way docs/guide/spark.md says."""
    archive = work / "magnetar.zip"
    home = Path(magnetar.__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "zipfile", "-c", str(archive), "magnetar/", "pyspark_pulsar/"], cwd=home,
                   check=True, timeout=120)
    return archive


def _run_jobs(cluster: SparkCluster, broker: BrokerProcess, run: Run, jobs: list[list[Any]]) -> None:
    """The second driver: runs ``jobs``; the first of its tasks to finish sending loses its executor."""
    hooks = run.work / "executor-hook"
    hooks.mkdir()
    spec = run.work / "spec.json"
    conf = {**cluster.driver_conf(), **cluster.pyfiles_conf(_pyfiles(run.work)),
            f"spark.executorEnv.{ENV}": f"task_written:{hooks}",
            **{f"spark.executorEnv.{key}": value for key, value in CREDENTIALS.items()}}  # the workers' AWS chain
    spec.write_text(json.dumps({"conf": conf, "url": broker.url, "jobs": jobs}))
    result = run.work / "result.json"
    run.driver_log = run.work / "jobs-driver.log"
    with run.driver_log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.spark.cluster_jobs", str(spec), str(result)],
                                env={**os.environ, "PYSPARK_PYTHON": str(cluster.python)}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + DRIVER_TIMEOUT_S
    try:
        while proc.poll() is None:  # bounded by the deadline
            signal_file = hooks / "task_written"
            if run.killed_executor is None and signal_file.exists() and signal_file.read_text():
                run.killed_executor = _kill_executor(signal_file)
            try:
                proc.wait(0.5)
            except subprocess.TimeoutExpired:
                assert time.monotonic() < deadline, f"the jobs driver did not finish; log in {run.driver_log}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
    if result.exists():
        run.results = json.loads(result.read_text())


@pytest.fixture(scope="module")
def ran(cluster: SparkCluster, broker: BrokerProcess, client: Client, s3_broker: BrokerProcess, moto: MotoServer,
        tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = Run(tmp_path_factory.mktemp("on-cluster"))
    run.topics["direct"] = topic_name("cluster-direct")
    with Client(s3_broker.url, operation_timeout_ms=15_000) as s3_client:
        send_kinds(s3_client, run.topics["direct"], chunks=True, txns=True)
    for name in ("eo_in", "eo_out", "k_in", "k_out", "write", "read", "stream", "export"):
        run.topics[name] = topic_name(f"cluster-{name.replace('_', '-')}")
    run.sent["eo_in"] = list(produce(client, run.topics["eo_in"], EO_ROWS, prefix="eo"))
    run.sent["k_in"] = list(produce(client, run.topics["k_in"], 60, prefix="k"))
    run.sent["read"] = list(produce(client, run.topics["read"], 120, prefix="r"))
    run.sent["stream"] = list(produce(client, run.topics["stream"], 150, prefix="s"))
    run.sent["export"] = list(produce(client, run.topics["export"], 90, prefix="x"))
    audit_dir = run.work / "audit-data"
    audit_dir.mkdir()
    run.audit_expected = asyncio.run(make_data_dir(audit_dir))
    _kill_driver_mid_task(cluster, broker, run)
    _run_jobs(cluster, broker, run, [
        ["where", {}],
        ["eo_stream", {"source": run.topics["eo_in"], "sink": run.topics["eo_out"],
                       "checkpoint": str(run.work / "eo-cp")}],
        ["restart", {"source": run.topics["k_in"], "sink": run.topics["k_out"], "checkpoint": str(run.work / "k-cp")}],
        ["write", {"topic": run.topics["write"], "rows": 400}],
        ["read", {"topic": run.topics["read"]}],
        ["read_stream", {"topic": run.topics["stream"], "out": str(run.work / "stream-out"),
                         "checkpoint": str(run.work / "stream-cp")}],
        ["export", {"topic": run.topics["export"], "out": str(run.work / "export.parquet")}],
        ["audit", {"data_dir": str(audit_dir)}],
        ["direct_read", {"url": s3_broker.url, "admin": s3_broker.web_url, "topic": run.topics["direct"],
                         "storage": storage_options(moto)}],
    ])
    return run


def _assert_exactly_once_now(broker: BrokerProcess, run: Run, out: str, source: str, checkpoint: Path) -> None:
    got = read_now(broker.url, run.topics[out])
    assert sorted(got) == sorted(v.upper() for v in run.sent[source]), (out, len(got), len(set(got)))
    assert open_txns(broker.web_url, run.topics[out]) == [0] * PARTITIONS
    assert SinkFiles(str(checkpoint), SINK_ID).open_records() == []


@pytest.mark.timeout(1800)  # the first test starts the cluster and both drivers
def test_exactly_once_survives_a_killed_executor(ran: Run, broker: BrokerProcess) -> None:
    ran.job("eo_stream")
    assert ran.killed_executor is not None, "no executor was killed: the hook point was never reached"
    _assert_exactly_once_now(broker, ran, "eo_out", "eo_in", ran.work / "eo-cp")


def test_exactly_once_survives_a_killed_driver(ran: Run, broker: BrokerProcess) -> None:
    ran.job("restart")
    _assert_exactly_once_now(broker, ran, "k_out", "k_in", ran.work / "k-cp")


def test_executors_import_the_connector_from_py_files(ran: Run) -> None:
    files = ran.job("where")["files"]
    assert files and all(f.endswith("/magnetar.zip/magnetar/__init__.py") for f in files), files


def test_batch_write(ran: Run, client: Client) -> None:
    ran.job("write")
    got = [m for p in range(PARTITIONS) for m in client.read(
        f"{ran.topics['write']}-partition-{p}", start="earliest", end="latest", timeout_ms=10_000)]
    assert sorted((m.data.decode(), m.key) for m in got) == sorted((f"w-{i}", f"k{i}") for i in range(400))


def test_batch_read(ran: Run) -> None:
    result = ran.job("read")
    assert result["values"] == sorted(ran.sent["read"])
    assert result["partitions"] == list(range(PARTITIONS))


def test_streaming_read(ran: Run) -> None:
    result = ran.job("read_stream")
    assert result["values"] == sorted(ran.sent["stream"])
    assert result["batches"] >= 150 // 40


def test_export_command(ran: Run) -> None:
    result = ran.job("export")
    assert result["code"] == 0, result["stdout"]
    table = pq.read_table(ran.work / "export.parquet")
    assert sorted(v.decode() for v in table.column("value").to_pylist()) == sorted(ran.sent["export"])


def test_ledger_audit_command(ran: Run) -> None:
    result = ran.job("audit")
    orphans, dangling = ran.audit_expected
    assert result["code"] == 1  # it found what make_data_dir planted
    report = json.loads(result["stdout"])
    assert {o["ledger_id"] for o in report["orphans"]} == set(orphans)
    assert [[d["managed_ledger"], d["ledger_id"]] for d in report["dangling"]] == [list(dangling)]


def test_direct_read_from_the_bucket_equals_the_broker_read(ran: Run, s3_broker: BrokerProcess,
                                                            moto: MotoServer) -> None:
    result = ran.job("direct_read")
    assert result["broker"] and result["storage"] == result["broker"]
    topic = ran.topics["direct"]
    assert planned_ledger_ranges(s3_broker.url, s3_broker.web_url, topic, storage_options(moto)) > 2 * PARTITIONS
