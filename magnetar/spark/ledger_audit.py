"""PIP-186's ledger audit as a Spark job, for stores too large to list from one process.

The storage listing (every ledger's sidecar: owner, component, size) is read by Spark tasks in parallel and
anti-joined with what metadata knows (ledgers the managed-ledger records and compaction cursors reference,
and ledgers pending in deletion messages), which the driver reads once. Orphans: in storage, known to
nothing. Dangling references: listed by a record, missing from storage. Runs on ``local[*]`` or any cluster
whose workers see the data directory (a stopped broker's, or a copy: it reads files only).

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

from magnetar.broker.deletion import references  # noqa: F401 - registers compacted ledgers as references
from magnetar.broker.deletion.audit import StoppedOwners, known_ledgers
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.api import StorageError
from magnetar.storage.inspect import DirectoryLedgerReader, ledger_ids, ledger_info

STORAGE_SCHEMA = "ledger_id long, owner string, component string, size_bytes long"


@dataclass(frozen=True)
class LedgerAudit:
    storage_ledgers: int
    referenced_ledgers: int
    pending_deletions: int
    orphans: DataFrame  # STORAGE_SCHEMA
    dangling: DataFrame  # managed_ledger string, ledger_id long


def _sidecar_rows(store_dir: str, ids: Iterable[int]) -> Iterator[tuple[int, str | None, str | None, int]]:
    """Executor side: one row per ledger of this partition (a ledger deleted meanwhile is skipped)."""
    directory = Path(store_dir)
    for ledger_id in ids:
        try:
            info = ledger_info(directory, ledger_id)
        except StorageError:
            continue
        custom = info.custom_metadata
        yield ledger_id, custom.get("pulsar/managed-ledger"), custom.get("component"), info.size_bytes


async def _known(data_dir: Path) -> tuple[dict[int, str], set[int], set[int]]:
    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    try:
        reader = DirectoryLedgerReader(data_dir / "ledgers")
        return await known_ledgers(metadata, reader, await StoppedOwners(metadata).list_names())
    finally:
        await metadata.close()


def audit_ledgers(spark: SparkSession, data_dir: str | Path, *, partitions: int = 0) -> LedgerAudit:
    """Audit a stopped broker's data directory; ``partitions`` (default: Spark's parallelism) splits the
    storage listing."""
    data_dir = Path(data_dir)
    store_dir = str(data_dir / "ledgers")
    owners, referenced, pending = asyncio.run(_known(data_dir))
    ids = ledger_ids(Path(store_dir))
    slices = partitions or spark.sparkContext.defaultParallelism
    rows = spark.sparkContext.parallelize(ids, max(1, slices)).mapPartitions(
        lambda part: _sidecar_rows(store_dir, part)
    )
    storage = spark.createDataFrame(rows, STORAGE_SCHEMA)
    known = spark.createDataFrame([(i,) for i in sorted(referenced | pending)], "ledger_id long")
    orphans = storage.join(known, "ledger_id", "left_anti")
    listed = spark.createDataFrame(sorted((name, i) for i, name in owners.items()),
                                   "managed_ledger string, ledger_id long")
    dangling = listed.join(storage.select("ledger_id"), "ledger_id", "left_anti")
    return LedgerAudit(len(ids), len(referenced), len(pending), orphans, dangling)
