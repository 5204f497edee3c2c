"""A broker whose ledgers live in an S3 bucket: ``moto[server]`` on loopback (one per module), reached directly
or through the fault-injecting HTTP proxy (``tests/s3_proxy.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import s3_server
from tests.integration.broker_process import BrokerProcess
from tests.s3_proxy import S3FaultProxy
from tests.s3_server import CREDENTIALS, MotoServer

moto = s3_server.moto  # the module-scoped S3 server fixture
BUCKET = "magnetar-ledgers"


@pytest.fixture(scope="module")
def bucket(moto: MotoServer) -> str:
    moto.create_bucket(BUCKET)
    return BUCKET


@pytest.fixture
def prefix() -> str:
    return f"b-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def proxy(moto: MotoServer, bucket: str) -> Iterator[S3FaultProxy]:
    server = S3FaultProxy(moto.port).start()
    try:
        yield server
    finally:
        server.stop()


def ledger_store_args(endpoint: str, prefix: str, *extra: str) -> tuple[str, ...]:
    return ("--set", f"ledgerStoreUrl=s3://{BUCKET}/{prefix}", "--set", f"ledgerStoreServiceEndpoint={endpoint}",
            "--set", "ledgerStoreRegion=us-east-1", *extra)


def s3_broker(data_dir: Path, endpoint: str, prefix: str, *extra: str) -> BrokerProcess:
    return BrokerProcess(data_dir, extra_args=ledger_store_args(endpoint, prefix, *extra), env=dict(CREDENTIALS))


def chunk_keys(moto: MotoServer, prefix: str) -> list[str]:
    """Every chunk object under the broker's prefix (all pages)."""
    client = moto.client()
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/ledgers/"):
        keys.extend(str(o["Key"]) for o in page.get("Contents", []))
    return keys
