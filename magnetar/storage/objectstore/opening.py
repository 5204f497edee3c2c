"""Opening the object ledger store on an S3 bucket from its configuration (what the composition root calls)."""

from __future__ import annotations

from magnetar.core.clock import Clock
from magnetar.storage.api import LedgerIdAllocator
from magnetar.storage.objectstore.s3 import S3ObjectClient, S3Settings
from magnetar.storage.objectstore.settings import LedgerStoreConfig
from magnetar.storage.objectstore.store import ObjectLedgerStore


async def open_s3_ledger_store(
    config: LedgerStoreConfig, *, clock: Clock, allocator: LedgerIdAllocator | None = None, probe: bool = True
) -> ObjectLedgerStore:
    """The store on ``config.url``'s bucket and prefix, after the conditional-write probe (ObjectStoreRefused
    names why a bucket is refused; StorageIOError when it cannot be reached). ``probe=False``: for readers
    that create nothing (an audit's tasks)."""
    if not config.url.shared:
        raise ValueError(f"not an object-store URL: {config.url}")
    client = S3ObjectClient(S3Settings(
        bucket=config.url.bucket, service_endpoint=config.service_endpoint, region=config.region,
        request_timeout_ms=config.request_timeout_ms,
    ))  # fmt: skip
    try:
        return await ObjectLedgerStore.open(client, prefix=config.url.prefix, settings=config.tuning(), clock=clock,
                                            allocator=allocator, probe=probe)
    except BaseException:
        await client.close()
        raise
