"""``magnetar admin audit-ledgers``: PIP-186's ledger audit, on a live broker (over the admin API) or on a
stopped broker's data directory (``--data-dir``, opening its stores directly; a broker whose ledgers live in
an object store also needs ``--ledger-store-url`` and, off AWS, ``--ledger-store-endpoint``). ``--fix`` queues
every orphan for deletion through the two-phase path (offline: a deletion service runs until the queue drains)
and removes object orphans.
Exit codes: 0 no orphan and no dangling reference (or all orphans fixed), 1 found some, 2 bad usage."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when the verb runs: ``magnetar admin`` starts fast for every other verb
    from magnetar.broker.deletion.audit import AuditReport
    from magnetar.storage.objectstore.settings import LedgerStoreConfig

DRAIN_TIMEOUT_S = 120.0
PARALLELISM_DEFAULT = 4  # twoPhaseDeletionLedgerDeletionParallelism


def add_audit_parser(groups: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = groups.add_parser("audit-ledgers", help="find orphan ledgers and dangling references (PIP-186)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="audit a STOPPED broker's data directory instead of the live broker at --admin-url")
    p.add_argument("--ledger-store-url", default="embedded:",
                   help="that broker's ledgerStoreUrl (s3://BUCKET[/PREFIX]; credentials: the AWS chain)")
    p.add_argument("--ledger-store-endpoint", default="", help="that broker's ledgerStoreServiceEndpoint")
    p.add_argument("--ledger-store-region", default="", help="that broker's ledgerStoreRegion")
    p.add_argument("--fix", action="store_true", help="queue every orphan for two-phase deletion")
    p.add_argument("--parallelism", type=int, default=PARALLELISM_DEFAULT,
                   help="twoPhaseDeletionLedgerDeletionParallelism of that broker (offline --fix)")
    p.set_defaults(audit_run=run_audit)


async def audit_data_dir(data_dir: Path, *, fix: bool, parallelism: int,
                         ledger_store: LedgerStoreConfig | None = None) -> AuditReport:
    from magnetar.broker.compaction.state import referenced_ledgers
    from magnetar.broker.deletion.audit import StoppedOwners, audit
    from magnetar.broker.deletion.config import DeletionConfig
    from magnetar.broker.deletion.service import LedgerDeletionService
    from magnetar.core.clock import SystemClock
    from magnetar.ledger.factory import LedgerFactory
    from magnetar.metadata.sqlite import SqliteMetadataStore
    from magnetar.storage.api import LedgerStore
    from magnetar.storage.embedded import EmbeddedLedgerStore
    from magnetar.storage.inspect import DirectoryLedgerReader
    from magnetar.storage.objectstore.opening import open_s3_ledger_store

    metadata = SqliteMetadataStore(data_dir / "metadata.db")
    shared = ledger_store is not None and ledger_store.url.shared
    if not fix and not shared:  # read-only: the directory's files as they are, no lock, no recovery
        try:
            return await audit(metadata, DirectoryLedgerReader(data_dir / "ledgers"), StoppedOwners(metadata),
                               live=False, references=(referenced_ledgers,))
        finally:
            await metadata.close()
    store: LedgerStore
    if ledger_store is not None and shared:
        store = await open_s3_ledger_store(ledger_store, clock=SystemClock())
        if not fix:  # reads only (listings, metadata, entries of the deletion topics)
            try:
                return await audit(metadata, store, StoppedOwners(metadata), live=False,
                                   references=(referenced_ledgers,))
            finally:
                await store.close()
                await metadata.close()
    else:
        store = await EmbeddedLedgerStore.open(data_dir / "ledgers", journal_sync_data=True)
    factory = LedgerFactory(store, metadata, clock=SystemClock())
    try:
        service = LedgerDeletionService(factory, store, SystemClock(), DeletionConfig(parallelism=parallelism),
                                        references=(referenced_ledgers,))
        await service.start()
        try:
            report = await service.audit(metadata, fix=True)
            await asyncio.wait_for(service.drained(include_retry=False), DRAIN_TIMEOUT_S)
            return report
        finally:
            await service.close()
    finally:
        await factory.close()
        await store.close()
        await metadata.close()


def run_audit(args: argparse.Namespace) -> int:
    if args.data_dir is None:
        return -1  # the live form is an ordinary admin call: the caller runs it
    if not (args.data_dir / "metadata.db").exists():
        print(f"magnetar admin audit-ledgers: no broker data in {args.data_dir}", file=sys.stderr)
        return 2
    from magnetar.storage.objectstore.settings import LedgerStoreConfig, parse_ledger_store_url

    try:
        ledger_store = LedgerStoreConfig(url=parse_ledger_store_url(args.ledger_store_url),
                                         service_endpoint=args.ledger_store_endpoint, region=args.ledger_store_region)
    except ValueError as exc:
        print(f"magnetar admin audit-ledgers: {exc}", file=sys.stderr)
        return 2
    report = asyncio.run(audit_data_dir(args.data_dir, fix=args.fix, parallelism=args.parallelism,
                                        ledger_store=ledger_store))
    print(json.dumps(report.to_json(), indent=2))
    orphans = len(report.orphans) + len(report.object_orphans)
    found = orphans > 0 and report.fixed < orphans
    return 1 if found or report.dangling else 0
