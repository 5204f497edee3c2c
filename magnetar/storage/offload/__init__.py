"""Tiered storage: sealed ledgers offloaded to a directory or an S3-compatible store (see ``api.py``)."""

from magnetar.storage.offload.api import (
    BlobStore,
    OffloadAccessDenied,
    OffloadBucketMissing,
    OffloadContext,
    OffloadCorrupted,
    OffloadedLedger,
    OffloadError,
    OffloadNotFound,
    OffloadSettings,
    OffloadStore,
    OffloadUnavailable,
)
from magnetar.storage.offload.store import BlockOffloadStore, open_offload_store

__all__ = [
    "BlobStore",
    "BlockOffloadStore",
    "OffloadAccessDenied",
    "OffloadBucketMissing",
    "OffloadContext",
    "OffloadCorrupted",
    "OffloadError",
    "OffloadNotFound",
    "OffloadSettings",
    "OffloadStore",
    "OffloadUnavailable",
    "OffloadedLedger",
    "open_offload_store",
]
