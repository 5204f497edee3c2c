"""The object ledger store's settings, and ``ledgerStoreUrl`` parsing.

``ledgerStoreUrl`` says where ledgers live: ``embedded:`` (the default: segment files under the data
directory) or ``s3://BUCKET[/PREFIX]`` (an S3-compatible bucket; the endpoint, region and credentials
come from ``ledgerStoreServiceEndpoint``, ``ledgerStoreRegion`` and the standard AWS credential chain).
The flush window (``ledgerStoreFlushMaxDelayMillis``) and size (``ledgerStoreFlushMaxBytes``) trade
latency against PUTs: see docs/object-store.md. Plain values, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIB = 1024 * 1024
#: How long the oldest pending append of a ledger waits for others before its chunk is PUT.
FLUSH_MAX_DELAY_MS_DEFAULT = 5
#: A chunk holds at most this many payload bytes (one entry larger than it gets a chunk of its own).
FLUSH_MAX_BYTES_DEFAULT = 1 * MIB
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectLedgerSettings:
    flush_max_delay_ms: int = FLUSH_MAX_DELAY_MS_DEFAULT
    flush_max_bytes: int = FLUSH_MAX_BYTES_DEFAULT
    #: Appends accepted but not yet stored, across ledgers; more wait for room (back-pressure).
    pending_bytes_max: int = 64 * MIB
    #: Recent entries kept in memory for readers (tail reads of live topics are served from here).
    read_cache_bytes: int = 64 * MIB
    #: A chunk up to this size is read with one GET (and cached whole); a larger one by byte ranges.
    whole_chunk_bytes_max: int = 4 * MIB
    #: Tries per request before it fails (5xx, timeouts, refused connections are retried).
    attempts_max: int = 5
    backoff_ms: int = 50
    backoff_ms_max: int = 2000

    def __post_init__(self) -> None:
        if self.flush_max_delay_ms < 0:
            raise ValueError("flush_max_delay_ms must not be negative")
        for name in ("flush_max_bytes", "pending_bytes_max", "attempts_max"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("read_cache_bytes", "whole_chunk_bytes_max", "backoff_ms", "backoff_ms_max"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


@dataclass(frozen=True, slots=True)
class LedgerStoreUrl:
    """Where ledgers live: ``scheme`` is ``embedded`` or ``s3``; ``prefix`` is empty or ends with ``/``."""

    scheme: str
    bucket: str = ""
    prefix: str = ""

    @property
    def shared(self) -> bool:
        return self.scheme == "s3"


def parse_ledger_store_url(url: str) -> LedgerStoreUrl:
    """``embedded:`` or ``s3://BUCKET[/PREFIX]``; ValueError naming what is wrong otherwise."""
    text = url.strip()
    if text in ("embedded", "embedded:"):
        return LedgerStoreUrl("embedded")
    if not text.startswith("s3://"):
        raise ValueError(f"ledgerStoreUrl {url!r}: expected 'embedded:' or 's3://BUCKET[/PREFIX]'")
    bucket, _, prefix = text[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket):
        raise ValueError(f"ledgerStoreUrl {url!r}: {bucket!r} is not a valid S3 bucket name")
    prefix = prefix.strip("/")
    return LedgerStoreUrl("s3", bucket, f"{prefix}/" if prefix else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerStoreConfig:
    """Where ledgers live and how the object store is reached (the ``ledgerStore*`` keys)."""

    url: LedgerStoreUrl = LedgerStoreUrl("embedded")
    service_endpoint: str = ""  # ledgerStoreServiceEndpoint; empty: AWS's endpoint for the region
    region: str = ""  # ledgerStoreRegion; empty: the AWS credential chain's
    request_timeout_ms: int = 10_000  # ledgerStoreRequestTimeoutMillis: connect and read timeout per request
    flush_max_delay_ms: int = FLUSH_MAX_DELAY_MS_DEFAULT  # ledgerStoreFlushMaxDelayMillis
    flush_max_bytes: int = FLUSH_MAX_BYTES_DEFAULT  # ledgerStoreFlushMaxBytes
    read_cache_bytes: int = 64 * MIB  # ledgerStoreReadCacheSizeBytes

    def tuning(self) -> ObjectLedgerSettings:
        return ObjectLedgerSettings(flush_max_delay_ms=self.flush_max_delay_ms, flush_max_bytes=self.flush_max_bytes,
                                    read_cache_bytes=self.read_cache_bytes)
