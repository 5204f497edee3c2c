"""Offload stores for the tests: the filesystem driver in a temporary directory, and the S3 driver against a
real S3 API (``moto[server]`` as a separate process on a loopback port, shared by the module)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar.storage.offload import BlockOffloadStore, OffloadSettings, open_offload_store
from tests import s3_server
from tests.s3_server import CREDENTIALS, MotoServer

moto = s3_server.moto  # the module-scoped S3 server fixture


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard AWS credential chain's environment variables (moto accepts any credentials)."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)


def s3_settings(moto: MotoServer, bucket: str, **kw: object) -> OffloadSettings:
    values: dict[str, object] = {"driver": "aws-s3", "bucket": bucket, "region": "us-east-1",
                                 "service_endpoint": moto.endpoint, "max_block_size_bytes": 4096,
                                 "read_buffer_size_bytes": 1500, "read_cache_size_bytes": 64 * 1024,
                                 "request_timeout_s": 2.0}
    values.update(kw)
    return OffloadSettings(**values)  # type: ignore[arg-type]


def fs_settings(directory: Path, **kw: object) -> OffloadSettings:
    values: dict[str, object] = {"driver": "filesystem", "filesystem_uri": str(directory),
                                 "max_block_size_bytes": 4096, "read_buffer_size_bytes": 1500,
                                 "read_cache_size_bytes": 64 * 1024}
    values.update(kw)
    return OffloadSettings(**values)  # type: ignore[arg-type]


@pytest.fixture(params=["filesystem", "aws-s3"])
async def offload_store(
    request: pytest.FixtureRequest, tmp_path: Path, aws_env: None
) -> AsyncIterator[BlockOffloadStore]:
    """One store per driver, each on an empty bucket or directory."""
    if request.param == "filesystem":
        directory = tmp_path / "offload"
        directory.mkdir()
        settings = fs_settings(directory)
    else:
        moto: MotoServer = request.getfixturevalue("moto")
        bucket = f"b-{uuid.uuid4().hex[:12]}"
        moto.create_bucket(bucket)
        settings = s3_settings(moto, bucket)
    store = open_offload_store(settings)
    assert store is not None
    try:
        yield store
    finally:
        await store.close()
