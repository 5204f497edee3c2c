"""Fixtures: a real ``magnetar standalone`` per test module, and official ``pulsar-client`` clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("magnetar-data"))).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for restarts and kills."""
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


def make_client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=15,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = make_client(broker.url)
    try:
        yield c
    finally:
        c.close()
