"""A new user's startup mistakes: each ends the real process at once with one line naming the cause and the
setting, exit code 1 or 2, and no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("startup"))).start()
    try:
        yield proc
    finally:
        proc.kill()


def standalone(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(data_dir),
           "--bind-address", "127.0.0.1", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_port_in_use_names_the_port_and_the_setting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = standalone(tmp_path / "d", "--broker-port", str(port), "--web-port", "0")
    assert done.returncode == 1
    line = last_line(done)
    assert f"port {port}" in line and "already in use" in line and "brokerServicePort" in line


def test_web_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = standalone(tmp_path / "d", "--broker-port", "0", "--web-port", str(port))
    assert done.returncode == 1 and "webServicePort" in last_line(done)


def test_data_dir_locked_by_a_running_broker(broker: BrokerProcess) -> None:
    done = standalone(broker.data_dir, "--broker-port", "0", "--web-port", "0")
    assert done.returncode == 1
    line = last_line(done)
    assert "in use by another magnetar process" in line and "--data-dir" in line


def test_unusable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = standalone(blocker / "data", "--broker-port", "0", "--web-port", "0")
    assert done.returncode == 1
    line = last_line(done)
    assert "--data-dir" in line and "Not a directory" in line


@pytest.mark.parametrize(("argv", "expected"), [
    (("--set", "clusterName="), "clusterName"),
    (("--broker-port", "70000"), "65535"),
    (("--web-port", "-1"), "65535"),
    (("--set", "brokerServicePort=65536"), "brokerServicePort"),
])
def test_bad_settings_are_refused_before_starting(tmp_path: Path, argv: tuple[str, ...], expected: str) -> None:
    done = standalone(tmp_path / "d", *argv)
    assert done.returncode == 2
    assert expected in last_line(done)
    assert not (tmp_path / "d").exists(), "nothing is created for a refused configuration"
