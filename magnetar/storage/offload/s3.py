"""The ``aws-s3`` / ``s3`` offload driver: blobs in a bucket of any S3-compatible service, via aiobotocore.

aiobotocore is botocore (the AWS SDK's core: request signing, the standard credential chain of environment
variables, shared profile files, container and instance roles, retries with back-off) on aiohttp, so the
event loop never blocks on the network. Credentials are never configured here: the chain finds them.

A writer buffers up to one part (at least S3's 5 MiB minimum) and uploads a multipart upload part by part;
a blob smaller than one part is one PUT. Either way the key appears only on commit, whole. ``abort`` aborts
the multipart upload so no parts linger. Every botocore error is translated into the layer's errors here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from magnetar.storage.offload.api import (
    MIB,
    OffloadAccessDenied,
    OffloadBucketMissing,
    OffloadError,
    OffloadNotFound,
    OffloadSettings,
    OffloadUnavailable,
)

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

log = logging.getLogger("magnetar.storage.offload")

PART_BYTES_MIN = 5 * MIB  # S3's smallest multipart part (all but the last)
#: Keys returned by one list call, at most.
LIST_KEYS_MAX = 100_000
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_NO_BUCKET = {"NoSuchBucket"}
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "ExpiredToken",
           "InvalidToken", "Forbidden"}


def translate(exc: BaseException, what: str, *, bucket: str) -> OffloadError:
    """One botocore/aiohttp failure as the layer's error, with a message an operator can act on."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = f"s3 offload: {what}: {code} {error.get('Message', '')}".rstrip()
        if code in _NO_BUCKET:
            return OffloadBucketMissing(f"s3 offload: bucket {bucket!r} does not exist ({what})")
        if code in _NOT_FOUND:
            return OffloadNotFound(f"s3 offload: {what}: object not found in bucket {bucket!r} ({code})")
        if code in _DENIED:
            return OffloadAccessDenied(f"{message} (check the credentials of the AWS credential chain)")
        return OffloadUnavailable(message) if code.startswith("5") or code in ("SlowDown", "RequestTimeout") \
            else OffloadError(message)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return OffloadAccessDenied(f"s3 offload: {what}: no AWS credentials found (environment, profile, role)")
    return OffloadUnavailable(f"s3 offload: {what}: {type(exc).__name__}: {exc}")


_FAILURES = (ClientError, BotoCoreError, OSError, asyncio.TimeoutError)


class S3Writer:
    def __init__(self, store: S3BlobStore, client: S3Client, key: str, part_bytes: int) -> None:
        self._store = store
        self._client = client
        self._key = key
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    async def write(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= self._part_bytes:
            await self._flush_part()

    async def _flush_part(self) -> None:
        bucket, key = self._store.bucket, self._key
        try:
            if self._upload_id is None:
                created = await self._client.create_multipart_upload(Bucket=bucket, Key=key)
                self._upload_id = created["UploadId"]
            number = len(self._parts) + 1
            body, self._buffer = bytes(self._buffer), bytearray()
            done = await self._client.upload_part(
                Bucket=bucket, Key=key, UploadId=self._upload_id, PartNumber=number, Body=body
            )
        except _FAILURES as exc:
            raise translate(exc, f"uploading part of {key}", bucket=bucket) from exc
        self._parts.append({"ETag": done["ETag"], "PartNumber": number})

    async def commit(self) -> None:
        bucket, key = self._store.bucket, self._key
        try:
            if self._upload_id is None:
                await self._client.put_object(Bucket=bucket, Key=key, Body=bytes(self._buffer))
                self._buffer = bytearray()
                return
            if self._buffer:
                await self._flush_part()
            await self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}  # type: ignore[typeddict-item]
            )
        except _FAILURES as exc:
            raise translate(exc, f"writing {key}", bucket=bucket) from exc

    async def abort(self) -> None:
        upload_id, self._upload_id = self._upload_id, None
        self._buffer = bytearray()
        if upload_id is None:
            return
        try:
            await self._client.abort_multipart_upload(Bucket=self._store.bucket, Key=self._key, UploadId=upload_id)
        except _FAILURES as exc:  # the bucket's lifecycle rules reap what is left; say so once
            log.warning("s3 offload: aborting the upload of %s failed: %s", self._key, exc)


class S3BlobStore:
    """Implements :class:`magnetar.storage.offload.api.BlobStore` over one bucket."""

    def __init__(self, settings: OffloadSettings) -> None:
        if not settings.bucket:
            raise OffloadBucketMissing("s3 offload: no bucket configured (managedLedgerOffloadBucket)")
        self._settings = settings
        self._client_lock = asyncio.Lock()
        self._exit = contextlib.AsyncExitStack()
        self._client_obj: S3Client | None = None
        self._part_bytes = max(PART_BYTES_MIN, settings.max_block_size_bytes)

    @property
    def driver(self) -> str:
        return self._settings.driver

    @property
    def bucket(self) -> str:
        return self._settings.bucket

    async def _client(self) -> S3Client:
        async with self._client_lock:
            client = self._client_obj
            if client is None:
                s = self._settings
                config = AioConfig(
                    connect_timeout=s.request_timeout_s, read_timeout=s.request_timeout_s,
                    retries={"max_attempts": 2, "mode": "standard"},
                    s3={"addressing_style": "path"} if s.service_endpoint else None,
                )
                creator = get_session().create_client(
                    "s3", region_name=s.region or None, endpoint_url=s.service_endpoint or None, config=config
                )
                created: S3Client = await self._exit.enter_async_context(creator)
                self._client_obj = created
                return created
            return client

    async def check(self) -> None:
        client = await self._client()
        try:
            await client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise OffloadBucketMissing(f"s3 offload: bucket {self.bucket!r} does not exist") from exc
            raise translate(exc, f"checking bucket {self.bucket}", bucket=self.bucket) from exc
        except _FAILURES as exc:
            raise translate(exc, f"checking bucket {self.bucket}", bucket=self.bucket) from exc

    async def writer(self, key: str) -> S3Writer:
        return S3Writer(self, await self._client(), key, self._part_bytes)

    async def read(self, key: str, offset: int, length: int) -> bytes:
        client = await self._client()
        try:
            byte_range = f"bytes={offset}-{offset + length - 1}"
            response = await client.get_object(Bucket=self.bucket, Key=key, Range=byte_range)
            async with response["Body"] as body:
                data: bytes = await body.read()
                return data
        except _FAILURES as exc:
            raise translate(exc, f"reading {key}", bucket=self.bucket) from exc

    async def size(self, key: str) -> int:
        client = await self._client()
        try:
            return int((await client.head_object(Bucket=self.bucket, Key=key))["ContentLength"])
        except _FAILURES as exc:
            raise translate(exc, f"looking up {key}", bucket=self.bucket) from exc

    async def delete(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        client = await self._client()
        try:
            result = await client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
            )
        except _FAILURES as exc:
            raise translate(exc, f"deleting {len(keys)} objects", bucket=self.bucket) from exc
        errors = [e for e in result.get("Errors", []) if e.get("Code") not in _NOT_FOUND]
        if errors:
            raise OffloadError(f"s3 offload: deleting {errors[0].get('Key')}: {errors[0].get('Code')}")

    async def list(self, prefix: str) -> list[str]:
        client = await self._client()
        keys: list[str] = []
        try:
            paginator = client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                keys.extend(str(obj["Key"]) for obj in page.get("Contents", []))
                if len(keys) >= LIST_KEYS_MAX:
                    break
        except _FAILURES as exc:
            raise translate(exc, f"listing {prefix!r}", bucket=self.bucket) from exc
        return keys[:LIST_KEYS_MAX]

    async def close(self) -> None:
        self._client_obj = None
        await self._exit.aclose()
