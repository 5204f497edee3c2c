"""The object-store port on a real S3-compatible bucket (AWS S3, MinIO, Ceph RGW, moto), via aiobotocore.

aiobotocore is botocore (request signing, the standard AWS credential chain: environment variables,
shared profile files, container and instance roles) on aiohttp, so the event loop never blocks on the
network. Credentials are never configured here: the chain finds them. botocore's own retries are off (one
attempt per call): the ledger store retries itself (``_requests``), because it must look at what a lost
answer left behind before it tries again. Payload checksums are the store's own (crc32c per record), so
botocore adds none beyond what an operation requires.

Every failure is translated here into the port's errors (``api.py``): 412 → ObjectExists; 404 →
ObjectMissing; 5xx, throttling, S3's 409 ConditionalRequestConflict (a concurrent conditional write: try
again), timeouts and connection errors → ObjectUnavailable; a missing bucket, refused credentials →
ObjectStoreRefused. Knows nothing of ledgers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from magnetar.storage.objectstore.api import (
    LIST_KEYS_MAX,
    ListedObject,
    ObjectClient,
    ObjectExists,
    ObjectMissing,
    ObjectStoreError,
    ObjectStoreRefused,
    ObjectUnavailable,
)

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

_EXISTS = {"PreconditionFailed", "412"}
_MISSING = {"NoSuchKey", "404", "NotFound"}
_REFUSED = {"NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "ExpiredToken",
            "InvalidToken", "Forbidden", "AllAccessDisabled", "InvalidBucketName"}
_RETRY = {"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "ConditionalRequestConflict",
          "RequestTimeTooSkewed", "OperationAborted", "Throttling", "ThrottlingException", "409"}
_TRANSPORT = (BotoCoreError, OSError, asyncio.TimeoutError)


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Settings:
    bucket: str
    service_endpoint: str = ""  # empty: AWS's endpoint for the region
    region: str = ""  # empty: the credential chain's (AWS_REGION, the profile)
    request_timeout_ms: int = 10_000  # connect and read timeouts of one request
    connections_max: int = 64


def translate(exc: BaseException, what: str, bucket: str) -> ObjectStoreError:
    """One botocore/aiohttp failure as the port's error, with a message an operator can act on."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = f"s3://{bucket}: {what}: {code} {error.get('Message', '')}".rstrip()
        if code in _EXISTS or status == 412:
            return ObjectExists(message)
        if code in _MISSING:
            return ObjectMissing(message)
        if code in _REFUSED:
            return ObjectStoreRefused(f"{message} (check the bucket and the AWS credential chain)")
        if code in _RETRY or status >= 500 or code.startswith("5"):
            return ObjectUnavailable(message)
        return ObjectStoreError(message)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ObjectStoreRefused(f"s3://{bucket}: {what}: no AWS credentials found (environment, profile, role)")
    return ObjectUnavailable(f"s3://{bucket}: {what}: {type(exc).__name__}: {exc}")


class S3ObjectClient:
    """Implements :class:`~magnetar.storage.objectstore.api.ObjectClient` on one bucket."""

    def __init__(self, settings: S3Settings) -> None:
        self._settings = settings
        self._lock = asyncio.Lock()
        self._exit = contextlib.AsyncExitStack()
        self._s3: S3Client | None = None
        self.requests = 0

    @property
    def bucket(self) -> str:
        return self._settings.bucket

    async def _client(self) -> S3Client:
        if self._s3 is not None:
            return self._s3
        async with self._lock:
            client = self._s3
            if client is None:
                s = self._settings
                timeout_s = s.request_timeout_ms / 1000
                config = AioConfig(
                    connect_timeout=timeout_s, read_timeout=timeout_s, max_pool_connections=s.connections_max,
                    retries={"total_max_attempts": 1, "mode": "standard"},
                    s3={"addressing_style": "path"} if s.service_endpoint else None,
                    request_checksum_calculation="when_required", response_checksum_validation="when_required",
                )  # fmt: skip
                creator = get_session().create_client(
                    "s3", region_name=s.region or None, endpoint_url=s.service_endpoint or None, config=config
                )
                created: S3Client = await self._exit.enter_async_context(creator)
                self._s3 = client = created
            return client

    async def put_if_absent(self, key: str, body: bytes) -> None:
        client = await self._client()
        self.requests += 1
        try:
            await client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
        except (ClientError, *_TRANSPORT) as exc:
            raise translate(exc, f"creating {key}", self.bucket) from exc

    async def get(self, key: str, first_byte: int = 0, last_byte: int | None = None) -> bytes:
        client = await self._client()
        self.requests += 1
        try:
            if first_byte == 0 and last_byte is None:
                response = await client.get_object(Bucket=self.bucket, Key=key)
            else:
                end = "" if last_byte is None else str(last_byte)
                response = await client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={first_byte}-{end}")
            async with response["Body"] as body:
                data: bytes = await body.read()
                return data
        except (ClientError, *_TRANSPORT) as exc:
            raise translate(exc, f"reading {key}", self.bucket) from exc

    async def list(self, prefix: str, *, keys_max: int = LIST_KEYS_MAX) -> list[ListedObject]:
        client = await self._client()
        found: list[ListedObject] = []
        try:
            paginator = client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                self.requests += 1
                found.extend(ListedObject(str(o["Key"]), int(o["Size"])) for o in page.get("Contents", []))
                if len(found) >= keys_max:
                    break
        except (ClientError, *_TRANSPORT) as exc:
            raise translate(exc, f"listing {prefix!r}", self.bucket) from exc
        return found[:keys_max]

    async def delete(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        client = await self._client()
        self.requests += 1
        try:
            result = await client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
            )
        except (ClientError, *_TRANSPORT) as exc:
            raise translate(exc, f"deleting {len(keys)} objects", self.bucket) from exc
        errors = [e for e in result.get("Errors", []) if e.get("Code") not in _MISSING]
        if errors:
            first = errors[0]
            code = str(first.get("Code", ""))
            kind = ObjectUnavailable if code in _RETRY or code.startswith("5") or code == "InternalError" \
                else ObjectStoreError
            raise kind(f"s3://{self.bucket}: deleting {first.get('Key')}: {code} {first.get('Message', '')}")

    async def close(self) -> None:
        self._s3 = None
        await self._exit.aclose()


if TYPE_CHECKING:
    _conforms: ObjectClient = S3ObjectClient(S3Settings(bucket="b"))
