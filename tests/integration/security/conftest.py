"""Fixtures for the security tests: a PKI and keys made per module, and ``magnetar standalone`` processes
started with security settings (``--set key=value`` with Pulsar's broker.conf names)."""

from __future__ import annotations

import os
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pulsar
import pytest

from magnetar import protocol as proto
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.security.pki import CertFiles, Pki

pytestmark = pytest.mark.integration

TLS_READY = re.compile(r"tls pulsar\+ssl://[^:]+:(\d+) https://[^:]+:(\d+)")
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
BASIC_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
FAIL_FAST_S = 1  # operation timeout of clients expected to be refused (the C++ client retries until then)


class SecureBroker(BrokerProcess):
    """A broker process that also reports its TLS ports."""

    tls_port = 0
    https_port = 0

    def start(self) -> SecureBroker:
        super().start()
        match = TLS_READY.search(self.log_text())
        if match:
            self.tls_port, self.https_port = int(match.group(1)), int(match.group(2))
        return self

    @property
    def tls_url(self) -> str:
        return f"pulsar+ssl://localhost:{self.tls_port}"

    @property
    def https_url(self) -> str:
        return f"https://localhost:{self.https_port}"


def start_broker(data_dir: Path, settings: Mapping[str, str]) -> SecureBroker:
    args: list[str] = []
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    return SecureBroker(data_dir, extra_args=tuple(args)).start()


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def pki(keys_dir: Path) -> Pki:
    return Pki(keys_dir)


@pytest.fixture(scope="module")
def server_cert(pki: Pki) -> CertFiles:
    return pki.issue("localhost", server=True)


@pytest.fixture(scope="module")
def secret_key(keys_dir: Path) -> bytes:
    key = os.urandom(32)
    (keys_dir / "secret.key").write_bytes(key)
    return key


def client(url: str, *, timeout_s: float = 15, **options: Any) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=timeout_s,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **options)


def http(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: Any = None,
         context: Any = None) -> tuple[int, Any]:
    """(status, decoded JSON body or text) of one request to a full URL."""
    return call(url, method, "", body, headers=headers, context=context)


def token_broker_settings(keys_dir: Path, **more: str) -> dict[str, str]:
    """Token authentication with the module's secret key, authorization on, ``admin`` the super-user."""
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER,
        "tokenSecretKey": f"file://{keys_dir / 'secret.key'}",
        "authorizationEnabled": "true",
        "superUserRoles": "admin",
        **more,
    }


def raw_exchange(port: int, tok: str, command: proto.pb.BaseCommand, want: int,
                 context: ssl.SSLContext | None = None) -> proto.pb.BaseCommand:
    """CONNECT with a token over a bare socket, send ``command``, return the first reply of type ``want``."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock = context.wrap_socket(raw, server_hostname="localhost") if context is not None else raw
    with sock:
        sock.sendall(proto.encode_command(proto.commands.connect(auth_method_name="token", auth_data=tok.encode())))
        sock.sendall(proto.encode_command(command))
        decoder = proto.FrameDecoder(5 * 1024 * 1024)
        for _ in range(100):  # bounded: a few frames come back
            decoder.feed(sock.recv(65536))
            while (frame := decoder.next_frame()) is not None:
                if frame.command.type == want:
                    return frame.command
    raise AssertionError(f"no reply of type {want}")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def closing() -> Iterator[list[pulsar.Client]]:
    """Clients a test opens, closed at its end."""
    opened: list[pulsar.Client] = []
    yield opened
    for c in opened:
        c.close()
