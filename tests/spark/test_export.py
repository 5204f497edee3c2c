"""Topic export: a topic range to Parquet through the data source (function and ``magnetar spark export``),
and back into a topic with the sink: the same messages, keys, properties and ids."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from magnetar.cli import main
from magnetar.client.sync import Client
from magnetar.spark import export_topic
from magnetar.spark.export import range_options
from magnetar.spark.options import OptionError
from tests.integration.broker_process import BrokerProcess
from tests.spark.conftest import PARTITIONS, produce, topic_name


def test_topic_round_trips_through_parquet(spark: SparkSession, broker: BrokerProcess, client: Client,
                                           tmp_path: Path) -> None:
    topic, back = topic_name("export"), topic_name("import")
    sent = produce(client, topic, 90)
    out = str(tmp_path / "export.parquet")
    assert export_topic(spark, broker.url, topic, out) == 90
    rows = spark.read.parquet(out).collect()
    assert len({r.partition for r in rows}) == PARTITIONS
    for r in rows:
        value = r.value.decode()
        mid = sent[value]["id"]
        assert r.key == f"k{value.split('-')[1]}".encode() and r.properties == sent[value]["properties"]
        assert (r.messageId.ledgerId, r.messageId.entryId) == (mid.ledger_id, mid.entry_id)
    (spark.read.parquet(out).select("value", "key", "properties", "eventTime").write.format("pulsar")
     .option("service.url", broker.url).option("topic", back).mode("append").save())
    got = []
    for part in range(PARTITIONS):
        got += list(client.read(f"{back}-partition-{part}", start="earliest", end="latest", timeout_ms=10_000))
    assert sorted((m.data.decode(), m.key, m.event_time_ms) for m in got) == sorted(
        (v, f"k{v.split('-')[1]}", 1_700_000_000_000 + int(v.split("-")[1])) for v in sent)


def test_cli_exports_a_time_range(spark: SparkSession, broker: BrokerProcess, client: Client,
                                  tmp_path: Path) -> None:
    topic = topic_name("export-cli")
    produce(client, topic, 20, prefix="old")
    later = produce(client, topic, 15, prefix="new")
    stored = [m for part in range(PARTITIONS) for m in client.read(
        f"{topic}-partition-{part}", start="earliest", end="latest", timeout_ms=10_000)]
    start_ms = min(m.publish_time_ms for m in stored if m.data.decode() in later)  # broker's clock, not ours
    out = str(tmp_path / "cli")
    assert main(["spark", "export", "--service-url", broker.url, "--topic", topic, "--from", str(start_ms),
                 "--out", out, "--master", "local[2]"]) == 0
    values = sorted(r.value.decode() for r in spark.read.parquet(out).collect())
    assert values == sorted(m.data.decode() for m in stored if m.publish_time_ms >= start_ms)
    assert set(later) <= set(values)
    assert main(["spark", "export", "--service-url", broker.url, "--topic", topic, "--from", "yesterday",
                 "--out", str(tmp_path / "bad")]) == 2


def test_range_options() -> None:
    assert range_options("earliest", "latest") == {"startingOffsets": "earliest", "endingOffsets": "latest"}
    assert range_options("2024-01-02T00:00:00Z", "1704153600001") == {
        "startingTime": "1704153600000", "endingTime": "1704153600001"}
    try:
        range_options("latest", "latest")
    except OptionError as exc:
        assert "empty" in str(exc)
    else:
        raise AssertionError("an export from latest was accepted")
