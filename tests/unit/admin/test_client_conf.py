"""``magnetar admin`` finds its client.conf as pulsar-admin does: ``--conf``, else ``PULSAR_CLIENT_CONF``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from magnetar.cli.admin.connection import DEFAULT_ADMIN_URL, add_connection_options, connection_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    return parser.parse_args(argv)


def test_the_environment_names_the_client_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text("# from the environment\nwebServiceUrl=http://broker.example:18080\n")
    other = tmp_path / "other.conf"
    other.write_text("webServiceUrl=http://other.example:28080\n")
    monkeypatch.delenv("PULSAR_CLIENT_CONF", raising=False)
    assert connection_from_args(parse()).url == DEFAULT_ADMIN_URL
    monkeypatch.setenv("PULSAR_CLIENT_CONF", str(conf))
    assert connection_from_args(parse()).url == "http://broker.example:18080"
    assert connection_from_args(parse("--conf", str(other))).url == "http://other.example:28080"
    assert connection_from_args(parse("--admin-url", "http://flag.example:8080")).url == "http://flag.example:8080"
