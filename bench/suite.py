"""magnetar's benchmark suite: one command starts brokers, runs the standard workloads, writes the result table.

    .venv/bin/python bench/suite.py [--repeats 2] [--quick] [--only NAME ...] [--out bench/results]

Every workload starts its own ``magnetar standalone`` (fresh data directory, ``tests/integration/broker_process``)
and drives it with ``magnetar perf --json`` (the official pulsar-client unless the workload says otherwise), so
the figures are what a user of ``magnetar perf`` sees. Server CPU comes from ``/proc/<pid>/stat`` (user + system
ticks over the measured run), RSS from ``/proc/<pid>/status``. Each workload runs ``--repeats`` times; the table
shows the best figure and the spread (other jobs share this machine, so runs are noisy). The publish and
dispatch paths are profiled with py-spy (``--profile``): flame graph SVGs and a top-functions text beside the
table. Writes ``<out>/latest.md`` and ``<out>/latest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.profiles import Profiler  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

PERF_TIMEOUT_S = 600
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Target:
    figure: str  # key in a run's figures
    goal: float
    higher_is_better: bool

    def met(self, value: float) -> bool:
        return value >= self.goal if self.higher_is_better else value <= self.goal

    def text(self) -> str:
        return f"{'≥' if self.higher_is_better else '≤'} {self.goal:,g}"


@dataclass
class Workload:
    name: str
    title: str
    run: Callable[[BrokerProcess, Workload, bool], dict[str, float]]
    fsync: bool = True
    perf_args: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()
    profile: str | None = None  # profile name when --profile
    command: str = ""
    runs: list[dict[str, float]] = field(default_factory=list)


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


def perf(broker: BrokerProcess, verb: str, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "magnetar.cli", "perf", verb, *args, "-u", broker.url,
           "--admin-url", broker.web_url, "--json", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PERF_TIMEOUT_S, check=False, cwd=ROOT)
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


def measured(broker: BrokerProcess, fn: Callable[[], dict[str, Any]], flow: str) -> dict[str, float]:
    """Run ``fn`` (a perf run); add the broker's CPU per message and RSS to its figures."""
    assert broker.proc is not None
    pid = broker.proc.pid
    before_s = cpu_s(pid)
    document = fn()
    used_s = cpu_s(pid) - before_s
    figures = flow_figures(flow, document["totals"][flow])
    messages = document["totals"][flow]["messages"]
    figures["server CPU µs/msg"] = used_s / messages * 1e6 if messages else float("nan")
    figures["server CPU %"] = used_s / document["elapsed_s"] * 100
    figures["broker RSS MiB"] = rss_mib(pid)
    return figures


# ---- workloads ---------------------------------------------------------------------------------------


def run_publish(broker: BrokerProcess, w: Workload, _quick: bool) -> dict[str, float]:
    return measured(broker, lambda: perf(broker, "produce", f"bench-{w.name}", *w.perf_args), "publish")


def run_consume_backlog(broker: BrokerProcess, w: Workload, quick: bool) -> dict[str, float]:
    topic = "bench-backlog"
    count = "100000" if quick else "500000"
    perf(broker, "consume", topic, "-m", "1", "--test-duration", "0.5")  # the subscription keeps the backlog
    perf(broker, "produce", topic, "-m", count, "--sample-every", "100", "--max-pending", "5000")
    return measured(broker, lambda: perf(broker, "consume", topic, "-m", count, *w.perf_args), "consume")


def run_e2e(broker: BrokerProcess, w: Workload, quick: bool) -> dict[str, float]:
    duration = "10" if quick else "30"
    figures = measured(broker, lambda: perf(broker, "e2e", "bench-e2e", "--test-duration", duration,
                                            *w.perf_args), "consume")
    return {k.replace("consume", "e2e"): v for k, v in figures.items()}


def run_idle_topics(broker: BrokerProcess, w: Workload, quick: bool) -> dict[str, float]:
    import pulsar

    count = 1_000 if quick else 10_000
    assert broker.proc is not None
    base_mib = rss_mib(broker.proc.pid)
    client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    started = time.perf_counter()
    try:
        for i in range(count):
            client.subscribe(f"bench-idle-{i}", "idle-sub").close()
        elapsed_s = time.perf_counter() - started
        rss = rss_mib(broker.proc.pid)
    finally:
        client.close()
    return {"idle topics": count, "broker RSS MiB": rss, "RSS before MiB": base_mib,
            "KiB per topic": (rss - base_mib) * 1024 / count, "topics+subs created /s": count / elapsed_s}


def workloads(quick: bool) -> list[Workload]:
    n_batched = "200000" if quick else "1000000"
    n_unbatched = "30000" if quick else "100000"
    batched = ("-s", "1024", "-m", n_batched, "--sample-every", "100", "--max-pending", "5000")
    unbatched = ("-s", "1024", "-m", n_unbatched, "--no-batching", "--sample-every", "10", "--max-pending", "1000")
    return [
        Workload("publish-batched", "publish 1 KiB batched (fsync on)", run_publish, perf_args=batched,
                 targets=(Target("publish msg/s", 250_000, True), Target("server CPU µs/msg", 2.0, False)),
                 profile="publish"),
        Workload("publish-batched-nofsync", "publish 1 KiB batched (fsync off)", run_publish, fsync=False,
                 perf_args=batched),
        Workload("publish-unbatched", "publish 1 KiB unbatched (fsync on)", run_publish, perf_args=unbatched,
                 targets=(Target("publish msg/s", 50_000, True),), profile="publish-unbatched"),
        Workload("publish-unbatched-nofsync", "publish 1 KiB unbatched (fsync off)", run_publish, fsync=False,
                 perf_args=unbatched),
        Workload("publish-magnetar-client", "publish 1 KiB batched, magnetar.client (fsync on)", run_publish,
                 perf_args=(*batched, "--client", "magnetar")),
        Workload("consume-backlog", "consume 1 KiB from backlog (cumulative acks)", run_consume_backlog,
                 perf_args=("--initial-position", "earliest", "--ack-mode", "cumulative", "-q", "5000"),
                 targets=(Target("consume msg/s", 400_000, True),), profile="dispatch"),
        Workload("consume-backlog-magnetar-client", "consume 1 KiB from backlog, magnetar.client", run_consume_backlog,
                 perf_args=("--initial-position", "earliest", "--ack-mode", "cumulative", "-q", "5000",
                            "--client", "magnetar")),
        Workload("e2e-1000", "end to end, 1,000 msg/s unbatched", run_e2e,
                 perf_args=("-r", "1000", "--no-batching", "-s", "1024"),
                 targets=(Target("e2e p99 ms", 1.5, False),)),
        Workload("topics-100", "100 topics x 1 producer, 1 KiB batched", run_publish,
                 perf_args=("-t", "100", "-s", "1024", "-m", "200000" if not quick else "50000",
                            "--sample-every", "100", "--max-pending", "2000")),
        Workload("idle-topics", "10,000 idle topics, one subscription each (RSS)", run_idle_topics,
                 targets=(Target("broker RSS MiB", 1024, False),)),
    ]


# ---- the suite ---------------------------------------------------------------------------------------


def run_workload(w: Workload, repeats: int, quick: bool, profiler: Profiler | None) -> None:
    for attempt in range(repeats):
        with tempfile.TemporaryDirectory(prefix="magnetar-bench-") as tmp:
            args = ("--set", f"journalSyncData={str(w.fsync).lower()}")
            broker = BrokerProcess(Path(tmp) / "data", extra_args=args).start()
            try:
                assert broker.proc is not None
                profiling = profiler is not None and w.profile is not None and attempt == repeats - 1
                if profiling:
                    assert profiler is not None and w.profile is not None
                    with profiler.record(broker.proc.pid, w.profile):
                        figures = w.run(broker, w, quick)
                else:
                    figures = w.run(broker, w, quick)
            finally:
                broker.kill()
        w.runs.append(figures)
        print(f"  {w.name} run {attempt + 1}: " + ", ".join(f"{k} {v:,.3g}" for k, v in figures.items()),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    from bench.report import write_results

    chosen = [w for w in workloads(args.quick) if args.only is None or w.name in args.only]
    about = machine()
    profiler = Profiler(args.out / "profiles") if args.profile else None
    started = time.time()
    for w in chosen:
        print(f"{w.name}: {w.title}", flush=True)
        w.command = command_of(w)
        run_workload(w, args.repeats, args.quick, profiler)
    write_results(args.out, chosen, about, args.repeats, args.quick, time.time() - started)
    print(f"wrote {args.out / 'latest.md'}")


def command_of(w: Workload) -> str:
    verb = {"run_publish": "produce", "run_consume_backlog": "consume", "run_e2e": "e2e"}.get(w.run.__name__)
    if verb is None:
        return "bench/suite.py --only " + w.name
    fsync = "" if w.fsync else " (broker --set journalSyncData=false)"
    return f"magnetar perf {verb} {' '.join(w.perf_args)}{fsync}"


if __name__ == "__main__":
    main()
