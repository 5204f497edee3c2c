"""Topic export: a range of a topic written as Parquet (or any file format Spark writes) by a Spark batch job.

    from magnetar.spark import export_topic
    rows = export_topic(spark, "pulsar://localhost:6650", "orders", "/data/orders.parquet",
                        start="earliest", end="latest")

The read goes through the ``pulsar`` data source, so every partition (and, with ``min_partitions``, every
piece of a large one) is read by its own task in parallel, on ``local[*]`` or any cluster. The output has the
source's columns (``key, value, topic, partition, messageId, publishTime, eventTime, properties``) and reads
back with ``spark.read.parquet``. ``start`` / ``end`` take what the source options take: ``earliest`` /
``latest``, a JSON object of message ids per partition, or a publish time (epoch milliseconds or an ISO-8601
date-time, which mean ``startingTime`` / ``endingTime``). ``magnetar spark export`` is the same on the command
line. Knows Spark's DataFrame API and the source's option names; nothing of the broker.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from magnetar.spark.options import OptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["export_topic", "range_options"]


def _time_ms(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def range_options(start: str, end: str) -> dict[str, str]:
    """The source options that read from ``start`` to ``end`` (see the module docstring)."""
    out: dict[str, str] = {}
    for value, offsets_key, time_key, word in ((start, "startingOffsets", "startingTime", "earliest"),
                                               (end, "endingOffsets", "endingTime", "latest")):
        text = value.strip()
        if text.lower() in ("earliest", "latest") or text.startswith("{"):
            if text.lower() == "latest" and word == "earliest":
                raise OptionError("an export from 'latest' is empty: give earliest, offsets or a time")
            if text.lower() == "earliest" and word == "latest":
                raise OptionError("an export must end at 'latest', offsets or a time, not 'earliest'")
            out[offsets_key] = text
            continue
        ms = _time_ms(text)
        if ms is None:
            raise OptionError(f"{'--from' if word == 'earliest' else '--to'} must be earliest/latest, a JSON object "
                              f"of message ids per partition, epoch milliseconds or an ISO-8601 time; got {value!r}")
        out[time_key] = str(ms)
    return out


def export_topic(
    spark: SparkSession, service_url: str, topic: str, out: str, *, start: str = "earliest", end: str = "latest",
    file_format: str = "parquet", mode: str = "errorifexists", min_partitions: int | None = None,
) -> int:
    """Write ``topic`` from ``start`` to ``end`` to ``out`` in ``file_format``; the number of rows ``out`` holds
    afterwards (read back from the files, so the topic is read once)."""
    reader = spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
    for key, value in range_options(start, end).items():
        reader = reader.option(key, value)
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    reader.load().write.format(file_format).mode(mode).save(out)
    rows: int = spark.read.format(file_format).load(out).count()
    return rows
