"""magnetar's benchmark suite: one command starts brokers, runs the standard workloads, writes the result table.

    .venv/bin/python bench/suite.py [--repeats 2] [--quick] [--only NAME ...] [--peers DIR] [--profile]
                                    [--backlog-gb 10] [--out bench/results]

Every workload starts its own ``magnetar standalone`` (fresh data directory, ``tests/integration/broker_process``)
and drives it with ``magnetar perf --json`` (the official pulsar-client unless the workload says otherwise;
``--processes N`` where one client process would be the limit), so the figures are what a user of ``magnetar
perf`` sees. Server CPU comes from ``/proc/<pid>/stat`` (user + system ticks over the measured run, divided by
the messages: the broker's own cost, whatever limits the client), RSS from ``/proc/<pid>/status``. Each workload
runs ``--repeats`` times; the table shows the best figure and the spread (other jobs share this machine, so runs
are noisy). ``--peers DIR`` (or ``MAGNETAR_PEERBENCH``) runs the shared peer harness in the same run and shows
its figures and the ratio magnetar / peer beside each row (bench/peers.py). ``--profile`` records py-spy flame
graphs and top-functions texts of the broker (bench/profiles.py). Writes ``<out>/latest.md`` and
``<out>/latest.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import scale  # noqa: E402
from bench.peers import PeerResults, harness_dir, run_peers  # noqa: E402
from bench.profiles import Profiler  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

PERF_TIMEOUT_S = 1_200
CLK_TCK = os.sysconf("SC_CLK_TCK")
UNBATCHED_PROCESSES = 3  # enough official-client processes that the client is not the limit on 2 cores


@dataclass(frozen=True)
class Target:
    """One row of the issue's table: a workload's figure against its aim, with the peers' figures to compare."""

    row: str
    figure: str  # key in a run's figures
    goal: float
    higher_is_better: bool
    peers: tuple[tuple[str, str], ...] = ()  # (peer, figure) in PeerResults

    def met(self, value: float) -> bool:
        return value >= self.goal if self.higher_is_better else value <= self.goal

    def text(self) -> str:
        return f"{'≥' if self.higher_is_better else '≤'} {self.goal:,g}"


@dataclass
class Workload:
    name: str
    title: str
    run: Callable[[Run], dict[str, float]]
    fsync: bool = True
    perf_args: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()
    profile: str | None = None  # profile name when --profile
    command: str = ""
    own_broker: bool = False  # the run starts its brokers itself
    runs: list[dict[str, float]] = field(default_factory=list)


@dataclass
class Run:
    """What one attempt of a workload gets: its broker, sizes, and the profiler when this attempt is profiled."""

    started: BrokerProcess | None  # None when the workload starts its own
    workload: Workload
    quick: bool
    profiler: Profiler | None
    restart_data: scale.RestartData

    @property
    def broker(self) -> BrokerProcess:
        assert self.started is not None
        return self.started

    @property
    def pid(self) -> int:
        assert self.broker.proc is not None
        return self.broker.proc.pid

    @contextlib.contextmanager
    def profile(self, name: str | None) -> Iterator[None]:
        if self.profiler is None or name is None:
            yield
            return
        with self.profiler.record(self.pid, name):
            yield


# ---- /proc -----------------------------------------------------------------------------------------------


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime (fields 14, 15)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    import pulsar  # noqa: F401 - its version is part of the setup

    try:
        import uvloop
        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio"
    return {
        "cpu": f"{cpu} ({os.cpu_count()} cores visible)", "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(), "python": platform.python_version(), "event loop": loop,
        "pulsar-client": _version("pulsar-client"), "disk": _disk(), "load average at start": _load(),
    }


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def _disk() -> str:
    for line in Path("/proc/mounts").read_text().splitlines():
        device, mount, kind = line.split()[:3]
        if mount == "/":
            return f"{device} {kind}"
    return "?"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---- running perf ------------------------------------------------------------------------------------


def perf(broker: BrokerProcess, verb: str, *args: str, timeout_s: float = PERF_TIMEOUT_S) -> dict[str, Any]:
    """One ``magnetar perf --json`` run; it reads the broker's CPU over its measured time (``--broker-pid``)."""
    assert broker.proc is not None
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", verb, *args, "-u", broker.url,
           "--admin-url", broker.web_url, "--json", "--no-progress", "--broker-pid", str(broker.proc.pid)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def flow_figures(prefix: str, flow: dict[str, Any]) -> dict[str, float]:
    lat = flow["latency_ms"]
    return {
        f"{prefix} msg/s": flow["msg_per_s"], f"{prefix} MB/s": flow["mb_per_s"],
        f"{prefix} p50 ms": lat["p50"], f"{prefix} p99 ms": lat["p99"], f"{prefix} p999 ms": lat["p999"],
        f"{prefix} errors": flow["errors"],
    }


def measured(run: Run, fn: Callable[[], dict[str, Any]], flow: str) -> dict[str, float]:
    """Run ``fn`` (a perf run, profiled when asked); add the broker's CPU per message and RSS to its figures."""
    before_s = cpu_s(run.pid)
    with run.profile(run.workload.profile):
        document = fn()
    # the broker's CPU over perf's measured time (after connecting and warming up), else over the whole call
    used_s = document.get("server", {}).get("cpu_s", cpu_s(run.pid) - before_s)
    figures = flow_figures(flow, document["totals"][flow])
    messages = document["totals"][flow]["messages"]
    figures["server CPU µs/msg"] = used_s / messages * 1e6 if messages else float("nan")
    figures["server CPU %"] = used_s / document["elapsed_s"] * 100
    figures["broker RSS MiB"] = rss_mib(run.pid)
    return figures


# ---- workloads ---------------------------------------------------------------------------------------


def run_publish(run: Run) -> dict[str, float]:
    w = run.workload
    return measured(run, lambda: perf(run.broker, "produce", f"bench-{w.name}", *w.perf_args), "publish")


def run_consume_backlog(run: Run) -> dict[str, float]:
    broker, topic = run.broker, "bench-backlog"
    count = "100000" if run.quick else "500000"
    perf(broker, "consume", topic, "-m", "1", "--test-duration", "0.5")  # the subscription keeps the backlog
    perf(broker, "produce", topic, "-m", count, "--sample-every", "100", "--max-pending", "5000")
    return measured(run, lambda: perf(broker, "consume", topic, "-m", count, *run.workload.perf_args), "consume")


def run_e2e(run: Run) -> dict[str, float]:
    duration = "10" if run.quick else "30"
    figures = measured(run, lambda: perf(run.broker, "e2e", "bench-e2e", "--test-duration", duration,
                                         *run.workload.perf_args), "consume")
    return {k.replace("consume", "e2e"): v for k, v in figures.items()}


def run_topics(run: Run) -> dict[str, float]:
    """Create topics + subscriptions (the rate), let the broker settle, then its idle CPU and RSS."""
    count = scale.TOPICS_QUICK if run.quick else scale.TOPICS_FULL
    base_mib = rss_mib(run.pid)
    with run.profile("topic-create"):
        elapsed_s = scale.create_topics(run.broker.url, count)
    settle_s, idle_s = (5.0, 10.0) if run.quick else (scale.SETTLE_S, scale.IDLE_S)
    scale.idle_cpu_percent(run.pid, settle_s, cpu_s)  # creation's after-work (flushes, timers) ends here
    with run.profile("idle"):
        idle = scale.idle_cpu_percent(run.pid, idle_s, cpu_s)
    rss = rss_mib(run.pid)
    return {"topics": count, "topics+subs created /s": count / elapsed_s, "idle CPU % of a core": idle,
            "broker RSS MiB": rss, "RSS before MiB": base_mib, "KiB per topic": (rss - base_mib) * 1024 / count}


def run_restart(run: Run) -> dict[str, float]:
    data = run.restart_data
    data_dir = data.ensure()
    figures = scale.time_restart(data_dir, data.topics)
    return {**figures, "topics": data.topics, "backlog GB": data.backlog_gb, "data dir build s": data.build_s}


def workloads(quick: bool, backlog_gb: float) -> list[Workload]:
    n_batched = "200000" if quick else "1000000"
    n_unbatched = "60000" if quick else "300000"
    batched = ("-s", "1024", "-m", n_batched, "--sample-every", "100", "--max-pending", "5000")
    unbatched = ("-s", "1024", "-m", n_unbatched, "--no-batching", "--sample-every", "10", "--max-pending", "1000",
                 "--processes", str(UNBATCHED_PROCESSES))
    backlog = ("--initial-position", "earliest", "-q", "5000")
    topics = f"{scale.TOPICS_QUICK if quick else scale.TOPICS_FULL:,}"
    rabbit, redis, nats = "RabbitMQ stream", "Redis", "NATS JetStream"
    return [
        Workload("publish-unbatched", f"publish 1 KiB unbatched (fsync on), {UNBATCHED_PROCESSES} client processes",
                 run_publish, perf_args=unbatched, profile="publish-unbatched", targets=(
                     Target("broker CPU per unbatched 1 KiB publish (µs)", "server CPU µs/msg", 15, False),
                     Target("unbatched publish, official client (msg/s)", "publish msg/s", 60_000, True))),
        Workload("e2e-1000", "end to end, 1,000 msg/s unbatched (fsync on)", run_e2e,
                 perf_args=("-r", "1000", "--no-batching", "-s", "1024"), targets=(
                     Target("e2e latency p99 at 1,000 msg/s, unbatched, fsync on (ms)", "e2e p99 ms", 0.7, False,
                            (("Redis appendfsync always", "e2e p99 ms"), ("one 4 KiB append + fsync", "sync p50 ms"),
                             ("one 4 KiB overwrite + fdatasync", "sync p50 ms"))),)),
        Workload("publish-batched", "publish 1 KiB batched (fsync on)", run_publish, perf_args=batched,
                 profile="publish", targets=(
                     Target("broker CPU per batched 1 KiB publish (µs)", "server CPU µs/msg", 1.0, False,
                            ((rabbit, "publish CPU µs/msg"), (redis, "publish CPU µs/msg"),
                             (nats, "publish CPU µs/msg"))),)),
        Workload("consume-backlog", "consume 1 KiB from backlog (cumulative acks)", run_consume_backlog,
                 perf_args=(*backlog, "--ack-mode", "cumulative"), profile="dispatch", targets=(
                     Target("broker CPU per consumed message, cumulative acks, backlog (µs)", "server CPU µs/msg",
                            0.5, False, ((rabbit, "consume CPU µs/msg"), (redis, "consume CPU µs/msg"),
                                         (nats, "consume CPU µs/msg"))),)),
        Workload("consume-backlog-individual", "consume 1 KiB from backlog (individual acks, the default)",
                 run_consume_backlog, perf_args=(*backlog, "--ack-mode", "individual"), profile="dispatch-individual",
                 targets=(Target("broker CPU per consumed message, individual acks (µs)", "server CPU µs/msg", 2.0,
                                 False, ((redis, "consume CPU µs/msg"), (rabbit, "consume CPU µs/msg"))),)),
        Workload("topics", f"{topics} topics + a subscription each (official client, {scale.CREATE_THREADS} threads),"
                 " then idle", run_topics, targets=(
                     Target("topics + subscriptions created per second", "topics+subs created /s", 5_000, True),
                     Target(f"RSS for {topics} idle topics with a subscription each (MiB)", "broker RSS MiB", 100,
                            False),
                     Target(f"broker CPU when idle with {topics} topics (% of a core)", "idle CPU % of a core", 2.0,
                            False))),
        Workload("restart", f"restart with {topics} topics and {backlog_gb:g} GB of backlog", run_restart,
                 own_broker=True, targets=(Target(f"restart to serving with {topics} topics and {backlog_gb:g} GB"
                                                  " of backlog (s)", "restart to serving s", 5.0, False),)),
        Workload("publish-batched-nofsync", "publish 1 KiB batched (fsync off)", run_publish, fsync=False,
                 perf_args=batched),
        Workload("publish-unbatched-nofsync", "publish 1 KiB unbatched (fsync off)", run_publish, fsync=False,
                 perf_args=unbatched),
        Workload("publish-magnetar-client", "publish 1 KiB batched, magnetar.client (fsync on)", run_publish,
                 perf_args=(*batched, "--client", "magnetar")),
        Workload("topics-100", "100 topics x 1 producer, 1 KiB batched", run_publish,
                 perf_args=("-t", "100", "-s", "1024", "-m", "200000" if not quick else "50000",
                            "--sample-every", "100", "--max-pending", "2000")),
    ]


# ---- the suite ---------------------------------------------------------------------------------------


def run_workload(w: Workload, repeats: int, quick: bool, profiler: Profiler | None,
                 restart_data: scale.RestartData) -> None:
    for attempt in range(repeats):
        profiling = profiler if attempt == repeats - 1 else None
        try:
            figures = _attempt(w, quick, profiling, restart_data)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            print(f"  {w.name} run {attempt + 1} FAILED: {exc}", flush=True)
            continue
        w.runs.append(figures)
        print(f"  {w.name} run {attempt + 1}: " + ", ".join(f"{k} {v:,.3g}" for k, v in figures.items()),
              flush=True)


def _attempt(w: Workload, quick: bool, profiler: Profiler | None, restart_data: scale.RestartData) -> dict[str, float]:
    if w.own_broker:
        return w.run(Run(None, w, quick, profiler, restart_data))
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-") as tmp:
        args = ("--set", f"journalSyncData={str(w.fsync).lower()}")
        broker = BrokerProcess(Path(tmp) / "data", extra_args=args).start()
        try:
            return w.run(Run(broker, w, quick, profiler, restart_data))
        finally:
            broker.kill()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run, ~5 minutes)")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=False,
                        help="py-spy flame graphs + top functions into <out>/profiles")
    parser.add_argument("--peers", nargs="?", const="", default=None, metavar="DIR",
                        help="run the peer harness (its directory; default $MAGNETAR_PEERBENCH)")
    parser.add_argument("--peer-repeats", type=int, default=1, help="trials per peer")
    parser.add_argument("--backlog-gb", type=float, default=None,
                        help="backlog for the restart workload (default 10, --quick 1)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from bench.report import write_results

    topics = scale.TOPICS_QUICK if args.quick else scale.TOPICS_FULL
    backlog_gb = args.backlog_gb if args.backlog_gb is not None else (1.0 if args.quick else 10.0)
    chosen = [w for w in workloads(args.quick, backlog_gb) if args.only is None or w.name in args.only]
    about = machine()
    profiler = Profiler(args.out / "profiles") if args.profile else None
    restart_data = scale.RestartData(topics, backlog_gb, lambda b, topic, a: perf(
        b, "produce", topic, *a, timeout_s=scale.BUILD_TIMEOUT_S))
    started = time.time()
    try:
        for w in chosen:
            print(f"{w.name}: {w.title}", flush=True)
            w.command = command_of(w)
            run_workload(w, args.repeats, args.quick, profiler, restart_data)
    finally:
        about["restart data"] = restart_data.describe()
        restart_data.close()
    peers = _peers(args)
    about["load average at end"] = _load()
    write_results(args.out, chosen, about, args, peers, time.time() - started)
    print(f"wrote {args.out / 'latest.md'}")


def _peers(args: argparse.Namespace) -> PeerResults:
    if args.peers is None:
        return PeerResults(note="not run (no --peers)")
    directory = harness_dir(args.peers or None)
    if directory is None:
        return PeerResults(note="not run: --peers without a directory and no MAGNETAR_PEERBENCH")
    print(f"peers: {directory}", flush=True)
    results = run_peers(directory, args.quick, args.peer_repeats)
    print(f"  peers: {json.dumps(results.figures)} {results.note}", flush=True)
    return results


def command_of(w: Workload) -> str:
    verb = {"run_publish": "produce", "run_consume_backlog": "consume", "run_e2e": "e2e"}.get(w.run.__name__)
    if verb is None:
        return "bench/suite.py --only " + w.name
    fsync = "" if w.fsync else " (broker --set journalSyncData=false)"
    return f"magnetar perf {verb} {' '.join(w.perf_args)}{fsync}"


if __name__ == "__main__":
    main()
