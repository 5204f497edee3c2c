"""The listeners' TLS context from the settings, and the reloader's change detection (no sockets)."""

from __future__ import annotations

import os
import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from magnetar.server.auth.settings import SecuritySettings
from magnetar.server.auth.tls import CertReloader, server_context
from tests.integration.security.pki import Pki


@pytest.fixture
def files(tmp_path: Path) -> tuple[Pki, SecuritySettings]:
    pki = Pki(tmp_path)
    server = pki.issue("localhost", server=True)
    return pki, SecuritySettings(broker_port_tls=0, tls_certificate_file=str(server.cert),
                                 tls_key_file=str(server.key))


def test_client_certificate_modes(files: tuple[Pki, SecuritySettings]) -> None:
    pki, base = files
    assert server_context(base).verify_mode == ssl.CERT_NONE
    trusted = replace(base, tls_trust_certs_file=str(pki.ca_file))
    assert server_context(trusted).verify_mode == ssl.CERT_OPTIONAL
    assert server_context(replace(trusted, tls_require_trusted_client_cert=True)).verify_mode == ssl.CERT_REQUIRED
    assert server_context(replace(trusted, tls_allow_insecure_connection=True)).verify_mode == ssl.CERT_NONE


def test_protocols_and_ciphers(files: tuple[Pki, SecuritySettings]) -> None:
    _, base = files
    cipher = "ECDHE-ECDSA-AES128-GCM-SHA256"
    ctx = server_context(replace(base, tls_protocols=("TLSv1.3", "TLSv1.2"), tls_ciphers=(cipher,)))
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert any(c["name"] == cipher for c in ctx.get_ciphers())
    with pytest.raises(ValueError, match="tlsProtocols"):
        server_context(replace(base, tls_protocols=("SSLv3",)))
    with pytest.raises(ssl.SSLError):
        server_context(replace(base, tls_ciphers=("NO-SUCH-CIPHER",)))
    with pytest.raises(ValueError):
        server_context(SecuritySettings(broker_port_tls=0))


def test_reloader_reloads_on_change_and_keeps_old_files_on_bad_ones(files: tuple[Pki, SecuritySettings]) -> None:
    pki, settings = files
    reloader = CertReloader(server_context(settings), settings)
    assert not reloader.check()
    renewed = pki.issue("renewed", server=True)
    Path(settings.tls_certificate_file).write_bytes(renewed.cert.read_bytes())
    Path(settings.tls_key_file).write_bytes(renewed.key.read_bytes())
    stamp = os.stat(settings.tls_certificate_file).st_mtime + 5
    os.utime(settings.tls_certificate_file, (stamp, stamp))  # a distinct time whatever the clock's resolution
    assert reloader.check() and reloader.reloads == 1
    Path(settings.tls_certificate_file).write_text("not a certificate")
    os.utime(settings.tls_certificate_file, (stamp + 5, stamp + 5))
    assert not reloader.check() and reloader.reloads == 1
