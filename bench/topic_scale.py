"""Topic scale: creation rate, memory and idle CPU of many topics, and restart time to serving.

    .venv/bin/python bench/topic_scale.py [--topics 10000] [--threads 8] [--idle-s 30] [--backlog-mib 0]
                                          [--set KEY=VALUE ...] [--json]

One fresh ``magnetar standalone`` (``tests/integration/broker_process``) is driven by the official pulsar-client:

1. ``--threads`` threads, each with its own client, subscribe ``idle-sub`` on ``--topics`` new topics (the
   subscribe auto-creates the topic; the consumer is closed at once): topics + subscriptions created per second
   and the broker CPU seconds that took.
2. Broker RSS after creation (and before, at start), KiB per topic.
3. Broker CPU % of one core while nothing happens for ``--idle-s`` seconds (the topics stay loaded).
   With ``--sweep-s S`` the inactive-topic sweep runs every S seconds (``brokerDeleteInactiveTopicsFrequencySeconds``;
   the default is 60): the bench waits (bounded) until it has unloaded every idle topic and reports RSS then,
   and the broker CPU that took per topic (the wait's idle CPU included).
4. ``--backlog-mib`` of 1 KiB batched messages on ``bench-scale-backlog-*`` topics (``magnetar perf produce``).
5. Restart (SIGTERM, start again): seconds (and broker CPU seconds, which other load on the machine disturbs
   less) to the ready line, and to the first successful produce + consume on a random topic; the broker RSS then.

Figures are printed as a table (``--json``: one JSON object). Nothing is asserted; the machine is shared, so
compare configurations in one session and prefer the CPU figures to wall-clock ones.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.suite import cpu_s, rss_mib  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

SUBSCRIPTION = "idle-sub"
RECEIVE_TIMEOUT_MS = 30_000
BACKLOG_TOPICS = 10


def topic_name(i: int) -> str:
    return f"persistent://public/default/scale-{i}"


def create_topics(url: str, count: int, threads: int) -> None:
    """Subscribe once on each of ``count`` new topics from ``threads`` clients (the consumer closed at once)."""
    import pulsar

    def work(first: int) -> None:
        client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
                               operation_timeout_seconds=120)
        try:
            for i in range(first, count, threads):
                client.subscribe(topic_name(i), SUBSCRIPTION).close()
        finally:
            client.close()

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def write_backlog(broker: BrokerProcess, mib: int) -> None:
    """``mib`` of 1 KiB messages over a few topics, each kept as backlog by a subscription made first."""
    import pulsar

    client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        for t in range(BACKLOG_TOPICS):
            client.subscribe(f"bench-scale-backlog-{t}", SUBSCRIPTION).close()
    finally:
        client.close()
    per_topic = mib * 1024 // BACKLOG_TOPICS
    for t in range(BACKLOG_TOPICS):
        cmd = [sys.executable, "-m", "magnetar.cli", "perf", "produce", f"bench-scale-backlog-{t}", "-s", "1024",
               "-m", str(per_topic), "--sample-every", "100", "--max-pending", "5000", "-u", broker.url,
               "--admin-url", broker.web_url, "--json", "--no-progress"]
        subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=True, cwd=ROOT)


def first_round_trip(url: str, topic: str) -> None:
    """Subscribe to ``topic``'s subscription, produce one message, receive and ack it."""
    import pulsar

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(topic, SUBSCRIPTION)
        producer = client.create_producer(topic)
        producer.send(b"after-restart")
        while True:  # bounded by the receive timeout: the topic holds only what this bench wrote
            msg = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(msg)
            if msg.data() == b"after-restart":
                break
    finally:
        client.close()


def run(args: argparse.Namespace) -> dict[str, float]:
    settings = [*args.set, *([f"brokerDeleteInactiveTopicsFrequencySeconds={args.sweep_s}"] if args.sweep_s else [])]
    extra: tuple[str, ...] = tuple(x for kv in settings for x in ("--set", kv))
    figures: dict[str, float] = {"topics": args.topics, "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="magnetar-scale-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", extra_args=extra).start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            figures["RSS at start MiB"] = rss_mib(pid)
            cpu0, t0 = cpu_s(pid), time.perf_counter()
            create_topics(broker.url, args.topics, args.threads)
            elapsed_s, used_s = time.perf_counter() - t0, cpu_s(pid) - cpu0
            figures["topics+subs created /s"] = args.topics / elapsed_s
            figures["broker CPU ms per topic+sub"] = used_s / args.topics * 1e3
            rss = rss_mib(pid)
            figures["RSS after creation MiB"] = rss
            figures["KiB per topic"] = (rss - figures["RSS at start MiB"]) * 1024 / args.topics
            cpu0, t0 = cpu_s(pid), time.perf_counter()
            done = threading.Event()
            done.wait(args.idle_s)  # the measured idle period itself: nothing to synchronise with
            figures["idle CPU % of a core"] = (cpu_s(pid) - cpu0) / (time.perf_counter() - t0) * 100
            if args.sweep_s:
                cpu0 = cpu_s(pid)
                unloaded = broker.wait_for(lambda log: log.count("unloaded topic") >= args.topics, args.sweep_s * 4)
                figures["topics unloaded by the sweep"] = gone = broker.log_text().count("unloaded topic")
                figures["broker CPU ms per topic unloaded"] = (cpu_s(pid) - cpu0) / max(gone, 1) * 1e3
                figures["RSS after the sweep MiB"] = rss_mib(pid) if unloaded else float("nan")
            if args.backlog_mib:
                write_backlog(broker, args.backlog_mib)
                figures["backlog MiB"] = args.backlog_mib
            broker.stop()
            started = time.perf_counter()
            broker.start()
            figures["restart: ready s"] = time.perf_counter() - started
            assert broker.proc is not None
            figures["restart: broker CPU s to ready"] = cpu_s(broker.proc.pid)  # less load-sensitive than wall
            first_round_trip(broker.url, topic_name(random.randrange(args.topics)))
            figures["restart: first produce+consume s"] = time.perf_counter() - started
            figures["restart: broker CPU s to first round trip"] = cpu_s(broker.proc.pid)
            figures["RSS after restart MiB"] = rss_mib(broker.proc.pid)
        finally:
            broker.kill()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=8, help="client threads creating topics")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle period measured for CPU")
    parser.add_argument("--sweep-s", type=int, default=0, help="inactive-topic sweep period (0: broker default)")
    parser.add_argument("--backlog-mib", type=int, default=0, help="backlog written before the restart")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:40} {value:12,.2f}")


if __name__ == "__main__":
    main()
