"""Ledgers in an S3-compatible object store, fenced in the store itself (see ``store.py``).

``api`` is the port to the service (an S3 bucket via aiobotocore in ``s3``, or ``memory`` for tests and
the simulator); ``store.ObjectLedgerStore`` is the :class:`~magnetar.storage.api.LedgerStore` on it.
"""

from magnetar.storage.objectstore.api import (
    ListedObject,
    ObjectClient,
    ObjectExists,
    ObjectMissing,
    ObjectStoreError,
    ObjectStoreRefused,
    ObjectUnavailable,
)
from magnetar.storage.objectstore.settings import (
    LedgerStoreUrl,
    ObjectLedgerSettings,
    parse_ledger_store_url,
)
from magnetar.storage.objectstore.store import ObjectLedgerStore

__all__ = [
    "LedgerStoreUrl",
    "ListedObject",
    "ObjectClient",
    "ObjectExists",
    "ObjectLedgerSettings",
    "ObjectLedgerStore",
    "ObjectMissing",
    "ObjectStoreError",
    "ObjectStoreRefused",
    "ObjectUnavailable",
    "parse_ledger_store_url",
]
