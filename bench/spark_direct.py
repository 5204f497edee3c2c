"""A topic backlog read by Spark through the broker and straight from the object store (``readFrom=storage``), side
by side: rows/s, MB/s and the broker's CPU during each read.

    .venv/bin/python bench/spark_direct.py [--mb 200] [--value-bytes 1024] [--partitions 8] [--modes local,cluster]
                                           [--no-batching] [--flush-delay-ms 5]

Starts a ``moto_server`` process (the S3 API), a ``magnetar standalone`` whose ledgers live in a bucket on it
(``ledgerStoreUrl=s3://...``, ledgers of ``--entries-per-ledger`` entries), and writes ``--mb`` megabytes of
``--value-bytes`` values into a topic of ``--partitions`` partitions with the connector's batch sink (at least
once: no transactions, whose entries a direct read leaves to the broker; client
batching on, or ``--no-batching``: one entry per row; the bucket's chunk objects group what the broker flushes
within ``--flush-delay-ms``, its ``ledgerStoreFlushMaxDelayMillis``). Then, per mode
(``local``: ``local[2]``; ``cluster``: a standalone master and two one-core workers, ``tests/spark/cluster.py``),
the whole backlog is read once through the broker and once from the bucket, the query summing every value's
length so that every row is materialised, after a small warm-up read that starts the Python workers. Reported per
read: rows, seconds, rows/s, MB/s of values, and the CPU seconds the broker process and the moto process spent
during it (from /proc), next to what the idle broker spends in as long (measured over 10 s before the reads).
Not a timed test: the figures are for the closing note and ``docs/guide/spark.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS, MotoServer
from tests.spark.cluster import SparkCluster

BUCKET = "bench-direct"
PREFIX = "broker"
TOPIC = "persistent://public/default/backlog"
IDLE_S = 10.0


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _session(conf: dict[str, str]) -> SparkSession:
    builder = SparkSession.builder.appName("bench-spark-direct")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _write(spark: SparkSession, url: str, rows: int, value_bytes: int, batching: bool) -> None:
    pad = "x" * max(value_bytes - 12, 0)
    df = spark.range(rows, numPartitions=8).select(
        F.concat(F.lpad(F.col("id").cast("string"), 12, "0"), F.lit(pad)).alias("value"),
        F.col("id").cast("string").alias("key"))
    df.write.format("pulsar").option("service.url", url).option("topic", TOPIC).option(
        "batchingEnabled", str(batching).lower()).option("deliveryGuarantee", "at_least_once").mode("append").save()


def _read(spark: SparkSession, broker: BrokerProcess, moto: MotoServer, way: str, pids: dict[str, int],
          ) -> dict[str, Any]:
    reader = (spark.read.format("pulsar").option("service.url", broker.url).option("admin.url", broker.web_url)
              .option("topic", TOPIC))
    if way == "storage":
        reader = (reader.option("readFrom", "storage").option("ledgerStore.url", f"s3://{BUCKET}/{PREFIX}")
                  .option("ledgerStore.endpoint", moto.endpoint).option("ledgerStore.region", "us-east-1"))
    df = reader.load()
    cpu0 = {name: _cpu_s(pid) for name, pid in pids.items()}
    started = time.monotonic()
    row = df.select(F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("bytes")).collect()[0]
    seconds = time.monotonic() - started
    cpu = {name: round(_cpu_s(pid) - cpu0[name], 1) for name, pid in pids.items()}
    return {"way": way, "tasks": df.rdd.getNumPartitions(), "rows": int(row["rows"]), "s": round(seconds, 1),
            "rows_per_s": round(row["rows"] / seconds), "mb_per_s": round(row["bytes"] / seconds / 1e6, 1),
            "broker_cpu_s": cpu["broker"], "moto_cpu_s": cpu["moto"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="megabytes of values in the backlog")
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--entries-per-ledger", type=int, default=50)
    parser.add_argument("--modes", default="local,cluster")
    parser.add_argument("--no-batching", action="store_true", help="one entry per row")
    parser.add_argument("--flush-delay-ms", type=int, default=5)
    args = parser.parse_args()
    os.environ.update(CREDENTIALS)  # the AWS chain of the broker, the driver and local workers
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rows = args.mb * 1_000_000 // args.value_bytes
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="spark-direct-") as tmp:
        work = Path(tmp)
        moto = MotoServer().start()
        broker = None
        try:
            moto.create_bucket(BUCKET)
            broker = BrokerProcess(work / "data", extra_args=(
                "--set", "allowAutoTopicCreationType=partitioned", "--set", f"defaultNumPartitions={args.partitions}",
                "--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1",
                "--set", f"managedLedgerMaxEntriesPerLedger={args.entries_per_ledger}",
                "--set", f"ledgerStoreUrl=s3://{BUCKET}/{PREFIX}",
                "--set", f"ledgerStoreServiceEndpoint={moto.endpoint}",
                "--set", "ledgerStoreRegion=us-east-1",
                "--set", f"ledgerStoreFlushMaxDelayMillis={args.flush_delay_ms}",
            ), env=dict(CREDENTIALS)).start()
            assert broker.proc is not None and moto.proc is not None
            pids = {"broker": broker.proc.pid, "moto": moto.proc.pid}
            local = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.memory": "1g"}
            spark = _session(local)
            started = time.monotonic()
            _write(spark, broker.url, rows, args.value_bytes, not args.no_batching)
            print(f"wrote {rows} rows of {args.value_bytes} bytes ({args.mb} MB) into {args.partitions} partitions "
                  f"in {time.monotonic() - started:.0f} s, batching {'off' if args.no_batching else 'on'}", flush=True)
            idle0 = _cpu_s(pids["broker"])
            time.sleep(IDLE_S)  # a bench, not a test: the idle broker's own CPU over a fixed window
            idle_per_s = (_cpu_s(pids["broker"]) - idle0) / IDLE_S
            spark.stop()
            for mode in args.modes.split(","):
                cluster = SparkCluster(work / "cluster").start() if mode == "cluster" else None
                conf = local if cluster is None else {
                    **cluster.driver_conf(), "spark.driver.memory": "1g",
                    **{f"spark.executorEnv.{k}": v for k, v in CREDENTIALS.items()}}  # the executors' AWS chain
                spark = _session(conf)
                try:
                    spark.read.format("pulsar").option("service.url", broker.url).option("topic", TOPIC) \
                        .load().limit(10).collect()  # warm-up: start the Python workers
                    for way in ("broker", "storage"):
                        result = {"mode": mode, **_read(spark, broker, moto, way, pids)}
                        results.append(result)
                        print(json.dumps(result), flush=True)
                finally:
                    spark.stop()
                    if cluster is not None:
                        cluster.stop()
        finally:
            if broker is not None:
                broker.kill()
            moto.stop()
    print(f"\n{'mode':<8} {'read':<8} {'tasks':>6} {'rows':>9} {'s':>7} {'rows/s':>9} {'MB/s':>7} {'broker cpu s':>13} "
          f"{'idle broker s':>14} {'moto cpu s':>11}")
    for r in results:
        print(f"{r['mode']:<8} {r['way']:<8} {r['tasks']:>6} {r['rows']:>9} {r['s']:>7} {r['rows_per_s']:>9} "
              f"{r['mb_per_s']:>7} {r['broker_cpu_s']:>13} {round(idle_per_s * r['s'], 1):>14} {r['moto_cpu_s']:>11}")


if __name__ == "__main__":
    main()
