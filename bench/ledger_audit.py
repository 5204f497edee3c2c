"""PIP-186's ledger audit at scale: a stopped data directory with many ledgers (``--ledgers``, 100,000 by
default) over many topics, some of them orphans, audited by the one-process audit (read-only files) and by
the Spark job on ``local[*]``, in one run. Prints ledgers/s for each and checks both find the same orphans.

    .venv/bin/python bench/ledger_audit.py [--ledgers 100000] [--topics 1000] [--orphans 100] [--no-spark]

The directory is built directly (sidecar-only ledgers through the embedded store, records through the
metadata store): building it is not what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from magnetar.cli.admin.audit import audit_data_dir  # noqa: E402
from magnetar.ledger.api import LedgerSummary  # noqa: E402
from magnetar.ledger.formats import LedgerRecord, encode_ledger, ledger_key  # noqa: E402
from magnetar.metadata.sqlite import SqliteMetadataStore  # noqa: E402
from magnetar.storage.embedded import EmbeddedLedgerStore  # noqa: E402


async def build(data_dir: Path, ledgers: int, topics: int, orphans: int) -> set[int]:
    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    store = await EmbeddedLedgerStore.open(data_dir / "ledgers", journal_sync_data=False)
    per_topic = (ledgers - orphans) // topics
    orphan_ids: set[int] = set()
    try:
        for t in range(topics):
            name = f"bench/audit/persistent/topic-{t}"
            custom = {"application": "magnetar", "component": "managed-ledger", "pulsar/managed-ledger": name}
            summaries = []
            for _ in range(per_topic):
                info = await store.create_ledger(custom)
                summaries.append(LedgerSummary(info.ledger_id, 0, 0, 0))
            await metadata.put(ledger_key(name), encode_ledger(LedgerRecord(tuple(summaries), {})), -1)
        for _ in range(orphans):
            info = await store.create_ledger({"application": "magnetar", "component": "managed-ledger",
                                              "pulsar/managed-ledger": "bench/audit/persistent/topic-0"})
            orphan_ids.add(info.ledger_id)
    finally:
        await store.close()
        await metadata.close()
    return orphan_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--orphans", type=int, default=100)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        started = time.monotonic()
        orphans = asyncio.run(build(data_dir, args.ledgers, args.topics, args.orphans))
        print(f"built {args.ledgers} ledgers over {args.topics} topics in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        report = asyncio.run(audit_data_dir(data_dir, fix=False, parallelism=4))
        elapsed = time.monotonic() - started
        assert {o.ledger_id for o in report.orphans} == orphans
        results["one process"] = {"seconds": elapsed, "ledgers_per_s": report.storage_ledgers / elapsed}
        if not args.no_spark:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            from magnetar.spark.ledger_audit import audit_ledgers

            spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            try:
                started = time.monotonic()
                result = audit_ledgers(spark, data_dir)
                found = {r.ledger_id for r in result.orphans.collect()}
                elapsed = time.monotonic() - started
            finally:
                spark.stop()
            assert found == orphans
            results["spark local[*]"] = {"seconds": elapsed, "ledgers_per_s": result.storage_ledgers / elapsed}
    for name, r in results.items():
        print(f"{name:>15}: {args.ledgers} ledgers audited in {r['seconds']:.2f} s "
              f"({r['ledgers_per_s']:,.0f} ledgers/s), {args.orphans} orphans found")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
