"""A real Spark standalone cluster for the tests: one master and two workers started from the Spark that ``pyspark``
ships (``spark-class org.apache.spark.deploy.master.Master`` / ``org.apache.spark.deploy.worker.Worker``), on
loopback, with ports Spark picks itself (``--port 0``, read back from the logs, so no race for a free port), work
and scratch directories under a temporary directory, and every process stopped by its id (each daemon leads a
process group of its own, which its executors and their Python workers join).

Startup waits on the daemons' log lines, each wait bounded: the master's URL, then one registration per worker.
``driver_conf`` is what a driver (client mode, on this machine) sets to use the cluster, with ``python`` as its
``PYSPARK_PYTHON``: a script that runs the test interpreter, or, in executors whose environment has
``BARE_ENV`` (``pyfiles_conf`` sets it with ``spark.executorEnv``), an interpreter that has magnetar's dependencies
but not magnetar, as on workers where nothing but ``--py-files`` brings the connector.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final

import pyspark

SPARK_HOME: Final = Path(pyspark.__file__).parent
START_TIMEOUT_S: Final = 180.0  # a JVM start on a loaded 2-core machine
STOP_TIMEOUT_S: Final = 30.0
MASTER_URL: Final = re.compile(r"Starting Spark master at (spark://\S+)")
REGISTERED: Final = re.compile(r"Registering worker (\S+)")
EXECUTOR_MEMORY: Final = "512m"
BARE_ENV: Final = "MAGNETAR_TEST_BARE_PYTHON"


class Daemon:
    """One daemon JVM: its log lines drained into a queue (and kept) by a thread."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log_path = log
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        threading.Thread(target=self._drain, name=f"drain-{name}", daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        with self.log_path.open("a") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: re.Pattern[str], count: int, deadline: float) -> list[str]:
        """The first group of the first ``count`` lines matching ``pattern``; bounded by ``deadline``."""
        found: list[str] = []
        while len(found) < count:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"{self.name}: {pattern.pattern!r} not seen within {START_TIMEOUT_S} s; "
                                   f"log in {self.log_path}") from None
            if line is None:
                raise RuntimeError(f"{self.name} exited during start (code {self.proc.wait()}); log in "
                                   f"{self.log_path}:\n{self.log_path.read_text()[-3000:]}")
            match = pattern.search(line)
            if match:
                found.append(match.group(1))
        return found

    def stop(self) -> None:
        """SIGTERM (a worker then kills its executors), bounded wait, then SIGKILL of the whole group."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(STOP_TIMEOUT_S)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # executors and Python workers left in the group
        self.proc.wait(STOP_TIMEOUT_S)


class SparkCluster:
    """``SparkCluster(tmp).start()`` ... ``.stop()``: a master and ``workers`` workers of one core each."""

    def __init__(self, work: Path, *, workers: int = 2) -> None:
        self.work = work
        self.workers = workers
        self.daemons: list[Daemon] = []
        self.master_url = ""
        self.python = work / "python"

    def _pythons(self) -> None:
        """The bare interpreter (a venv whose only path entry is the test venv's site-packages: the ``.pth``
        files there, the editable magnetar among them, are not read) and the script choosing between the two."""
        bare = self.work / "bare-python"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
        site_packages = Path(pyspark.__file__).parent.parent
        (bare / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / "deps.pth").write_text(
            f"{site_packages}\n")
        self.python.write_text(f'#!/bin/sh\nif [ -n "${BARE_ENV}" ]; then exec {bare}/bin/python "$@"; fi\n'
                               f'exec {sys.executable} "$@"\n')
        self.python.chmod(0o755)

    def _env(self, scratch: Path) -> dict[str, str]:
        conf_dir = self.work / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)  # empty: nothing from the machine's Spark settings
        scratch.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOCAL_DIRS=str(scratch), SPARK_DAEMON_MEMORY="256m")
        env.pop(BARE_ENV, None)
        return env

    def start(self) -> SparkCluster:
        deadline = time.monotonic() + START_TIMEOUT_S
        self.work.mkdir(parents=True, exist_ok=True)
        self._pythons()
        try:
            master = Daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                                       "--webui-port", "0"], self._env(self.work / "master"), self.work / "master.log")
            self.daemons.append(master)
            self.master_url = master.wait_for(MASTER_URL, 1, deadline)[0]
            for i in range(self.workers):
                work_dir = self.work / f"worker-{i}"
                self.daemons.append(Daemon(
                    f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                                    "--webui-port", "0", "--cores", "1", "--memory", "1g", "--work-dir",
                                    str(work_dir), self.master_url],
                    self._env(work_dir / "scratch"), self.work / f"worker-{i}.log"))
            master.wait_for(REGISTERED, self.workers, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for daemon in reversed(self.daemons):  # workers first: the master outlives their goodbyes
            daemon.stop()
        self.daemons.clear()

    def driver_conf(self) -> dict[str, str]:
        """Settings for a client-mode driver on this machine that runs its executors on this cluster (its
        environment must also name ``python`` as ``PYSPARK_PYTHON``: PySpark reads that, not a setting)."""
        return {
            "spark.master": self.master_url, "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": EXECUTOR_MEMORY, "spark.executor.cores": "1", "spark.cores.max": str(self.workers),
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m",
        }

    def pyfiles_conf(self, archive: Path) -> dict[str, str]:
        """Executors without magnetar installed, given it by ``--py-files`` (``spark.submit.pyFiles``) and, as
        Spark puts py-files on the path of RDD tasks only, not of Python data source tasks, by ``PYTHONPATH``
        naming the archive in the executor's directory (where Spark fetches it), as docs/guide/spark.md says."""
        return {"spark.submit.pyFiles": str(archive), "spark.executorEnv.PYTHONPATH": archive.name,
                f"spark.executorEnv.{BARE_ENV}": "1"}


def executor_of(pid: int) -> int | None:
    """The executor JVM (``CoarseGrainedExecutorBackend``) that ``pid`` (a Python worker) descends from."""
    for _ in range(8):  # bounded: worker -> daemon -> executor, a few levels at most
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            return None
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent, after the command name
        if pid <= 1:
            return None
    return None
