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


async def make_data_dir(data_dir: Path) -> tuple[set[int], tuple[str, int]]:
    """Three topics with several ledgers, two orphans, one listed ledger whose files are gone."""
    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    store = await EmbeddedLedgerStore.open(data_dir / "ledgers", journal_sync_data=False)
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
