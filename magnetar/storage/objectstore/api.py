"""The object-store port: the few S3 calls the ledger store makes, and how they fail.

An :class:`ObjectClient` creates objects only if absent (S3's ``If-None-Match: *``: the one primitive the
ledger fence needs), reads whole objects or byte ranges, lists keys under a prefix and deletes keys. The S3
implementation (``s3.py``, aiobotocore) and the in-memory one (``memory.py``, for unit tests and the seeded
simulator) both translate their failures into the errors below, so the ledger store decides on kinds, never
on HTTP codes. This module knows nothing of ledgers, topics or the broker.

Errors::

    StorageError (magnetar.storage.api)
    └── ObjectStoreError        root of this port
        ├── ObjectExists        a create-if-absent found the key taken (HTTP 412): someone else's, or an
        │                       earlier attempt of ours whose answer was lost
        ├── ObjectMissing       no such key (404)
        ├── ObjectUnavailable   5xx, throttling, a timeout, a refused connection: retry later; for a write
        │                       the outcome is unknown (the object may or may not exist)
        └── ObjectStoreRefused  permanent: no such bucket, access denied, conditional writes not honoured
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from magnetar.storage.api import StorageError

#: Keys one ``list`` returns at most (a listing past it is cut and the caller told so by its length).
LIST_KEYS_MAX = 1_000_000


class ObjectStoreError(StorageError):
    """Root of the object-store port's errors."""


class ObjectExists(ObjectStoreError):
    pass


class ObjectMissing(ObjectStoreError):
    pass


class ObjectUnavailable(ObjectStoreError):
    pass


class ObjectStoreRefused(ObjectStoreError):
    pass


@dataclass(frozen=True, slots=True)
class ListedObject:
    key: str
    size_bytes: int


class ObjectClient(Protocol):
    """One bucket of an S3-compatible service (or a stand-in), as the ledger store uses it."""

    async def put_if_absent(self, key: str, body: bytes) -> None:
        """Create ``key`` holding ``body`` unless it exists (ObjectExists then). Returns once stored."""
        ...

    async def get(self, key: str, first_byte: int = 0, last_byte: int | None = None) -> bytes:
        """The object's bytes ``first_byte..last_byte`` inclusive (to the end if None); ObjectMissing."""
        ...

    async def list(self, prefix: str, *, keys_max: int = LIST_KEYS_MAX) -> list[ListedObject]:
        """Every key under ``prefix`` in ascending order, at most ``keys_max`` of them."""
        ...

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the keys; absent ones are not an error."""
        ...

    async def close(self) -> None:
        ...
