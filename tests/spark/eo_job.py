"""The streaming query the exactly-once crash tests run: a magnetar topic through Spark into another topic
with the exactly-once sink. ``start_query`` runs it in a given session (the restart, in the shared test
session); ``python -m tests.spark.eo_job URL SOURCE SINK CHECKPOINT TXN_TIMEOUT_MS`` runs it in a driver
process of its own (the one the tests SIGKILL at a ``MAGNETAR_SPARK_TEST_HOOK`` point)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

ROWS_PER_BATCH = 25


def start_query(spark: SparkSession, url: str, source: str, sink: str, checkpoint: str,
                txn_timeout_ms: int) -> StreamingQuery:
    return (
        spark.readStream.format("pulsar").option("service.url", url).option("topic", source)
        .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", str(ROWS_PER_BATCH)).load()
        .select(F.upper(F.col("value").cast("string")).alias("value"), "key")
        .writeStream.format("pulsar").option("service.url", url).option("topic", sink)
        .option("deliveryGuarantee", "exactly_once").option("txnTimeoutMs", str(txn_timeout_ms))
        .option("sinkId", "upper").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )


def main(argv: list[str]) -> int:
    url, source, sink, checkpoint, timeout_ms = argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("magnetar-eo-crash")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "512m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    query = start_query(spark, url, source, sink, checkpoint, int(timeout_ms))
    query.awaitTermination(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
