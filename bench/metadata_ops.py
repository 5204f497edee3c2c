"""Metadata stores side by side: ZooKeeper against the embedded SQLite store, in one run.

    .venv/bin/python bench/metadata_ops.py [--ops 2000] [--in-flight 1 32] [--topics 100]
                                           [--cursors 10] [--consume-seconds 15] [--repeats 3]

1. Store operations, in this process: ``get`` of one record, compare-and-set ``put`` (each write expects the
   version the previous one returned; with several in flight each task has its own key), and ``children`` of
   a key with 100 children, one at a time and with ``--in-flight`` concurrent callers. ZooKeeper is a real
   server on loopback (``tests/zk_server.py``: one standalone node, fsync on, like a real one) reached through
   kazoo; SQLite is a WAL file in a temporary directory.
2. Topic creation: a ``magnetar standalone`` per store; the official client opens a producer on
   ``--topics`` new topics one after another (each a managed-ledger record, a first ledger, a lookup).
3. ZooKeeper writes per active cursor under a consume load: ``--cursors`` topics, each with a producer
   sending 100 msg/s and a consumer acknowledging every message, for ``--consume-seconds``. Writes are
   counted on the server (the ``srvr`` zxid grows by one per write transaction) and divided by cursors and
   seconds. Pulsar's ``managedLedgerDefaultMarkDeleteRateLimit`` (1 write/s per cursor) is the aim.

Every figure is the median of ``--repeats`` runs with the runs beside it; the stores alternate run by run so
load from other jobs spreads over both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from magnetar.metadata import MetadataStore  # noqa: E402
from magnetar.metadata.sqlite import SqliteMetadataStore  # noqa: E402
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.zk_server import ZooKeeperServer, _srvr, unique_chroot  # noqa: E402

CHILDREN = 100
PRODUCE_RATE = 100  # msg/s per topic in the consume load


async def _rate(ops: int, in_flight: int, op: Callable[[int], Awaitable[object]]) -> float:
    """Operations per second of ``op(task)`` called ``ops`` times by ``in_flight`` tasks."""
    per_task = ops // in_flight

    async def task(index: int) -> None:
        for _ in range(per_task):
            await op(index)

    start = time.perf_counter()
    await asyncio.gather(*(task(i) for i in range(in_flight)))
    return per_task * in_flight / (time.perf_counter() - start)


async def store_ops(store: MetadataStore, ops: int, in_flight: int) -> dict[str, float]:
    await store.put("/bench/record", b'{"value": 1}')
    for i in range(CHILDREN):
        await store.put(f"/bench/parent/child-{i:03d}", b"{}")
    versions = {i: (await store.put(f"/bench/cas-{i}", b"0")).version for i in range(in_flight)}

    async def cas(index: int) -> None:
        versions[index] = (await store.put(f"/bench/cas-{index}", b'{"n": 1}', versions[index])).version

    return {
        "get": await _rate(ops, in_flight, lambda _: store.get("/bench/record")),
        "CAS put": await _rate(ops, in_flight, cas),
        f"children ({CHILDREN})": await _rate(ops, in_flight, lambda _: store.children("/bench/parent")),
    }


async def ops_once(backend: str, server: ZooKeeperServer, tmp: Path, ops: int, in_flight: int) -> dict[str, float]:
    store: MetadataStore
    if backend == "zookeeper":
        store = await ZooKeeperMetadataStore(server.hosts, chroot=unique_chroot("bench")).start()
    else:
        store = SqliteMetadataStore(tmp / f"bench-{time.monotonic_ns()}.db")
    try:
        return await store_ops(store, ops, in_flight)
    finally:
        await store.close()


def _broker(tmp: Path, backend: str, server: ZooKeeperServer) -> BrokerProcess:
    args: tuple[str, ...] = ()
    if backend == "zookeeper":
        args = ("--set", f"metadataStoreUrl={server.url(unique_chroot('bench'))}")
    return BrokerProcess(tmp / f"data-{backend}-{time.monotonic_ns()}", extra_args=args).start()


def topic_creation_rate(broker: BrokerProcess, topics: int, run: int) -> float:
    import pulsar

    client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        start = time.perf_counter()
        for i in range(topics):
            client.create_producer(f"persistent://public/default/create-{run}-{i}").close()
        return topics / (time.perf_counter() - start)
    finally:
        client.close()


def _zxid(server: ZooKeeperServer) -> int:
    for line in _srvr(server.port).splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16) & 0xFFFFFFFF
    raise RuntimeError("no zxid in the server's srvr answer")


def writes_per_cursor(broker: BrokerProcess, server: ZooKeeperServer, cursors: int, seconds: float) -> float:
    import pulsar

    client = pulsar.Client(broker.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    stop = threading.Event()
    try:
        pairs = []
        for i in range(cursors):
            topic = f"persistent://public/default/consume-{time.monotonic_ns()}-{i}"
            consumer = client.subscribe(topic, "sub")
            pairs.append((client.create_producer(topic, batching_enabled=False), consumer))

        def produce(producer: pulsar.Producer) -> None:
            n = 0
            while not stop.is_set():  # bounded by the stop event
                producer.send_async(b"x" * 100, lambda *_: None)
                n += 1
                stop.wait(1 / PRODUCE_RATE)

        def consume(consumer: pulsar.Consumer) -> None:
            while not stop.is_set():  # bounded by the stop event
                try:
                    consumer.acknowledge(consumer.receive(200))
                except pulsar.Timeout:
                    continue

        threads = [threading.Thread(target=produce, args=(p,), daemon=True) for p, _ in pairs]
        threads += [threading.Thread(target=consume, args=(c,), daemon=True) for _, c in pairs]
        for t in threads:
            t.start()
        stop.wait(2.0)  # warm up: every cursor has acked and written once
        before, start = _zxid(server), time.monotonic()
        stop.wait(seconds)
        writes, elapsed = _zxid(server) - before, time.monotonic() - start
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for producer, _ in pairs:
            producer.flush()
        return writes / elapsed / cursors
    finally:
        stop.set()
        client.close()


def _table(title: str, unit: str, results: dict[str, dict[str, list[float]]]) -> None:
    backends = list(results)
    print(f"\n{title}")
    print("| " + " | ".join(["operation", *(f"{b} {unit} (median; runs)" for b in backends)]) + " |")
    print("|" + "---|" * (len(backends) + 1))
    for name in results[backends[0]]:
        cells = [f"{statistics.median(results[b][name]):,.0f}; {', '.join(f'{v:,.0f}' for v in results[b][name])}"
                 for b in backends]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--cursors", type=int, default=10)
    parser.add_argument("--consume-seconds", type=float, default=15.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    backends = ("sqlite", "zookeeper")
    server = ZooKeeperServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="magnetar-metadata-bench-") as tmp_name:
            tmp = Path(tmp_name)
            for in_flight in args.in_flight:
                ops: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
                for run in range(args.repeats):
                    for backend in backends if run % 2 == 0 else reversed(backends):
                        for name, rate in asyncio.run(ops_once(backend, server, tmp, args.ops, in_flight)).items():
                            ops[backend].setdefault(name, []).append(rate)
                    print(f"store ops, {in_flight} in flight, run {run + 1} done", flush=True)
                _table(f"Store operations, {in_flight} in flight ({args.ops} each)", "ops/s", ops)
            created: dict[str, dict[str, list[float]]] = {b: {"topics created": []} for b in backends}
            brokers = {b: _broker(tmp, b, server) for b in backends}
            try:
                for run in range(args.repeats):
                    for backend in backends if run % 2 == 0 else reversed(backends):
                        created[backend]["topics created"].append(
                            topic_creation_rate(brokers[backend], args.topics, run))
                _table(f"Topic creation, {args.topics} topics one after another", "topics/s", created)
                rates = [writes_per_cursor(brokers["zookeeper"], server, args.cursors, args.consume_seconds)
                         for _ in range(args.repeats)]
            finally:
                for broker in brokers.values():
                    broker.kill()
            print(f"\nZooKeeper writes per active cursor, {args.cursors} cursors, {PRODUCE_RATE} msg/s each acked one "
                  f"by one, {args.consume_seconds:.0f} s: {statistics.median(rates):.2f} /s "
                  f"(runs {', '.join(f'{r:.2f}' for r in rates)}; aim: at most 1)")
    finally:
        server.close()


if __name__ == "__main__":
    main()
