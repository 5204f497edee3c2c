"""What hostile and careless clients can make the broker hold, measured on the real process.

    .venv/bin/python bench/abuse_bounds.py [--only NAME ...] [--seconds 20] [--topics 2000]

Each case starts its own ``magnetar standalone`` with the default limits (``--set`` extra ones with
``--set key=value``), misbehaves against it, and prints the broker's RSS and open descriptors read from
``/proc`` before and after. Cases: ``pings`` (a client that sends PINGs and never reads), ``listing``
(GET_TOPICS_OF_NAMESPACE answers ~150 KB, never read), ``stalled`` (120 subscriptions on one connection
that never reads), ``topics`` (one client auto-creates N topics: descriptors while it runs and once
inactive topics are unloaded), ``names`` (40 producers with the largest name and metadata allowed),
``shared`` (one Shared subscription, a consumer on a connection that never reads and one on an official
client: what the reader still receives), ``gets`` (admin GETs on every partition of a fresh --topics
partitioned topic: descriptors and files created).
"""

from __future__ import annotations

import argparse
import contextlib
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


def case_shared(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    """One Shared subscription: a consumer on a connection that never reads, another on an official client."""
    import json
    import urllib.request

    import pulsar

    from tests.integration.conftest import make_client

    sock = raw_client(proc)
    sock.sendall(proto.encode_command(proto.commands.subscribe("shared", "s", proto.pb.CommandSubscribe.Shared, 1, 1)))
    sock.settimeout(15)
    decoder, types = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE)), []
    for _ in range(100):  # until SUCCESS: the consumer exists before its FLOW
        decoder.feed(sock.recv(65536))
        while (frame := decoder.next_frame()) is not None:
            types.append(frame.command.type)
        if proto.pb.BaseCommand.SUCCESS in types:
            break
    sock.sendall(proto.encode_command(proto.commands.flow(1, 1000)))  # and nothing is read any more
    client = make_client(proc.url)
    reader = client.subscribe("shared", "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=4)
    producer = client.create_producer("shared", batching_enabled=False)
    before, peak, sent, received = rss(proc), 0, 0, 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        producer.send(b"m" * (900 * 1024))
        sent += 1
        try:
            reader.acknowledge(reader.receive(1_000))
            received += 1
        except pulsar.Timeout:
            pass  # this one went to the stalled consumer
        peak = max(peak, rss(proc) - before)
    url = f"{proc.web_url}/admin/v2/persistent/public/default/shared/stats"
    with urllib.request.urlopen(url, timeout=15) as reply:
        consumers = json.loads(reply.read())["subscriptions"]["s"]["consumers"]
    client.close()
    stalled = sum(c["msgOutCounter"] for c in consumers if c["consumerName"] != reader.consumer_name())
    return {"published": sent, "reader_received": received, "sent_to_stalled": stalled,
            "rss_growth_peak_MiB": peak / MIB}


def case_gets(proc: BrokerProcess, args: argparse.Namespace) -> dict[str, float]:
    """Every admin GET kind on a declared, never-written partitioned topic of --topics partitions."""
    import urllib.error
    import urllib.request

    def call(method: str, path: str, body: bytes | None = None) -> None:
        request = urllib.request.Request(proc.web_url + path, data=body, method=method,
                                         headers={"Content-Type": "application/json"})
        with contextlib.suppress(urllib.error.HTTPError):  # a 404 (no message, no subscription) is an answer
            urllib.request.urlopen(request, timeout=60).read()

    base = "/admin/v2/persistent/public/default/wide"
    call("PUT", base + "/partitions", str(args.topics).encode())
    files = sum(len(f) for _, _, f in os.walk(proc.data_dir))
    idle, started = fds(proc), time.monotonic()
    for suffix in ("/partitioned-stats?perPartition=true", "/partitioned-internalStats", "/subscriptions"):
        call("GET", base + suffix)
    for i in range(args.topics):
        for suffix in ("/stats", "/internalStats", "/lastMessageId", "/subscriptions"):
            call("GET", f"{base}-partition-{i}{suffix}")
    return {"partitions": args.topics, "gets": 3 + 4 * args.topics, "seconds": time.monotonic() - started,
            "fds_before": idle, "fds_after": fds(proc),
            "new_files": sum(len(f) for _, _, f in os.walk(proc.data_dir)) - files}


CASES: dict[str, Callable[[BrokerProcess, argparse.Namespace], dict[str, float]]] = {
    "pings": case_pings, "listing": case_listing, "stalled": case_stalled, "topics": case_topics, "names": case_names,
    "shared": case_shared, "gets": case_gets,
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
