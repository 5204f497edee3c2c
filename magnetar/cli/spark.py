"""``magnetar spark ...``: Spark jobs run from the command line. One verb per job, each a (parser, runner)
pair in ``_VERBS``, so a new job adds one entry.

* ``export --service-url URL --topic T [--from earliest] [--to latest] --out PATH [--format parquet]
  [--master local[*]] [--mode errorifexists] [--min-partitions N]``: the topic range written by
  ``magnetar.spark.export_topic``.
* ``audit-ledgers --data-dir DIR [--partitions N] [--master local[*]] [--ledger-store-url s3://B/P
  --ledger-store-endpoint URL --ledger-store-region R]``: PIP-186's ledger audit of a stopped broker's data
  directory and, for ledgers in an object store, its bucket (``magnetar.spark.ledger_audit``); exit 1 when it
  finds orphans or dangling references.

PySpark is imported only when a job runs (``magnetar[spark]``). Exit codes: 0 done, 1 the job failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_spark_parser", "run_spark"]


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--service-url", default="pulsar://localhost:6650", help="broker (default pulsar://localhost:6650)")
    p.add_argument("--topic", required=True, help="topic to export (a partitioned topic: all its partitions)")
    p.add_argument("--from", dest="start", default="earliest",
                   help="earliest (default), JSON message ids per partition, epoch ms or ISO-8601 publish time")
    p.add_argument("--to", dest="end", default="latest",
                   help="latest (default), JSON message ids per partition, epoch ms or ISO-8601 publish time")
    p.add_argument("--out", required=True, help="output path (any path Spark writes: file, hdfs://, s3a://)")
    p.add_argument("--format", default="parquet", help="output format: parquet (default), or delta, orc, json...")
    p.add_argument("--mode", default="errorifexists", choices=["errorifexists", "overwrite", "append", "ignore"])
    p.add_argument("--min-partitions", type=int, default=None, help="split large partitions into more tasks")


def _export(args: argparse.Namespace, spark: Any) -> int:
    from magnetar.spark import export_topic

    rows = export_topic(spark, args.service_url, args.topic, args.out, start=args.start, end=args.end,
                        file_format=args.format, mode=args.mode, min_partitions=args.min_partitions)
    print(f"exported {args.topic} to {args.out} ({args.format}): {rows} rows")
    return 0


def _audit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", required=True, help="a STOPPED broker's data directory (the workers must see it)")
    p.add_argument("--partitions", type=int, default=0, help="tasks for the storage listing (default: parallelism)")
    p.add_argument("--ledger-store-url", default="embedded:", help="that broker's ledgerStoreUrl (s3://BUCKET[/PREFIX])")
    p.add_argument("--ledger-store-endpoint", default="", help="that broker's ledgerStoreServiceEndpoint")
    p.add_argument("--ledger-store-region", default="", help="that broker's ledgerStoreRegion")


def _audit(args: argparse.Namespace, spark: Any) -> int:
    import json

    from magnetar.spark.ledger_audit import audit_ledgers
    from magnetar.storage.objectstore.settings import LedgerStoreConfig, parse_ledger_store_url

    store = LedgerStoreConfig(url=parse_ledger_store_url(args.ledger_store_url),
                              service_endpoint=args.ledger_store_endpoint, region=args.ledger_store_region)
    result = audit_ledgers(spark, args.data_dir, partitions=args.partitions, ledger_store=store)
    orphans = [row.asDict() for row in result.orphans.collect()]
    dangling = [row.asDict() for row in result.dangling.collect()]
    print(json.dumps({"storageLedgers": result.storage_ledgers, "referencedLedgers": result.referenced_ledgers,
                      "pendingDeletions": result.pending_deletions, "orphans": orphans, "dangling": dangling},
                     indent=2))
    return 1 if orphans or dangling else 0


_VERBS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace, Any], int]]] = {
    "export": ("write a topic range to Parquet (or another format) as a Spark job", _export_args, _export),
    "audit-ledgers": ("find orphan ledgers and dangling references in a stopped data dir (PIP-186)",
                      _audit_args, _audit),
}


def add_spark_parser(verbs: Any) -> None:
    parser = verbs.add_parser("spark", help="Spark jobs: topic export, ledger audit")
    jobs = parser.add_subparsers(dest="spark_verb", required=True)
    for name, (help_text, add_args, _) in _VERBS.items():
        job = jobs.add_parser(name, help=help_text)
        job.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        add_args(job)


def run_spark(args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from magnetar.spark.options import OptionError

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need the interpreter that has magnetar
    ours = SparkSession.getActiveSession() is None  # stop only a session this command started
    spark = (SparkSession.builder.master(args.master).appName(f"magnetar spark {args.spark_verb}")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return _VERBS[args.spark_verb][2](args, spark)
    except OptionError as exc:
        print(f"magnetar spark {args.spark_verb}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"magnetar spark {args.spark_verb}: failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if ours:
            spark.stop()
