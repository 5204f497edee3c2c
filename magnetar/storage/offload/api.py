"""The offload store interface: sealed ledgers copied to a directory or an S3-compatible object store.

Two levels, each a ``typing.Protocol``:

* :class:`BlobStore` is the raw object service (put by streaming writer, ranged get, size, delete, list).
  Implementations: a local directory (``filesystem`` driver) and any S3-compatible service (``aws-s3``,
  ``s3``). A blob becomes visible under its key only when its writer commits, never half-written.
* :class:`OffloadStore` stores whole ledgers on a blob store as checksummed blocks plus an index (entry id
  to block offset), reads entries back through a bounded cache, verifies a copy and deletes it by context.

An offloaded copy is named by its :class:`OffloadContext` (driver, bucket, key prefix, a fresh uuid per
attempt, ledger id): a retried offload never writes over an earlier attempt's objects.

This layer knows nothing of managed ledgers, topics or the broker.

Errors (all :class:`~magnetar.storage.api.StorageError`)::

    OffloadError                root: the object store failed; ``retryable`` says whether trying again may help
    ├── OffloadUnavailable      endpoint down, timeout, throttling (retryable)
    ├── OffloadAccessDenied     wrong or missing credentials, no permission (not retryable until fixed)
    ├── OffloadBucketMissing    the bucket or directory does not exist
    └── OffloadNotFound         an object of an offloaded ledger is gone (deleted behind the broker's back)
    OffloadCorrupted            a block or the index failed its checksum (an EntryCorrupted: never served)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.storage.api import EntryCorrupted, StorageError

MIB = 1024 * 1024


class OffloadError(StorageError):
    """Root of the object-store failures."""

    retryable = True


class OffloadUnavailable(OffloadError):
    pass


class OffloadAccessDenied(OffloadError):
    retryable = False


class OffloadBucketMissing(OffloadError):
    retryable = False


class OffloadNotFound(OffloadError):
    retryable = False


class OffloadCorrupted(EntryCorrupted):
    """A block or an index of an offloaded ledger failed its checksum."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadSettings:
    """Pulsar's offload keys (``managedLedgerOffload*``, ``s3ManagedLedgerOffload*``, ``fileSystemURI``)."""

    driver: str = ""  # managedLedgerOffloadDriver: "" (off), "filesystem", "aws-s3" or "s3"
    bucket: str = ""  # managedLedgerOffloadBucket / s3ManagedLedgerOffloadBucket
    region: str = ""  # managedLedgerOffloadRegion / s3ManagedLedgerOffloadRegion
    service_endpoint: str = ""  # managedLedgerOffloadServiceEndpoint / s3ManagedLedgerOffloadServiceEndpoint
    key_prefix: str = ""  # magnetar: prefix of every object key (e.g. "cluster-a/")
    filesystem_uri: str = ""  # fileSystemURI: the directory of the filesystem driver (path or file:// URI)
    filesystem_profile_path: str = ""  # fileSystemProfilePath: Hadoop XML profile(s), see profile.py
    max_block_size_bytes: int = 64 * MIB  # managedLedgerOffloadMaxBlockSizeInBytes
    read_buffer_size_bytes: int = 1 * MIB  # managedLedgerOffloadReadBufferSizeInBytes: bytes per ranged GET
    read_cache_size_bytes: int = 64 * MIB  # managedLedgerOffloadReadCacheSizeInBytes (magnetar): block cache
    request_timeout_s: float = 10.0  # per object-store request

    @property
    def enabled(self) -> bool:
        return bool(self.driver)


@dataclass(frozen=True, slots=True)
class OffloadContext:
    """Where one offload attempt of one ledger lives. A fresh ``uuid`` per attempt."""

    driver: str
    bucket: str
    prefix: str
    uuid: str
    ledger_id: int

    @property
    def data_key(self) -> str:
        return f"{self.prefix}{self.uuid}-ledger-{self.ledger_id}"

    @property
    def index_key(self) -> str:
        return f"{self.data_key}-index"


@dataclass(frozen=True, slots=True)
class OffloadedLedger:
    """What an index says of an offloaded ledger."""

    ledger_id: int
    entries: int
    size_bytes: int  # sum of entry payloads
    data_bytes: int  # size of the data object
    blocks: int
    custom_metadata: Mapping[str, str] = field(default_factory=dict)


class BlobWriter(Protocol):
    async def write(self, data: bytes) -> None: ...

    async def commit(self) -> None:
        """Make the blob visible under its key (all or nothing)."""
        ...

    async def abort(self) -> None:
        """Drop what was written; the key stays absent (idempotent)."""
        ...


class BlobStore(Protocol):
    """A raw object service: a directory or an S3 bucket."""

    @property
    def driver(self) -> str: ...

    @property
    def bucket(self) -> str:
        """The bucket, or the directory of the filesystem driver."""
        ...

    async def check(self) -> None:
        """Raise the matching OffloadError when the bucket is missing, access is denied or it is down."""
        ...

    async def writer(self, key: str) -> BlobWriter: ...

    async def read(self, key: str, offset: int, length: int) -> bytes:
        """Bytes ``offset..offset+length`` (fewer only at the end). OffloadNotFound if absent."""
        ...

    async def size(self, key: str) -> int: ...

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the keys; absent ones are not an error."""
        ...

    async def list(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix`` (bounded by the implementation)."""
        ...

    async def close(self) -> None: ...


#: Reads entries ``first..last`` of the ledger being offloaded (the local copy).
ReadEntries = Callable[[int, int], Awaitable[list[bytes]]]


class OffloadStore(Protocol):
    """Whole ledgers on a blob store: written, verified, read, deleted by context."""

    @property
    def driver(self) -> str: ...

    def new_context(self, ledger_id: int) -> OffloadContext:
        """A context with a fresh uuid, for one offload attempt."""
        ...

    async def write_ledger(
        self, context: OffloadContext, entries: int, read: ReadEntries, custom_metadata: Mapping[str, str]
    ) -> OffloadedLedger:
        """Copy entries ``0..entries-1`` as blocks, then the index. Nothing is visible before the index."""
        ...

    async def verify(self, context: OffloadContext, entries: int) -> OffloadedLedger:
        """Read the index and every block back and check their checksums and the entry count."""
        ...

    async def read(self, context: OffloadContext, first_entry: int, last_entry: int) -> list[bytes]:
        """Entries ``first..last`` through the block cache; OffloadCorrupted on a bad checksum."""
        ...

    async def delete(self, context: OffloadContext) -> None:
        """Delete the copy (data and index) named by ``context``; absent objects are not an error."""
        ...

    async def list_copies(self) -> list[OffloadContext]:
        """Every copy under this store's key prefix (the ledger audit)."""
        ...

    async def copy_owner(self, context: OffloadContext) -> str | None:
        """The managed ledger a copy's index names; None without a readable index."""
        ...

    async def close(self) -> None: ...
