"""Fixtures: a real ``magnetar standalone`` per test module, and official ``pulsar-client`` clients.

The broker keeps its metadata in its embedded SQLite store; a module marked
``pytest.mark.metadata_backends("sqlite", "zookeeper")`` runs every test twice, the second time with the broker
on a real ZooKeeper server (``metadataStoreUrl=zk:...``, one server for the session, a chroot per broker).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.zk_server import ZooKeeperServer, unique_chroot, zk_server

pytestmark = pytest.mark.integration
BACKENDS = ("sqlite", "zookeeper")

__all__ = ["zk_server"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("metadata_backends")
    if marker is not None and "metadata_backend" in metafunc.fixturenames:
        unknown = set(marker.args) - set(BACKENDS)
        assert not unknown, f"unknown metadata backends {unknown}"
        metafunc.parametrize("metadata_backend", marker.args, indirect=True, scope="module")


@pytest.fixture(scope="module")
def metadata_backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` unless the module asks for more (see the module docstring)."""
    return str(getattr(request, "param", "sqlite"))


def metadata_args(backend: str, request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The broker's command-line arguments for ``backend`` (starts the ZooKeeper server when first needed)."""
    if backend == "sqlite":
        return ()
    server: ZooKeeperServer = request.getfixturevalue("zk_server")
    return ("--set", f"metadataStoreUrl={server.url(unique_chroot('broker'))}")


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, metadata_backend: str, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    args = metadata_args(metadata_backend, request)
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("magnetar-data")), extra_args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def fresh_broker(tmp_path: Path, metadata_backend: str, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for restarts and kills."""
    proc = BrokerProcess(tmp_path / "data", extra_args=metadata_args(metadata_backend, request)).start()
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
