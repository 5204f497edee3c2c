"""Ledgers in an object store vs the embedded store: the same publish workloads on both, side by side, one run.

    .venv/bin/python bench/objectstore.py [--rounds 2] [--workloads unbatched batched] [--windows 0 5 20]
    .venv/bin/python bench/objectstore.py --endpoint https://s3.eu-west-1.amazonaws.com --bucket B --region eu-west-1

The object store is a ``moto_server`` process on loopback (in memory, single process: it shows what the
broker spends, not what S3 costs; see docs/object-store.md for S3 Standard, S3 Express and MinIO), or with
``--endpoint`` an existing service and bucket (credentials from the AWS chain; each run writes under a fresh
prefix, left in place: delete it with the bucket's lifecycle rules or by hand). Every round
starts a fresh ``magnetar standalone`` per configuration in turn (embedded; ``ledgerStoreUrl=s3://...`` with
each flush window in ``--windows``, in ms) and runs one ``magnetar perf produce`` workload against it with
the official client. Printed per run: publish msg/s, send latency p50/p99 (send to receipt), data-chunk PUTs
per second of publishing (chunk objects counted in the bucket after the run: retention is infinite, nothing is
deleted)
and the broker's user + system CPU per message from ``/proc/<pid>/stat``; then the medians.

Workloads: ``unbatched`` 20,000 x 1 KiB ``--no-batching --max-pending 1000``; ``batched`` 200,000 x 1 KiB with
the client's default batching; ``paced`` 15 s at 500 msg/s unbatched (latency at a rate far below capacity).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.s3_server import CREDENTIALS, MotoServer  # noqa: E402

BUCKET = "bench-ledgers"
RUN_TIMEOUT_S = 900
WORKLOADS: dict[str, tuple[str, ...]] = {
    "unbatched": ("-s", "1024", "-m", "20000", "--no-batching", "--sample-every", "10", "--max-pending", "1000"),
    "batched": ("-s", "1024", "-m", "200000", "--sample-every", "100", "--max-pending", "5000"),
    "paced": ("-s", "1024", "--test-duration", "15", "-r", "500", "--no-batching"),
}
KEEP_EVERYTHING = ("--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@dataclass(frozen=True)
class Target:
    endpoint: str
    bucket: str
    region: str
    env: dict[str, str]

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region or None,
                            **{k.lower(): v for k, v in self.env.items() if k.startswith("AWS_") and "KEY" in k})


def _data_chunks(target: Target, prefix: str) -> int:
    """Data chunks under ``prefix`` (seals and fences are told apart by their kind byte)."""
    client = target.client()
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=f"{prefix}/ledgers/"):
        for obj in page.get("Contents", []):
            head = client.get_object(Bucket=target.bucket, Key=obj["Key"], Range="bytes=5-5")["Body"].read()
            count += head == b"\x00"
    return count


def run(target: Target, label: str, window_ms: int | None, workload: str) -> dict[str, float]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    args: tuple[str, ...] = KEEP_EVERYTHING
    if window_ms is not None:
        args += ("--set", f"ledgerStoreUrl=s3://{target.bucket}/{prefix}",
                 "--set", f"ledgerStoreServiceEndpoint={target.endpoint}",
                 "--set", f"ledgerStoreRegion={target.region}", "--set", f"ledgerStoreFlushMaxDelayMillis={window_ms}")
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", extra_args=args, env=target.env).start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            ticks0 = _cpu_ticks(pid)
            done = subprocess.run(
                [sys.executable, "-m", "magnetar.cli", "perf", "produce", f"os-{workload}-{prefix}",
                 *WORKLOADS[workload], "-u", broker.url, "--admin-url", broker.web_url, "--json", "--no-progress"],
                capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True, cwd=ROOT,
            )
            ticks1 = _cpu_ticks(pid)
        finally:
            broker.stop()
    totals = json.loads(done.stdout)["totals"]["publish"]
    messages = totals["messages"]
    puts = _data_chunks(target, prefix) if window_ms is not None else 0
    return {"msg_s": totals["msg_per_s"], "p50_ms": totals["latency_ms"]["p50"], "p99_ms": totals["latency_ms"]["p99"],
            "puts_s": puts * totals["msg_per_s"] / messages, "msgs_per_put": messages / puts if puts else 0.0,
            "cpu_us": (ticks1 - ticks0) * 1e6 / os.sysconf("SC_CLK_TCK") / messages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workloads", nargs="+", default=["unbatched", "batched", "paced"], choices=sorted(WORKLOADS))
    parser.add_argument("--windows", nargs="+", type=int, default=[0, 5, 20],
                        help="ledgerStoreFlushMaxDelayMillis values to run (ms)")
    parser.add_argument("--endpoint", default="", help="an existing S3 service instead of moto on loopback")
    parser.add_argument("--bucket", default=BUCKET, help="with --endpoint: an existing bucket")
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args()
    configs: list[tuple[str, int | None]] = [("embedded", None)] + [(f"s3 window {w} ms", w) for w in args.windows]
    moto = None if args.endpoint else MotoServer().start()
    try:
        if moto is not None:
            moto.create_bucket(BUCKET)
            target = Target(moto.endpoint, BUCKET, "us-east-1", dict(CREDENTIALS))
        else:
            target = Target(args.endpoint, args.bucket, args.region, {})
        for workload in args.workloads:
            results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in configs}
            for _ in range(args.rounds):
                for label, window in configs:
                    r = run(target, label, window, workload)
                    results[label].append(r)
                    print(f"{workload:9s} {label:16s} {r['msg_s']:8.0f} msg/s  p50 {r['p50_ms']:7.2f} ms  "
                          f"p99 {r['p99_ms']:7.2f} ms  {r['puts_s']:6.1f} PUT/s ({r['msgs_per_put']:6.1f} msg/PUT)  "
                          f"CPU {r['cpu_us']:7.1f} µs/msg", flush=True)
            for label, runs in results.items():
                def median(key: str, runs: list[dict[str, float]] = runs) -> float:
                    return statistics.median(r[key] for r in runs)
                print(f"== {workload} {label}: {median('msg_s'):.0f} msg/s, p50 {median('p50_ms'):.2f} ms, "
                      f"p99 {median('p99_ms'):.2f} ms, {median('puts_s'):.1f} PUT/s, CPU {median('cpu_us'):.1f} µs/msg",
                      flush=True)
    finally:
        if moto is not None:
            moto.stop()


if __name__ == "__main__":
    main()
