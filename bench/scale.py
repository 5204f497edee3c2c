"""Topic-scale workloads: create many topics with a subscription each, their idle cost, and restart with a backlog.

Topics are created as a user would, with the official client: ``subscribe`` (the lookup creates the topic, the
subscribe creates a durable subscription), then ``close`` (the subscription stays). Several threads of one client
do it at once, since a subscribe is a round trip. The restart workload builds its data directory once per suite
run (topics, subscriptions and a backlog written through a broker with fsync off, to be quick), then times a
fresh ``magnetar standalone`` on it from process start until a lookup + produce + consume on a random topic
works.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.integration import broker_process
from tests.integration.broker_process import BrokerProcess

TOPICS_FULL = 10_000
TOPICS_QUICK = 1_000
CREATE_THREADS = 8
SETTLE_S = 10.0
IDLE_S = 30.0
BUILD_TIMEOUT_S = 3_600
STOP_TIMEOUT_S = 120.0
PROBE_TIMEOUT_S = 600.0
PROBE_OP_TIMEOUT_S = 5
PROBE_RETRY_S = 0.05
BACKLOG_TOPICS = 50  # the backlog is spread over this many of the topics
BACKLOG_MESSAGE_BYTES = 16 * 1024
TOPIC_PREFIX = "bench-scale"


def topic_name(index: int) -> str:
    return f"persistent://public/default/{TOPIC_PREFIX}-{index}"


def create_topics(url: str, count: int, threads: int = CREATE_THREADS) -> float:
    """Create ``count`` topics each with subscription ``sub`` (official client, ``threads`` at once); seconds."""
    import pulsar

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), operation_timeout_seconds=60)
    failures: list[BaseException] = []

    def worker(first: int) -> None:
        try:
            for index in range(first, count, threads):
                client.subscribe(topic_name(index), "sub").close()
        except Exception as exc:  # reported after the join
            failures.append(exc)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed_s = time.perf_counter() - started
    finally:
        client.close()
    if failures:
        raise RuntimeError(f"creating topics failed: {failures[0]}")
    return elapsed_s


def idle_cpu_percent(pid: int, seconds: float, cpu_s: Callable[[int], float]) -> float:
    """The broker's CPU over ``seconds`` of doing nothing, as % of one core (a bounded wait, no client)."""
    before_s, started = cpu_s(pid), time.perf_counter()
    threading.Event().wait(seconds)
    return (cpu_s(pid) - before_s) / (time.perf_counter() - started) * 100


# ---- restart -------------------------------------------------------------------------------------------


class RestartData:
    """One data directory with ``topics`` topics + subscriptions and ``backlog_gb`` of backlog, built on first use."""

    def __init__(self, topics: int, backlog_gb: float,
                 produce: Callable[[BrokerProcess, str, tuple[str, ...]], dict[str, Any]]) -> None:
        self.topics = topics
        self.backlog_gb = backlog_gb
        self._produce = produce
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.build_s = 0.0
        self.note = ""
        self.stop_note = ""

    @property
    def path(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / "data"

    def ensure(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="magnetar-bench-restart-")
            self._check_disk()
            started = time.perf_counter()
            try:
                self._build()
            except BaseException:
                self.close()  # half-built: the next attempt builds afresh
                raise
            self.build_s = time.perf_counter() - started
        return self.path

    def _check_disk(self) -> None:
        assert self._tmp is not None
        free_gb = shutil.disk_usage(self._tmp.name).free / 1e9
        wanted_gb = self.backlog_gb * 1.2 + 1  # the backlog, ledger overhead, the broker's own files
        if free_gb < wanted_gb:
            shrunk = max(0.1, (free_gb - 1) / 1.2)
            self.note = f"only {free_gb:.1f} GB free: backlog cut from {self.backlog_gb:g} GB to {shrunk:.1f} GB"
            print(f"  restart: {self.note}", flush=True)
            self.backlog_gb = shrunk

    def _build(self) -> None:
        broker = BrokerProcess(self.path, extra_args=("--set", "journalSyncData=false")).start()
        try:
            create_topics(broker.url, self.topics)
            count = int(self.backlog_gb * 1e9 / BACKLOG_MESSAGE_BYTES)
            backlog_topics = min(BACKLOG_TOPICS, self.topics)
            if count:
                self._produce(broker, f"persistent://public/default/{TOPIC_PREFIX}", (
                    "-t", str(backlog_topics), "-s", str(BACKLOG_MESSAGE_BYTES), "-m", str(count),
                    "--processes", "2", "--sample-every", "100", "--max-pending", "500"))
        finally:
            self.stop_note = _stop(broker)

    def describe(self) -> str:
        if self._tmp is None:
            return "not built"
        return (f"{self.topics:,} topics, {self.backlog_gb:g} GB backlog in {BACKLOG_MESSAGE_BYTES // 1024} KiB"
                f" messages over {min(BACKLOG_TOPICS, self.topics)} topics, built in {self.build_s:.0f} s"
                f" ({self.stop_note})"
                + (f"; {self.note}" if self.note else ""))

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _stop(broker: BrokerProcess) -> str:
    """SIGTERM, a bounded wait, then SIGKILL (the backlog is in the page cache either way); says how it went."""
    assert broker.proc is not None
    started = time.perf_counter()
    broker.proc.send_signal(signal.SIGTERM)
    try:
        broker.proc.wait(STOP_TIMEOUT_S)
        return f"its broker stopped {time.perf_counter() - started:.0f} s after SIGTERM"
    except subprocess.TimeoutExpired:
        broker.kill()
        return f"its broker had not stopped {STOP_TIMEOUT_S:.0f} s after SIGTERM: killed"


def time_restart(data_dir: Path, topics: int) -> dict[str, float]:
    """Start a broker on ``data_dir``; seconds until it logs ready and until a random topic serves."""
    started = time.perf_counter()
    with _start_timeout(PROBE_TIMEOUT_S):  # recovery may be silent for longer than a test allows
        broker = BrokerProcess(data_dir).start()
    try:
        ready_s = time.perf_counter() - started
        serving_s = _probe(broker, topic_name(random.randrange(topics)), started)
    finally:
        broker.kill()
    return {"ready line s": ready_s, "restart to serving s": serving_s}


@contextlib.contextmanager
def _start_timeout(seconds: float) -> Iterator[None]:
    previous = broker_process.START_TIMEOUT_S
    broker_process.START_TIMEOUT_S = seconds
    try:
        yield
    finally:
        broker_process.START_TIMEOUT_S = previous


def _probe(broker: BrokerProcess, topic: str, started: float) -> float:
    """Lookup + produce + consume on ``topic``, retried (bounded) until it works; seconds since ``started``."""
    import pulsar

    deadline = started + PROBE_TIMEOUT_S
    while True:
        with contextlib.suppress(Exception), _client(broker.url) as client:
            consumer = client.subscribe(topic, "restart-probe", initial_position=pulsar.InitialPosition.Latest)
            client.create_producer(topic).send(b"probe")
            if consumer.receive(PROBE_OP_TIMEOUT_S * 1000).data() == b"probe":
                return time.perf_counter() - started
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{topic} did not serve within {PROBE_TIMEOUT_S} s of the restart")
        threading.Event().wait(PROBE_RETRY_S)  # bench code: a pause between attempts, not a synchronisation


@contextlib.contextmanager
def _client(url: str) -> Iterator[Any]:
    import pulsar

    client = pulsar.Client(url, operation_timeout_seconds=PROBE_OP_TIMEOUT_S,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        yield client
    finally:
        client.close()
