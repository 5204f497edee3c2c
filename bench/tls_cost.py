"""What TLS costs: publish msg/s and end-to-end latency over ``pulsar://`` and ``pulsar+ssl://``, one broker,
one run, the two transports alternating so both see the same machine.

    .venv/bin/python bench/tls_cost.py [--messages 50000] [--rate 1000] [--seconds 5] [--repeats 2] [--fsync]

One ``magnetar standalone`` listens on both ports (a CA and a server certificate are made with ``cryptography``
in a temporary directory). Workloads, each with the official client: batched publish (``send_async``, 100-byte
messages, default batching), unbatched publish, and end-to-end latency at a fixed rate (unbatched producer,
a consumer on its own client; latency = receive time - send time, same host). journalSyncData is off unless
``--fsync``, so the disk does not hide the transport's cost. Prints a table (best of ``--repeats``) and JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import pulsar  # noqa: E402

from tests.integration.security.conftest import SecureBroker, start_broker  # noqa: E402
from tests.integration.security.pki import Pki  # noqa: E402

PAYLOAD = b"x" * 100
PENDING_MAX = 5000


def _client(url: str, ca: Path) -> pulsar.Client:
    return pulsar.Client(url, tls_trust_certs_file_path=str(ca), operation_timeout_seconds=30,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def publish_rate(url: str, ca: Path, messages: int, batching: bool) -> float:
    client = _client(url, ca)
    try:
        producer = client.create_producer(f"persistent://public/default/tls-bench-{uuid.uuid4().hex[:8]}",
                                          batching_enabled=batching, max_pending_messages=PENDING_MAX,
                                          block_if_queue_full=True)
        done = threading.Semaphore(0)
        start = time.perf_counter()
        for _ in range(messages):
            producer.send_async(PAYLOAD, lambda _res, _id: done.release())
        producer.flush()
        for _ in range(messages):
            done.acquire(timeout=60)
        return messages / (time.perf_counter() - start)
    finally:
        client.close()


def e2e_latency(url: str, ca: Path, rate: int, seconds: float) -> dict[str, float]:
    topic = f"persistent://public/default/tls-e2e-{uuid.uuid4().hex[:8]}"
    receiver, sender = _client(url, ca), _client(url, ca)
    try:
        consumer = receiver.subscribe(topic, "e2e")
        producer = sender.create_producer(topic, batching_enabled=False)
        total = int(rate * seconds)
        latencies: list[float] = []

        def receive() -> None:
            for _ in range(total):
                msg = consumer.receive(timeout_millis=30_000)
                latencies.append(time.time() * 1000 - float(msg.properties()["t"]))
                consumer.acknowledge(msg)

        reader = threading.Thread(target=receive, daemon=True)
        reader.start()
        start = time.perf_counter()
        for i in range(total):
            due = start + i / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)  # pacing the load, not synchronising
            producer.send_async(PAYLOAD, lambda _res, _id: None, properties={"t": repr(time.time() * 1000)})
        producer.flush()
        reader.join(timeout=60)
        ordered = sorted(latencies)
        return {"e2e_p50_ms": ordered[len(ordered) // 2], "e2e_p99_ms": ordered[int(len(ordered) * 0.99) - 1],
                "e2e_received": float(len(ordered))}
    finally:
        receiver.close()
        sender.close()


def run_once(broker: SecureBroker, ca: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name, url in (("plain", broker.url), ("tls", broker.tls_url)):
        figures = {
            "publish_batched_msg_s": publish_rate(url, ca, args.messages, batching=True),
            "publish_unbatched_msg_s": publish_rate(url, ca, args.messages // 5, batching=False),
            **e2e_latency(url, ca, args.rate, args.seconds),
        }
        results[name] = figures
    return results


def best(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for transport in runs[0]:
        out[transport] = {}
        for figure in runs[0][transport]:
            values = [r[transport][figure] for r in runs]
            out[transport][figure] = max(values) if figure.endswith("msg_s") else min(values)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--fsync", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-tls-bench-") as tmp:
        root = Path(tmp)
        pki = Pki(root)
        server = pki.issue("localhost", server=True)
        broker = start_broker(root / "data", {
            "brokerServicePortTls": "0", "webServicePortTls": "0",
            "tlsCertificateFilePath": str(server.cert), "tlsKeyFilePath": str(server.key),
            "journalSyncData": "true" if args.fsync else "false",
        })
        try:
            runs = [run_once(broker, pki.ca_file, args) for _ in range(args.repeats)]
        finally:
            broker.kill()
    table = best(runs)
    print(f"{'figure':<26}{'pulsar://':>14}{'pulsar+ssl://':>16}{'TLS/plain':>11}")
    for figure in table["plain"]:
        plain, tls = table["plain"][figure], table["tls"][figure]
        print(f"{figure:<26}{plain:>14,.1f}{tls:>16,.1f}{tls / plain if plain else 0:>11.2f}")
    report: dict[str, Any] = {"best": table, "runs": runs, "args": vars(args),
                              "spread": {t: {f: statistics.pstdev([r[t][f] for r in runs]) for f in table[t]}
                                         for t in table}}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
