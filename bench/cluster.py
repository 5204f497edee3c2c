"""A cluster of ``magnetar broker`` processes on this machine: failover time, lookup rate, publish throughput.

    .venv/bin/python bench/cluster.py [--kills 5] [--lookup-seconds 10] [--publish-seconds 20] [--parts all]

Every cluster is the test harness's (``tests/cluster/harness.py``): one ZooKeeper, one moto S3 server, brokers
reaching each through proxies of their own, session timeout 4 s (``metadataStoreSessionTimeoutMillis``).

1. ``kill``: unavailability after SIGKILL of an owner. One producer (official client, 200 msg/s, dedup on) on a
   topic of a new namespace; once it flows, the topic's owner is killed; the time from the kill to the next
   receipt is that run's unavailability (it spans the session timeout, the reassignment, the new owner's
   recovery sealing the old ledger in the bucket, and the client's reconnect backoff). Beside it, the time from
   the kill to the new owner's log line taking the bundle (the cluster's part; the rest is the client's).
   Every run ends with the checker (nothing lost or duplicated) and the killed broker restarted. p50 and max
   over ``--kills`` runs.
2. ``lookups``: binary LOOKUPs per second answered by each broker for topics owned across the cluster (each
   broker answers Connect to the owner, from its ownership cache and a read of the bundle's lock), 64 in flight
   on one connection, for ``--lookup-seconds``.
3. ``publish``: the same workload on clusters of 1, 2 and 3 brokers: ``magnetar perf produce`` (official client,
   2 processes) on a topic with 8 partitions covering every bundle, 8 producers, 1 KiB messages, batching,
   for ``--publish-seconds``; msg/s, p50 latency, and the CPU seconds per second of the brokers, of the moto
   server (every broker writes to the one moto process) and of the client processes: on two cores the three
   share one machine, so the column that nears the cores available says what limits the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from magnetar import protocol as proto  # noqa: E402
from tests.cluster.checker import Load, read_back, verify  # noqa: E402
from tests.cluster.conftest import make_client, new_namespace, partitions_covering_every_bundle  # noqa: E402
from tests.cluster.harness import ClusterHarness  # noqa: E402

T = proto.pb.BaseCommand
LOOKUPS_IN_FLIGHT = 64
LOOKUP_TOPICS = 32


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, clock ticks (100 Hz)


def _owned_at(cluster: ClusterHarness, bundle: str, after: float) -> float | None:
    """The wall-clock time a running broker logged taking ``bundle`` (``tenant/ns/0x.._0x..``) after ``after``."""
    needle = f"bundle {bundle}: owned"
    times = []
    for node in cluster.running():
        for line in node.process.log_lines:
            if needle in line:
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()  # logging's asctime
                if at > after:
                    times.append(at)
    return min(times, default=None)


def kill_runs(base: Path, runs: int) -> tuple[list[float], list[float]]:
    cluster = ClusterHarness(base / "kill").start()
    client = make_client(cluster.service_url)
    found: list[float] = []
    taken: list[float] = []
    try:
        for run in range(runs):
            topic = f"persistent://{new_namespace(cluster)}/kill-{run}"
            load = Load(client, topic, producers=1).start()
            receipts = load.receipts
            cluster.wait_until(lambda r=receipts: r.count() >= 200, "receipts before the kill", 120.0)
            (owner,) = {str(cluster.lookup(n, topic)) for n in cluster.running()}
            victim = cluster.node(owner)
            status, bundle = cluster.http(cluster.running()[0], "GET",
                                          f"/lookup/v2/topic/{topic.replace('://', '/')}/bundle")
            assert status == 200, bundle
            killed, killed_wall = time.monotonic(), time.time()
            victim.kill()
            cluster.wait_until(lambda r=receipts, k=killed: any(t > k for t in r.times.get("p0", [])),
                               "a receipt after the kill", 120.0)
            unavailable = min(t for t in receipts.times["p0"] if t > killed) - killed
            load.stop()
            verify(load.receipts, read_back(client, topic, 0))
            found.append(unavailable)
            owned_at = _owned_at(cluster, f"{topic.removeprefix('persistent://').rsplit('/', 1)[0]}/{bundle}",
                                 killed_wall)
            if owned_at is not None:
                taken.append(owned_at - killed_wall)
            print(f"  kill run {run}: receipts resumed after {unavailable:.2f} s; the bundle was taken after "
                  f"{'?' if owned_at is None else f'{owned_at - killed_wall:.2f}'} s", flush=True)
            victim.start()
            cluster.wait_until(lambda: len(cluster.registered()) == 3, "the killed broker back", 120.0)
    finally:
        client.close()
        cluster.close()
    return found, taken


async def _lookup_rate(port: int, topics: list[str], seconds: float) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE))
    writer.write(proto.encode_command(proto.commands.connect("bench-lookups", 20)))
    answered = 0
    request_id = 0
    deadline = time.monotonic() + seconds

    async def next_frame() -> proto.Frame:
        while (frame := decoder.next_frame()) is None:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            decoder.feed(data)
        return frame

    assert (await next_frame()).command.type == T.CONNECTED
    for _ in range(LOOKUPS_IN_FLIGHT):
        request_id += 1
        writer.write(proto.encode_command(proto.commands.lookup(topics[request_id % len(topics)], request_id)))
    started = time.monotonic()
    while time.monotonic() < deadline:  # one new lookup per answer: LOOKUPS_IN_FLIGHT stay in flight
        frame = await next_frame()
        if frame.command.type != T.LOOKUP_RESPONSE:
            continue
        assert frame.command.lookupTopicResponse.response == proto.pb.CommandLookupTopicResponse.Connect
        answered += 1
        request_id += 1
        writer.write(proto.encode_command(proto.commands.lookup(topics[request_id % len(topics)], request_id)))
    elapsed = time.monotonic() - started
    writer.close()
    return answered / elapsed


def lookup_rates(base: Path, seconds: float) -> dict[str, float]:
    cluster = ClusterHarness(base / "lookups").start()
    client = make_client(cluster.service_url)
    try:
        ns = new_namespace(cluster)
        topics = [f"persistent://{ns}/lookup-{i}" for i in range(LOOKUP_TOPICS)]
        for topic in topics:  # every bundle owned somewhere before measuring
            client.create_producer(topic).close()
        return {node.broker_id: asyncio.run(_lookup_rate(node.process.port, topics, seconds))
                for node in cluster.nodes}
    finally:
        client.close()
        cluster.close()


def publish_rate(base: Path, brokers: int, seconds: float) -> dict[str, float]:
    cluster = ClusterHarness(base / f"publish-{brokers}", brokers=brokers).start()
    try:
        ns = new_namespace(cluster)
        topic = f"persistent://{ns}/publish"
        partitions = max(8, partitions_covering_every_bundle(topic))
        cpu_before = {n.name: _cpu_s(n.pid) for n in cluster.nodes}
        assert cluster.moto.proc is not None
        moto_before = _cpu_s(cluster.moto.proc.pid)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        clients_before = children.ru_utime + children.ru_stime  # the perf processes, once waited for
        out = subprocess.run(
            [sys.executable, "-m", "magnetar.cli", "perf", "produce", topic, "-u", cluster.service_url,
             "--admin-url", cluster.nodes[0].web_url, "--partitions", str(partitions), "-n", "8",
             "--processes", "2", "-time", str(seconds), "--json", "--no-progress"],
            check=True, capture_output=True, text=True, timeout=seconds + 300,
        )
        cpu = sum(_cpu_s(n.pid) - cpu_before[n.name] for n in cluster.nodes)
        moto_cpu = _cpu_s(cluster.moto.proc.pid) - moto_before
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        clients_cpu = children.ru_utime + children.ru_stime - clients_before
        publish = json.loads(out.stdout)["totals"]["publish"]
        return {"msg_per_s": float(publish["msg_per_s"]), "p50_ms": float(publish["latency_ms"].get("p50", 0.0)),
                "broker_cpu_s_per_s": cpu / seconds, "moto_cpu_s_per_s": moto_cpu / seconds,
                "client_cpu_s_per_s": clients_cpu / seconds}
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lookup-seconds", type=float, default=10.0)
    parser.add_argument("--publish-seconds", type=float, default=20.0)
    parser.add_argument("--parts", default="all", help="kill,lookups,publish or all")
    args = parser.parse_args()
    parts = {"kill", "lookups", "publish"} if args.parts == "all" else set(args.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="magnetar-cluster-bench-") as tmp:
        base = Path(tmp)
        if "kill" in parts:
            found, taken = kill_runs(base, args.kills)
            print(f"unavailability after SIGKILL of an owner ({len(found)} runs, session timeout 4 s): "
                  f"p50 {statistics.median(found):.2f} s, max {max(found):.2f} s, runs "
                  f"{[round(x, 2) for x in found]}", flush=True)
            if taken:
                print(f"  of which the cluster's part (kill to the new owner taking the bundle): p50 "
                      f"{statistics.median(taken):.2f} s, max {max(taken):.2f} s", flush=True)
        if "lookups" in parts:
            for broker, rate in lookup_rates(base, args.lookup_seconds).items():
                print(f"lookups/s answered by broker {broker}: {rate:.0f} ({LOOKUPS_IN_FLIGHT} in flight)", flush=True)
        if "publish" in parts:
            for brokers in (1, 2, 3):
                result = publish_rate(base, brokers, args.publish_seconds)
                print(f"publish, {brokers} broker(s): {result['msg_per_s']:.0f} msg/s, p50 {result['p50_ms']:.1f} ms, "
                      f"brokers' CPU {result['broker_cpu_s_per_s']:.2f} s/s, "
                      f"moto's CPU {result['moto_cpu_s_per_s']:.2f} s/s, "
                      f"the clients' CPU {result['client_cpu_s_per_s']:.2f} s/s", flush=True)


if __name__ == "__main__":
    main()
