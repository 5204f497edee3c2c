"""A complete pipeline on ``magnetar standalone``: stream a topic, transform, write to another topic and
to Parquet.

    .venv/bin/magnetar standalone --data-dir ./data --broker-port 6650 --web-port 8080 &
    .venv/bin/python examples/spark_pipeline.py --service-url pulsar://localhost:6650 --out ./pipeline-out

It produces a few orders into ``orders`` (so there is something to read), then runs one streaming query
with ``trigger(availableNow=True)``: every order is parsed, priced in cents and written both to the topic
``orders-priced`` (key = customer, properties kept) and to Parquet files under ``--out``. Run it again:
the checkpoints under ``--out`` make it read only the orders produced since.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from magnetar.client.sync import Client


def produce_orders(service_url: str, count: int) -> None:
    with Client(service_url) as client:
        producer = client.create_producer("orders")
        for i in range(count):
            order = {"customer": f"c{i % 7}", "item": f"item-{i % 3}", "price": round(1.5 + i, 2)}
            producer.send(json.dumps(order).encode(), key=order["customer"], properties={"source": "example"})
        producer.close()


def priced(orders: DataFrame) -> DataFrame:
    fields = "customer STRING, item STRING, price DOUBLE"
    parsed = orders.select(F.from_json(F.col("value").cast("string"), fields).alias("o"), "properties", "publishTime")
    return parsed.select(
        F.col("o.customer").alias("customer"), F.col("o.item").alias("item"),
        (F.col("o.price") * 100).cast("long").alias("cents"), "properties", "publishTime",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="stream orders -> priced orders topic + Parquet")
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--out", type=Path, default=Path("pipeline-out"))
    parser.add_argument("--orders", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    produce_orders(args.service_url, args.orders)

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    orders = (spark.readStream.format("pulsar").option("service.url", args.service_url).option("topic", "orders")
              .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "1000").load())
    out = priced(orders)

    def both(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        batch.write.mode("append").parquet(str(args.out / "parquet"))
        (batch.select(F.to_json(F.struct("customer", "item", "cents")).alias("value"),
                      F.col("customer").alias("key"), "properties")
         .write.format("pulsar").option("service.url", args.service_url).option("topic", "orders-priced")
         .mode("append").save())
        batch.unpersist()

    query = (out.writeStream.foreachBatch(both).option("checkpointLocation", str(args.out / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    total = spark.read.parquet(str(args.out / "parquet")).count()
    print(f"pipeline done: {total} priced orders in {args.out / 'parquet'} and in topic orders-priced")
    spark.stop()


if __name__ == "__main__":
    main()
