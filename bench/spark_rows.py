"""Rows per second through the Spark connector: batch writes at-least-once and exactly-once, then a batch
read, of N small messages.

    .venv/bin/python bench/spark_rows.py --rows 1000000 [--partitions 4] [--master local[2]] [--json]

Starts its own ``magnetar standalone`` (a temporary data directory) and a local SparkSession; writes
``rows`` 16-byte values with ``df.write.format("pulsar")`` once per ``deliveryGuarantee`` (each to its own
topic; exactly-once: one transaction per task, committed by the driver), then reads the exactly-once topic
back with ``spark.read.format("pulsar")`` and counts it. A small untimed write with each guarantee goes first, so
neither timed write pays for starting the sink's Python workers (the first write did, which made at-least-once,
timed first, look slower than exactly-once). Reports wall-clock rows/s for each; not a timed test.
``--json`` adds a last line with the figures (``bench/txn_batch_log.py`` reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.integration.broker_process import BrokerProcess

GUARANTEES = ("at_least_once", "exactly_once")
WARM_UP_ROWS = 20_000  # untimed writes with each guarantee before the timed ones


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line last")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory() as data:
        broker = BrokerProcess(Path(data), extra_args=(
            "--set", "allowAutoTopicCreationType=partitioned", "--set", f"defaultNumPartitions={args.partitions}",
            "--set", "defaultRetentionTimeInMinutes=-1", "--set", "defaultRetentionSizeInMB=-1",
        )).start()
        spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            figures = run(spark, broker.url, args.rows, args.partitions)
        finally:
            spark.stop()
            broker.kill()
    if args.json:
        print(json.dumps(figures))


def run(spark: SparkSession, url: str, rows: int, partitions: int) -> dict[str, float]:
    topic = f"bench-{int(time.time())}"
    df = spark.range(rows, numPartitions=partitions).select(
        F.format_string("%016d", F.col("id")).cast("binary").alias("value"))
    df.count()  # warm the session up outside the timings
    warm = spark.range(min(rows, WARM_UP_ROWS), numPartitions=partitions).select(
        F.format_string("%016d", F.col("id")).cast("binary").alias("value"))
    for guarantee in GUARANTEES:  # and the sink's workers, imports and connections: the first write paid them
        (warm.write.format("pulsar").option("service.url", url).option("topic", f"{topic}-warm-{guarantee}")
         .option("deliveryGuarantee", guarantee).mode("append").save())
    write_s = {}
    for guarantee in GUARANTEES:
        t0 = time.perf_counter()
        (df.write.format("pulsar").option("service.url", url).option("topic", f"{topic}-{guarantee}")
         .option("deliveryGuarantee", guarantee).mode("append").save())
        write_s[guarantee] = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = (spark.read.format("pulsar").option("service.url", url).option("topic", f"{topic}-exactly_once")
           .load().count())
    read_s = time.perf_counter() - t0
    assert got == rows, f"read {got} rows, wrote {rows}"
    print(f"rows={rows} topic partitions={partitions} master={spark.sparkContext.master}")
    for guarantee, seconds in write_s.items():
        print(f"batch write {guarantee:13s}: {seconds:8.1f} s  {rows / seconds:10,.0f} rows/s")
    print(f"batch read:                 {read_s:8.1f} s  {rows / read_s:10,.0f} rows/s")
    return {"rows": rows, **{g: rows / s for g, s in write_s.items()}, "read": rows / read_s}


if __name__ == "__main__":
    main()
