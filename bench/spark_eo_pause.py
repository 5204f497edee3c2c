"""How long the exactly-once sink's output pauses after a crash, and how many rows the crash makes Spark redo.

    .venv/bin/python bench/spark_eo_pause.py [--rows 4000] [--rows-per-batch 1000] [--modes local,cluster]

For each kind of kill, a streaming copy (``availableNow``, ``deliveryGuarantee=exactly_once``, checkpoint on local
disk) of ``rows`` rows runs in a driver process of its own (``tests/spark/eo_job.py``) and is killed at a sink point
(``MAGNETAR_SPARK_TEST_HOOK``): the driver SIGKILLed after a task opened its transaction, after the tasks sent their
rows, before the commit, after the intent, after the commit; or one executor SIGKILLed after its task sent its rows
(the driver goes on; Spark retries the task). After a driver kill a new driver restarts the query on the same
checkpoint at once, as a supervisor would. An official consumer (subscribed from the earliest message before the
run) timestamps every row as it becomes visible.

Reported per kind: ``pause_s`` (from the kill until the next row became visible), ``restart_s`` (from the kill until
the restarted query ended), ``after_end_s`` (from the end until the last row was visible: 0 means nothing waited for
a transaction timeout), ``redone`` (rows sent but discarded: the output topics' msgInCounter minus ``rows``), and the
same figures for a clean run (no kill) from its start, the floor any restart pays (a JVM and a Spark session).
Each kind runs in each mode, one after the other, and a table at the end puts the modes side by side: ``local``, the
driver on ``local[2,4]`` (four task attempts, so a killed Python worker is retried); ``cluster``, a standalone
master and two workers (``tests/spark/cluster.py``), where the executor kill takes the executor JVM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulsar

from magnetar.spark.test_hooks import ENV
from tests.integration.broker_process import BrokerProcess
from tests.spark.cluster import SparkCluster, executor_of

PARTITIONS = 3
DRIVER_POINTS = ("txn_opened", "task_written", "commit_start", "intent_written", "committed")
WAIT_S = 900.0


@dataclass
class Watch:
    """An official consumer's view of the output topic: when each row became visible."""

    url: str
    topic: str
    seen: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Watch:
        self._client = pulsar.Client(self.url)
        self._consumer = self._client.subscribe(self.topic, "pause-watch",
                                                initial_position=pulsar.InitialPosition.Earliest)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                msg = self._consumer.receive(200)
            except pulsar.Timeout:
                continue
            self.seen.append((time.time(), msg.data().decode()))
            self._consumer.acknowledge(msg)

    def wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while len({v for _, v in self.seen}) < count and time.time() < deadline:  # bounded
            time.sleep(0.05)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(10)
        self._client.close()


def _produce(url: str, topic: str, rows: int) -> None:
    client = pulsar.Client(url)
    producer = client.create_producer(topic, block_if_queue_full=True, batching_enabled=True)
    for i in range(rows):
        producer.send_async(f"r{i}".encode(), None, partition_key=f"k{i}")
    producer.flush()
    client.close()


def _msg_in(web_url: str, topic: str) -> int:
    name = topic.removeprefix("persistent://")
    with urllib.request.urlopen(f"{web_url}/admin/v2/persistent/{name}/partitioned-stats", timeout=30) as resp:
        return int(json.load(resp)["msgInCounter"])


def _driver(url: str, source: str, sink: str, cp: Path, conf: dict[str, str], env: dict[str, str],
            log: Path, per_batch: int) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.eo_job", url, source, sink, str(cp), "600000", json.dumps(conf),
             str(per_batch)],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=str(Path(__file__).resolve().parents[1]))


def _wait_hook(proc: subprocess.Popen[bytes], signal_file: Path) -> None:
    deadline = time.time() + WAIT_S
    while not (signal_file.exists() and signal_file.read_text()):  # bounded
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{signal_file.name} was not reached (driver exit code {proc.poll()})")
        time.sleep(0.05)


def run_one(kind: str, broker: BrokerProcess, base_conf: dict[str, str], rows: int, per_batch: int,
            work: Path, cluster: bool) -> dict[str, float | int | str]:
    tag = uuid.uuid4().hex[:6]
    source = f"persistent://public/default/pause-in-{kind}-{tag}"
    sink = f"persistent://public/default/pause-out-{kind}-{tag}"
    _produce(broker.url, source, rows)
    watch = Watch(broker.url, sink).start()
    cp, hooks = work / f"cp-{kind}", work / f"hooks-{kind}"
    hooks.mkdir(parents=True)
    conf = dict(base_conf)
    point = {"executor": "task_written", "clean": ""}.get(kind, kind)
    hook = {ENV: f"{point}:{hooks}"} if point else {}
    if cluster and hook:
        conf[f"spark.executorEnv.{ENV}"] = hook[ENV]
    log = work / f"driver-{kind}.log"
    started = time.time()
    proc = _driver(broker.url, source, sink, cp, conf, hook, log, per_batch)
    kill_t = started
    try:
        if kind in DRIVER_POINTS:
            _wait_hook(proc, hooks / point)
            os.killpg(proc.pid, signal.SIGKILL)
            kill_t = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(int((hooks / point).read_text()), signal.SIGKILL)
            proc.wait(60)
            proc = _driver(broker.url, source, sink, cp, conf, {}, log, per_batch)
        elif kind == "executor":
            _wait_hook(proc, hooks / point)
            worker = int((hooks / point).read_text())
            victim = executor_of(worker) if cluster else worker
            if victim is None:
                raise RuntimeError(f"no executor JVM above Python worker {worker}")
            os.kill(victim, signal.SIGKILL)
            kill_t = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
        code = proc.wait(WAIT_S)
        ended = time.time()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
    watch.wait_for(rows, 30.0)
    watch.close()
    values = [v for _, v in watch.seen]
    after_kill = [t for t, _ in watch.seen if t > kill_t]
    return {
        "kind": kind, "exit": code, "visible": len(set(values)), "duplicates": len(values) - len(set(values)),
        "pause_s": round(min(after_kill) - kill_t, 1) if after_kill else -1.0,
        "restart_s": round(ended - kill_t, 1),
        "after_end_s": round(max(0.0, max(t for t, _ in watch.seen) - ended), 1) if watch.seen else -1.0,
        "redone": _msg_in(broker.web_url, sink) - rows,
    }


def _table(results: dict[tuple[str, str], dict[str, float | int | str]], modes: list[str], kinds: list[str]) -> None:
    """The figures of every kind, the modes side by side."""
    def cell(kind: str, key: str) -> str:
        return " / ".join(str(results[(m, kind)][key]) if (m, kind) in results else "-" for m in modes)

    print(f"\n{'killed':<16} {'pause_s':>16} {'restart_s':>16} {'after_end_s':>12} {'redone':>12} "
          f"{'visible':>12} {'dup':>6}   ({' / '.join(modes)})")
    for kind in kinds:
        print(f"{kind:<16} {cell(kind, 'pause_s'):>16} {cell(kind, 'restart_s'):>16} {cell(kind, 'after_end_s'):>12} "
              f"{cell(kind, 'redone'):>12} {cell(kind, 'visible'):>12} {cell(kind, 'duplicates'):>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--rows-per-batch", type=int, default=1000)
    parser.add_argument("--modes", default="local,cluster", help="local (local[2,4]) and/or cluster (2 workers)")
    parser.add_argument("--kinds", default=",".join(("clean", *DRIVER_POINTS, "executor")))
    args = parser.parse_args()
    modes, kinds = args.modes.split(","), args.kinds.split(",")
    results: dict[tuple[str, str], dict[str, float | int | str]] = {}
    print(f"{args.rows} rows, {args.rows_per_batch} per micro-batch, {PARTITIONS} output partitions, "
          f"txnTimeoutMs 600000; modes {', '.join(modes)}")
    with tempfile.TemporaryDirectory(prefix="eo-pause-") as tmp:
        work = Path(tmp)
        broker = BrokerProcess(work / "data", extra_args=(
            "--set", "allowAutoTopicCreationType=partitioned", "--set", f"defaultNumPartitions={PARTITIONS}",
            "--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1")).start()
        try:
            for mode in modes:
                spark_cluster = SparkCluster(work / "spark-cluster").start() if mode == "cluster" else None
                base = (spark_cluster.driver_conf() if spark_cluster else
                        {"spark.master": "local[2,4]", "spark.ui.enabled": "false",
                         "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m"})
                try:
                    for kind in kinds:
                        result = run_one(kind, broker, base, args.rows, args.rows_per_batch, work / mode,
                                         spark_cluster is not None)
                        results[(mode, kind)] = result
                        print(json.dumps({"mode": mode, **result}), flush=True)
                finally:
                    if spark_cluster is not None:
                        spark_cluster.stop()
        finally:
            broker.kill()
    _table(results, modes, kinds)


if __name__ == "__main__":
    main()
