"""PIP-186's ledger audit as a Spark job on local[2]: the same orphans and dangling references as the
one-process audit of the same stopped data directory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from magnetar import cli
from magnetar.cli.admin.audit import audit_data_dir
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.spark.ledger_audit import audit_ledgers
from magnetar.storage.embedded import EmbeddedLedgerStore
from magnetar.storage.objectstore import ObjectLedgerStore, parse_ledger_store_url
from magnetar.storage.objectstore.s3 import S3ObjectClient, S3Settings
from magnetar.storage.objectstore.settings import LedgerStoreConfig
from tests import s3_server
from tests.s3_server import CREDENTIALS, MotoServer

moto = s3_server.moto  # the module-scoped S3 server fixture


async def make_data_dir(data_dir: Path, bucket: LedgerStoreConfig | None = None) -> tuple[set[int], tuple[str, int]]:
    """Three topics with several ledgers, two orphans, one listed ledger whose files are gone (in the data
    directory, or with ``bucket`` in a bucket)."""
    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    store: EmbeddedLedgerStore | ObjectLedgerStore
    if bucket is None:
        store = await EmbeddedLedgerStore.open(data_dir / "ledgers", journal_sync_data=False)
    else:
        client = S3ObjectClient(S3Settings(bucket=bucket.url.bucket, service_endpoint=bucket.service_endpoint,
                                           region=bucket.region))
        store = await ObjectLedgerStore.open(client, prefix=bucket.url.prefix)
    factory = LedgerFactory(store, metadata, config=ManagedLedgerConfig(max_entries_per_ledger=2))
    try:
        for t in range(3):
            ledger = await factory.open(f"t/ns/persistent/audited-{t}")
            for i in range(7):
                await ledger.add_entry(f"{t}-{i}".encode())
        orphans = set()
        for _ in range(2):
            info = await store.create_ledger({"application": "magnetar", "component": "managed-ledger",
                                              "pulsar/managed-ledger": "t/ns/persistent/audited-0"})
            orphans.add(info.ledger_id)
        victim = (await factory.open("t/ns/persistent/audited-1")).ledgers()[0].ledger_id
        await store.delete(victim)  # referenced, yet gone: a dangling reference
    finally:
        await factory.close()
        await store.close()
        await metadata.close()
    return orphans, ("t/ns/persistent/audited-1", victim)


def test_spark_audit_finds_what_the_one_process_audit_finds(spark: SparkSession, tmp_path: Path) -> None:
    orphans, dangling = asyncio.run(make_data_dir(tmp_path))
    result = audit_ledgers(spark, tmp_path, partitions=3)
    assert {r.ledger_id for r in result.orphans.collect()} == orphans
    assert [(r.managed_ledger, r.ledger_id) for r in result.dangling.collect()] == [dangling]
    assert result.storage_ledgers > len(orphans)
    report = asyncio.run(audit_data_dir(tmp_path, fix=False, parallelism=4))
    assert {o.ledger_id for o in report.orphans} == orphans
    assert report.dangling == [dangling]


def test_magnetar_spark_audit_ledgers_command(spark: SparkSession, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI verb, run in this process so it takes the shared session (it stops only a session it made)."""
    orphans, dangling = asyncio.run(make_data_dir(tmp_path))
    assert cli.main(["spark", "audit-ledgers", "--data-dir", str(tmp_path)]) == 1  # 1: it found some
    report = json.loads(capsys.readouterr().out)
    assert {o["ledger_id"] for o in report["orphans"]} == orphans
    assert [(d["managed_ledger"], d["ledger_id"]) for d in report["dangling"]] == [dangling]


def test_spark_audit_of_ledgers_in_a_bucket(spark: SparkSession, tmp_path: Path, moto: MotoServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """ledgerStoreUrl=s3://...: the tasks read the ledgers' metadata objects from the bucket (credentials from the
    AWS chain: the driver's environment, and the workers' through the context's environment)."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
        monkeypatch.setitem(spark.sparkContext.environment, key, value)
    moto.create_bucket("audited-ledgers")
    bucket = LedgerStoreConfig(url=parse_ledger_store_url("s3://audited-ledgers/broker-1"),
                               service_endpoint=moto.endpoint, region="us-east-1")
    orphans, dangling = asyncio.run(make_data_dir(tmp_path, bucket))
    result = audit_ledgers(spark, tmp_path, partitions=3, ledger_store=bucket)
    assert {r.ledger_id for r in result.orphans.collect()} == orphans
    assert [(r.managed_ledger, r.ledger_id) for r in result.dangling.collect()] == [dangling]
    report = asyncio.run(audit_data_dir(tmp_path, fix=False, parallelism=4, ledger_store=bucket))
    assert {o.ledger_id for o in report.orphans} == orphans
    assert report.dangling == [dangling]
