"""The streaming query the exactly-once crash tests run: a magnetar topic through Spark into another topic
with the exactly-once sink. ``start_query`` runs it in a given session (the restart, in the shared test
session); ``python -m tests.spark.eo_job URL SOURCE SINK CHECKPOINT TXN_TIMEOUT_MS [CONF_JSON [ROWS_PER_BATCH]]`` runs
it in a driver process of its own (the one the tests SIGKILL at a ``MAGNETAR_SPARK_TEST_HOOK`` point), on
``local[2]`` or with the Spark settings ``CONF_JSON`` gives (a standalone cluster's), ``ROWS_PER_BATCH`` rows
per micro-batch (default 25)."""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

ROWS_PER_BATCH = 25
SINK_ID = "upper"


def start_query(spark: SparkSession, url: str, source: str, sink: str, checkpoint: str,
                txn_timeout_ms: int, *, rows_per_batch: int | None = ROWS_PER_BATCH) -> StreamingQuery:
    reader = (spark.readStream.format("pulsar").option("service.url", url).option("topic", source)
              .option("startingOffsets", "earliest"))
    if rows_per_batch is not None:
        reader = reader.option("maxRecordsPerTrigger", str(rows_per_batch))
    return (
        reader.load()
        .select(F.upper(F.col("value").cast("string")).alias("value"), "key")
        .writeStream.format("pulsar").option("service.url", url).option("topic", sink)
        .option("deliveryGuarantee", "exactly_once").option("txnTimeoutMs", str(txn_timeout_ms))
        .option("sinkId", SINK_ID).option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )


def main(argv: list[str]) -> int:
    url, source, sink, checkpoint, timeout_ms = argv[:5]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = json.loads(argv[5]) if len(argv) > 5 else {
        "spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "512m"}
    builder = SparkSession.builder.appName("magnetar-eo-crash")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    per_batch = int(argv[6]) if len(argv) > 6 else ROWS_PER_BATCH
    query = start_query(spark, url, source, sink, checkpoint, int(timeout_ms), rows_per_batch=per_batch)
    query.awaitTermination(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
