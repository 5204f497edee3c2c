"""One Spark driver (client mode) that runs the connector's jobs on the standalone cluster, in the order a spec
lists them, and writes what each job returned (or the error it raised) as JSON for the tests to judge.

    python -m tests.spark.cluster_jobs SPEC.json RESULT.json

The spec: ``{"conf": {spark settings}, "url": broker, "jobs": [[name, {arguments}], ...]}``. One driver for all
the jobs keeps the cluster tests to one JVM start (plus its executors); a failing job is recorded and the next one
runs. The jobs: ``eo_stream`` (a topic through the exactly-once sink; the tests kill an executor under it),
``restart`` (the same query resumed on a killed driver's checkpoint), ``write``, ``read``, ``read_stream``, and
the two ``magnetar spark`` commands run in this driver (``export``, ``audit``), ``where`` (the file the
executors import magnetar from), and ``direct_read`` (a topic of a broker whose ledgers are in a bucket, read
through that broker and straight from the bucket: ``readFrom=storage``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.eo_job import start_query

QUERY_TIMEOUT_S = 400


def _eo_stream(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    query = start_query(spark, url, a["source"], a["sink"], a["checkpoint"], 600_000, rows_per_batch=None)
    return _finished(query)


def _restart(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    return _finished(start_query(spark, url, a["source"], a["sink"], a["checkpoint"], 600_000))


def _finished(query: Any) -> dict[str, Any]:
    if not query.awaitTermination(QUERY_TIMEOUT_S):
        query.stop()
        raise RuntimeError(f"the query did not finish within {QUERY_TIMEOUT_S} s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return {"batches": len(query.recentProgress)}


def _write(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    df = spark.range(a["rows"], numPartitions=4).select(
        F.concat(F.lit("w-"), F.col("id").cast("string")).alias("value"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"))
    df.write.format("pulsar").option("service.url", url).option("topic", a["topic"]).mode("append").save()
    return {}


def _read(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    rows = spark.read.format("pulsar").option("service.url", url).option("topic", a["topic"]).load().collect()
    return {"values": sorted(r.value.decode() for r in rows), "partitions": sorted({r.partition for r in rows})}


def _read_stream(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    query = (spark.readStream.format("pulsar").option("service.url", url).option("topic", a["topic"])
             .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "40").load()
             .select("value", "partition").writeStream.format("parquet").option("path", a["out"])
             .option("checkpointLocation", a["checkpoint"]).trigger(availableNow=True).start())
    _finished(query)
    rows = spark.read.parquet(a["out"]).collect()
    return {"values": sorted(r.value.decode() for r in rows),
            "batches": sum(1 for p in query.recentProgress if p["numInputRows"] > 0)}


def _direct_read(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    """The same batch read through the broker and from the bucket (its options in ``a["storage"]``)."""
    out: dict[str, Any] = {}
    for way, options in (("broker", {}), ("storage", a["storage"])):
        reader = (spark.read.format("pulsar").option("service.url", a["url"]).option("admin.url", a["admin"])
                  .option("topic", a["topic"]))
        for key, value in options.items():
            reader = reader.option(key, value)
        df = reader.load()
        out[way] = [[None if r.key is None else r.key.hex(), r.value.hex(), r.partition, list(r.messageId),
                     r.publishTime.isoformat(), r.eventTime.isoformat() if r.eventTime else None,
                     sorted((r.properties or {}).items())] for r in df.collect()]
    return out


def _where(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    """Where the executors import magnetar from (the lambda travels by value: executors need no ``tests``)."""
    files = spark.sparkContext.parallelize(range(4), 4).map(lambda _: __import__("magnetar").__file__).collect()
    return {"files": sorted(set(files))}


def _command(args: list[str]) -> dict[str, Any]:
    from magnetar.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return {"code": code, "stdout": out.getvalue()}


def _export(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    master = spark.sparkContext.master
    return _command(["spark", "export", "--service-url", url, "--topic", a["topic"], "--out", a["out"],
                     "--master", master])


def _audit(spark: SparkSession, url: str, a: dict[str, Any]) -> dict[str, Any]:
    return _command(["spark", "audit-ledgers", "--data-dir", a["data_dir"], "--partitions", "3", "--master",
                     spark.sparkContext.master])


JOBS: dict[str, Callable[[SparkSession, str, dict[str, Any]], dict[str, Any]]] = {
    "eo_stream": _eo_stream, "restart": _restart, "write": _write, "read": _read, "read_stream": _read_stream,
    "export": _export, "audit": _audit, "where": _where, "direct_read": _direct_read,
}


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("magnetar-cluster-jobs")
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {}
    try:
        for name, args in spec["jobs"]:
            try:
                results[name] = {"ok": True, **JOBS[name](spark, spec["url"], args)}
            except Exception as exc:
                results[name] = {"ok": False, "error": f"{exc}\n{traceback.format_exc()}"}
            Path(argv[1]).write_text(json.dumps(results))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
