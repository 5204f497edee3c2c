"""PIP-186's ledger audit as a Spark job, for stores too large to list from one process.

The storage listing (every ledger's sidecar: owner, component, size) is read by Spark tasks in parallel and
anti-joined with what metadata knows (ledgers the managed-ledger records and compaction cursors reference,
and ledgers pending in deletion messages), which the driver reads once. Orphans: in storage, known to
nothing. Dangling references: listed by a record, missing from storage. Runs on ``local[*]`` or any cluster
whose workers see the data directory (a stopped broker's, or a copy: it reads files only). A broker whose
ledgers live in an object store (``ledgerStoreUrl=s3://...``): pass its ``ledger_store`` settings; the tasks then
read the ledgers' metadata objects from the bucket (credentials: the AWS chain of each worker).

    from magnetar.spark.ledger_audit import audit_ledgers
    result = audit_ledgers(spark, "/var/lib/magnetar/data")
    result.orphans.show(); result.dangling.show()

Unlike the data source, this maintenance job reads the broker's metadata and storage directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from magnetar.broker.compaction.state import referenced_ledgers
from magnetar.broker.deletion.audit import StoppedOwners, known_ledgers
from magnetar.core.clock import SystemClock
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.api import CountingLedgerIdAllocator, LedgerInfo, StorageError
from magnetar.storage.inspect import DirectoryLedgerReader, ledger_ids, ledger_info
from magnetar.storage.objectstore.opening import open_s3_ledger_store
from magnetar.storage.objectstore.settings import LedgerStoreConfig, parse_ledger_store_url

STORAGE_SCHEMA = "ledger_id long, owner string, component string, size_bytes long"


@dataclass(frozen=True)
class LedgerAudit:
    storage_ledgers: int
    referenced_ledgers: int
    pending_deletions: int
    orphans: DataFrame  # STORAGE_SCHEMA
    dangling: DataFrame  # managed_ledger string, ledger_id long


Row = tuple[int, str | None, str | None, int]


def _row(ledger_id: int, info: LedgerInfo) -> Row:
    custom = info.custom_metadata
    return ledger_id, custom.get("pulsar/managed-ledger"), custom.get("component"), info.size_bytes


async def _bucket_infos(where: tuple[str, str, str], ids: list[int]) -> list[Row]:
    url, endpoint, region = where
    config = LedgerStoreConfig(url=parse_ledger_store_url(url), service_endpoint=endpoint, region=region)
    store = await open_s3_ledger_store(config, clock=SystemClock(), allocator=CountingLedgerIdAllocator(),
                                       probe=False)  # reads only
    try:
        rows = []
        for ledger_id in ids:
            try:
                rows.append(_row(ledger_id, await store.info(ledger_id)))
            except StorageError:
                continue  # deleted meanwhile
        return rows
    finally:
        await store.close()


def _bucket_rows(where: tuple[str, str, str], ids: Iterable[int]) -> Iterator[Row]:
    """Executor side, ledgers in a bucket: one row per ledger of this partition (one event loop per task)."""
    return iter(asyncio.run(_bucket_infos(where, list(ids))))


def _sidecar_rows(store_dir: str, ids: Iterable[int]) -> Iterator[Row]:
    """Executor side: one row per ledger of this partition (a ledger deleted meanwhile is skipped)."""
    directory = Path(store_dir)
    for ledger_id in ids:
        try:
            info = ledger_info(directory, ledger_id)
        except StorageError:
            continue
        yield _row(ledger_id, info)


async def _known(data_dir: Path, ledger_store: LedgerStoreConfig | None
                 ) -> tuple[dict[int, str], set[int], set[int], list[int]]:
    """What metadata references and what is pending deletion (read on the driver), and the ledger ids."""
    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    try:
        if ledger_store is None or not ledger_store.url.shared:
            reader = DirectoryLedgerReader(data_dir / "ledgers")
            known = await known_ledgers(metadata, reader, await StoppedOwners(metadata).list_names(),
                                       (referenced_ledgers,))
            return (*known, ledger_ids(data_dir / "ledgers"))
        store = await open_s3_ledger_store(ledger_store, clock=SystemClock(), allocator=CountingLedgerIdAllocator(),
                                           probe=False)
        try:
            known = await known_ledgers(metadata, store, await StoppedOwners(metadata).list_names(),
                                       (referenced_ledgers,))
            return (*known, list(await store.list_ledgers()))
        finally:
            await store.close()
    finally:
        await metadata.close()


def audit_ledgers(spark: SparkSession, data_dir: str | Path, *, partitions: int = 0,
                  ledger_store: LedgerStoreConfig | None = None) -> LedgerAudit:
    """Audit a stopped broker's data directory (and, with ``ledger_store``, its bucket); ``partitions``
    (default: Spark's parallelism) splits the storage listing."""
    data_dir = Path(data_dir)
    store_dir = str(data_dir / "ledgers")
    owners, referenced, pending, ids = asyncio.run(_known(data_dir, ledger_store))
    slices = partitions or spark.sparkContext.defaultParallelism
    parts = spark.sparkContext.parallelize(ids, max(1, slices))
    if ledger_store is not None and ledger_store.url.shared:
        url = ledger_store.url
        where = (f"s3://{url.bucket}/{url.prefix}", ledger_store.service_endpoint, ledger_store.region)
        rows = parts.mapPartitions(lambda part: _bucket_rows(where, part))
    else:
        rows = parts.mapPartitions(lambda part: _sidecar_rows(store_dir, part))
    storage = spark.createDataFrame(rows, STORAGE_SCHEMA)
    known = spark.createDataFrame([(i,) for i in sorted(referenced | pending)], "ledger_id long")
    orphans = storage.join(known, "ledger_id", "left_anti")
    listed = spark.createDataFrame(sorted((name, i) for i, name in owners.items()),
                                   "managed_ledger string, ledger_id long")
    dangling = listed.join(storage.select("ledger_id"), "ledger_id", "left_anti")
    return LedgerAudit(len(ids), len(referenced), len(pending), orphans, dangling)
