"""The object ledger store against a real S3 API: ``moto[server]`` as a separate process on a loopback port."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from magnetar.storage.objectstore.s3 import S3ObjectClient, S3Settings
from tests import s3_server
from tests.s3_server import CREDENTIALS, MotoServer

moto = s3_server.moto  # the module-scoped S3 server fixture
BUCKET = "ledgers"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard AWS credential chain's environment variables (moto accepts any credentials)."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def bucket(moto: MotoServer) -> Iterator[str]:
    moto.create_bucket(BUCKET)
    yield BUCKET


def s3_client(endpoint: str, bucket: str = BUCKET, request_timeout_ms: int = 2000) -> S3ObjectClient:
    return S3ObjectClient(S3Settings(bucket=bucket, service_endpoint=endpoint, region="us-east-1",
                                     request_timeout_ms=request_timeout_ms))


def fresh_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}/"
