"""What hostile and careless clients can make the broker hold, measured on the real process.

    .venv/bin/python bench/abuse_bounds.py [--only NAME ...] [--seconds 20] [--topics 2000]

Each case starts its own ``magnetar standalone`` with the default limits (``--set`` extra ones with
``--set key=value``), misbehaves against it, and prints the broker's RSS and open descriptors read from
``/proc`` before and after. Cases: ``pings`` (a client that sends PINGs and never reads), ``listing``
(GET_TOPICS_OF_NAMESPACE answers ~150 KB, never read), ``stalled`` (120 subscriptions on one connection
that never reads), ``topics`` (one client auto-creates N topics: descriptors while it runs and once
inactive topics are unloaded), ``names`` (40 producers with the largest name and metadata allowed).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from magnetar import protocol as proto  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

MIB = 1024 * 1024


def rss(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fds(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


def raw_client(proc: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proc.port), timeout=1.0)
    sock.sendall(proto.encode_command(proto.commands.connect("bench-abuse", protocol_version=20)))
    return sock


def push_for(sock: socket.socket, chunk: bytes, seconds: float) -> int:
    """Send ``chunk`` for ``seconds`` as fast as the broker takes it; returns bytes taken."""
    sent, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sent += sock.send(chunk)
        except TimeoutError:
            continue
    return sent


def case_pings(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    sock = raw_client(proc)
    before = rss(proc)
    taken = push_for(sock, proto.encode_command(proto.commands.ping()) * 20_000, args.seconds)
    return {"sent_MiB": taken / MIB, "rss_growth_MiB": (rss(proc) - before) / MIB}


def case_listing(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    from tests.abuse.conftest import http

    namespace = "public/listing"
    http(proc, "PUT", f"/admin/v2/namespaces/{namespace}")
    for i in range(300):
        http(proc, "PUT", f"/admin/v2/persistent/{namespace}/t{i}-{'x' * 480}")
    sock = raw_client(proc)
    before = rss(proc)
    request = b"".join(proto.encode_command(proto.commands.get_topics_of_namespace(i, namespace)) for i in range(500))
    taken = push_for(sock, request, args.seconds)
    return {"requests_taken": taken / (len(request) / 500), "rss_growth_MiB": (rss(proc) - before) / MIB}


def case_stalled(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    from tests.integration.conftest import make_client

    client = make_client(proc.url)
    producer = client.create_producer("stalled", batching_enabled=False)
    for _ in range(24):
        producer.send(b"m" * (900 * 1024))
    client.close()
    sock = raw_client(proc)
    for cid in range(120):
        sock.sendall(proto.encode_command(proto.commands.subscribe(
            "stalled", f"s{cid}", proto.pb.CommandSubscribe.Exclusive, cid, cid,
            initial_position=proto.pb.CommandSubscribe.Earliest)))
    time.sleep(2)
    before = rss(proc)
    for cid in range(120):
        sock.sendall(proto.encode_command(proto.commands.flow(cid, 1000)))
    peak = before
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss(proc))
        time.sleep(0.2)
    return {"rss_growth_peak_MiB": (peak - before) / MIB}


def case_topics(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    from tests.integration.conftest import make_client

    idle = fds(proc)
    client = make_client(proc.url)
    for i in range(args.topics):
        producer = client.create_producer(f"persistent://public/default/auto-{i}")
        producer.send(b"x")
        producer.close()
    loaded = fds(proc)
    client.close()
    time.sleep(args.unload_wait)
    return {"fds_idle": idle, "fds_after_creating": loaded, "fds_after_unload": fds(proc)}


def case_names(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    from tests.integration.conftest import make_client

    client = make_client(proc.url)
    before = rss(proc)
    properties = {f"k{i:03d}": "v" * 90 for i in range(40)}  # ~3.9 K characters, under maxProducerMetadataSize
    producers = [client.create_producer("names", producer_name=f"{i:04d}" + "p" * 1020, properties=properties)
                 for i in range(40)]
    grown = rss(proc) - before
    refused = 0
    try:
        client.create_producer("names", producer_name="n" * 4096)
    except Exception:
        refused = 1
    for p in producers:
        p.close()
    client.close()
    return {"rss_growth_MiB": grown / MIB, "4096_char_name_refused": refused}


CASES: dict[str, Callable[[BrokerProcess, argparse.Namespace], dict[str, float]]] = {
    "pings": case_pings, "listing": case_listing, "stalled": case_stalled, "topics": case_topics, "names": case_names,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--unload-wait", type=float, default=15.0)
    parser.add_argument("--set", action="append", default=[], help="extra broker setting key=value")
    args = parser.parse_args()
    extra: list[str] = []
    for setting in ["brokerDeleteInactiveTopicsFrequencySeconds=5", *args.set]:
        extra += ["--set", setting]
    for name in args.only:
        with tempfile.TemporaryDirectory() as data:
            proc = BrokerProcess(Path(data), extra_args=tuple(extra)).start()
            try:
                figures = CASES[name](proc, args)
            finally:
                proc.kill()
        print(f"{name:8s} " + "  ".join(f"{k}={v:.1f}" for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    main()
