"""Fixtures for magnetar.client against the real broker: an asyncio client per test, a broker
with auto-created partitioned topics, and small helpers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from magnetar.client import Client
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import broker, client, fresh_broker, make_client  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration

RECEIVE_MS = 5_000


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def mclient(broker: BrokerProcess) -> AsyncIterator[Client]:  # noqa: F811
    async with Client(broker.url, operation_timeout_ms=10_000) as c:
        yield c


@pytest.fixture(scope="module")
def partitioned_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        Path(tmp_path_factory.mktemp("magnetar-partitioned")),
        extra_args=("--set", "allowAutoTopicCreationType=partitioned", "--set", "defaultNumPartitions=3",
                    "--set", "maxMessageSize=65536"),
    ).start()
    try:
        yield proc
    finally:
        proc.kill()
