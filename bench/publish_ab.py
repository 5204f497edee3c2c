"""A/B of two source trees on the publish path: broker CPU per message, alternating, on fresh brokers.

    .venv/bin/python bench/publish_ab.py BEFORE_TREE AFTER_TREE [--rounds 3] [--workloads unbatched batched e2e]

Each tree is a checkout of magnetar (e.g. ``git archive <commit> | tar -x -C /tmp/before``). Every round
starts a ``magnetar standalone`` from each tree in turn (PYTHONPATH = that tree) and runs one
``magnetar perf`` workload against it with the official client, measuring the broker's user + system CPU
from ``/proc/<pid>/stat`` over the run. Alternating keeps both trees on the same (shared, noisy) machine;
CPU per message is far less sensitive to other load than msg/s. Prints each run and the medians.

Workloads: ``unbatched`` 30,000 x 1 KiB ``--no-batching --max-pending 1000``; ``batched`` 300,000 x 1 KiB
default batching; ``e2e`` 10 s at 1,000 msg/s unbatched (latency p50/p99 are end to end).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.integration.broker_process import BrokerProcess  # noqa: E402

WORKLOADS: dict[str, tuple[str, str, tuple[str, ...]]] = {  # name: (verb, flow, flags)
    "unbatched": ("produce", "publish", ("-s", "1024", "-m", "30000", "--no-batching", "--sample-every", "10",
                                         "--max-pending", "1000")),
    "batched": ("produce", "publish", ("-s", "1024", "-m", "300000", "--sample-every", "100",
                                       "--max-pending", "5000")),
    "e2e": ("e2e", "consume", ("--test-duration", "10", "-r", "1000", "--no-batching", "-s", "1024")),
}


def _cpu_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def run(tree: Path, workload: str) -> dict[str, float]:
    verb, flow, flags = WORKLOADS[workload]
    os.chdir(tree)  # ``python -m`` puts the working directory before PYTHONPATH: the broker must import ``tree``
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", env={"PYTHONPATH": str(tree)}).start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            user0, sys0 = _cpu_ticks(pid)
            done = subprocess.run(
                [sys.executable, "-m", "magnetar.cli", "perf", verb, f"ab-{workload}", *flags, "-u", broker.url,
                 "--admin-url", broker.web_url, "--json", "--no-progress"],
                capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tree,
                timeout=600, check=True,
            )
            user1, sys1 = _cpu_ticks(pid)
        finally:
            broker.stop()
    totals = json.loads(done.stdout)["totals"][flow]
    per_tick_us = 1e6 / os.sysconf("SC_CLK_TCK") / totals["messages"]
    return {"cpu_us": (user1 - user0 + sys1 - sys0) * per_tick_us, "sys_us": (sys1 - sys0) * per_tick_us,
            "msg_s": totals["msg_per_s"], "p50_ms": totals["latency_ms"]["p50"],
            "p99_ms": totals["latency_ms"]["p99"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=["unbatched", "batched"], choices=sorted(WORKLOADS))
    args = parser.parse_args()
    for workload in args.workloads:
        results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, tree in (("before", args.before), ("after", args.after)):
                r = run(tree.resolve(), workload)
                results[label].append(r)
                print(f"{workload:9s} {label:6s} CPU {r['cpu_us']:7.2f} µs/msg (sys {r['sys_us']:5.1f})  "
                      f"{r['msg_s']:9.0f} msg/s  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms", flush=True)
        for label, runs in results.items():
            print(f"== {workload} {label}: median CPU {statistics.median(r['cpu_us'] for r in runs):.2f} µs/msg, "
                  f"median msg/s {statistics.median(r['msg_s'] for r in runs):.0f}, "
                  f"median p99 {statistics.median(r['p99_ms'] for r in runs):.2f} ms")


if __name__ == "__main__":
    main()
