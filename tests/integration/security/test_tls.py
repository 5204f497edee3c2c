"""TLS on both listeners with the official client: transport with a token and no client certificate,
client certificates as identities (role = CN), an untrusted certificate refused, LOOKUP answering the
``pulsar+ssl://`` URL, HTTPS admin, certificate reload on file change, and a listener that requires
trusted client certificates and TLS 1.3."""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar import protocol as proto
from tests.integration.security.conftest import (
    FAIL_FAST_S,
    TLS_PROVIDER,
    TOKEN_PROVIDER,
    SecureBroker,
    bearer,
    client,
    http,
    raw_exchange,
    start_broker,
)
from tests.integration.security.pki import CertFiles, Pki, token

REFUSED = (pulsar.Timeout, pulsar.ConnectError, pulsar.AuthenticationError)


def _tls_settings(server: CertFiles, ca: Path) -> dict[str, str]:
    return {
        "brokerServicePortTls": "0",
        "webServicePortTls": "0",
        "tlsCertificateFilePath": str(server.cert),
        "tlsKeyFilePath": str(server.key),
        "tlsTrustCertsFilePath": str(ca),
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki, keys_dir: Path,
           secret_key: bytes) -> Iterator[SecureBroker]:
    server = pki.issue("localhost", server=True)
    proc = start_broker(Path(tmp_path_factory.mktemp("tls")), {
        **_tls_settings(server, pki.ca_file),
        "tlsCertRefreshCheckDurationSec": "1",
        "authenticationEnabled": "true",
        "authenticationProviders": f"{TLS_PROVIDER},{TOKEN_PROVIDER}",
        "tokenSecretKey": f"file://{keys_dir / 'secret.key'}",
        "authorizationEnabled": "true",
        "superUserRoles": "admin",
    })
    proc.server_files = server  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.kill()


def _round_trip(c: pulsar.Client) -> None:
    topic = f"persistent://public/default/tls-{uuid.uuid4().hex[:8]}"
    consumer = c.subscribe(topic, "s")
    c.create_producer(topic).send(b"secret payload")
    assert consumer.receive(timeout_millis=10_000).data() == b"secret payload"


def test_tls_transport_with_a_token_and_no_client_certificate(broker: SecureBroker, pki: Pki, secret_key: bytes,
                                                              closing: list[pulsar.Client]) -> None:
    c = client(broker.tls_url, tls_trust_certs_file_path=str(pki.ca_file),
               authentication=pulsar.AuthenticationToken(token(secret_key, "admin")))
    closing.append(c)
    _round_trip(c)


def test_client_certificate_common_name_is_the_role(broker: SecureBroker, pki: Pki,
                                                    closing: list[pulsar.Client]) -> None:
    admin = pki.issue("admin")
    c = client(broker.tls_url, tls_trust_certs_file_path=str(pki.ca_file),
               authentication=pulsar.AuthenticationTLS(str(admin.cert), str(admin.key)))
    closing.append(c)
    _round_trip(c)
    nobody = pki.issue("nobody")
    n = client(broker.tls_url, tls_trust_certs_file_path=str(pki.ca_file),
               authentication=pulsar.AuthenticationTLS(str(nobody.cert), str(nobody.key)))
    closing.append(n)
    with pytest.raises(pulsar.AuthorizationError):
        n.create_producer("persistent://public/default/tls-nobody")


def test_certificate_from_another_ca_is_refused(broker: SecureBroker, pki: Pki, keys_dir: Path,
                                                closing: list[pulsar.Client]) -> None:
    other = Pki(keys_dir, name="other-ca").issue("admin-impostor")
    c = client(broker.tls_url, timeout_s=FAIL_FAST_S, tls_trust_certs_file_path=str(pki.ca_file),
               authentication=pulsar.AuthenticationTLS(str(other.cert), str(other.key)))
    closing.append(c)
    with pytest.raises(REFUSED):
        c.create_producer("persistent://public/default/tls-impostor")


def _lookup(port: int, context: ssl.SSLContext | None, tok: str) -> proto.pb.CommandLookupTopicResponse:
    lookup = proto.commands.lookup("persistent://public/default/lk", 1)
    return raw_exchange(port, tok, lookup, proto.pb.BaseCommand.LOOKUP_RESPONSE, context).lookupTopicResponse


def test_lookup_answers_the_tls_url(broker: SecureBroker, pki: Pki, secret_key: bytes) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    tok = token(secret_key, "admin")
    over_tls = _lookup(broker.tls_port, context, tok)
    assert over_tls.brokerServiceUrlTls == f"pulsar+ssl://localhost:{broker.tls_port}"
    assert over_tls.brokerServiceUrl == f"pulsar://localhost:{broker.port}"
    plain = _lookup(broker.port, None, tok)
    assert plain.brokerServiceUrl == f"pulsar://localhost:{broker.port}"
    assert plain.brokerServiceUrlTls == f"pulsar+ssl://localhost:{broker.tls_port}"
    status, data = http("GET", broker.https_url + "/lookup/v2/topic/persistent/public/default/lk", context=context,
                        headers=bearer(tok))
    assert status == 200
    assert data["brokerUrlTls"] == f"pulsar+ssl://localhost:{broker.tls_port}"
    assert data["httpUrlTls"] == f"https://localhost:{broker.https_port}"


def test_https_admin_with_certificate_or_token(broker: SecureBroker, pki: Pki, secret_key: bytes) -> None:
    url = broker.https_url + "/admin/v2/tenants"
    anonymous = ssl.create_default_context(cafile=str(pki.ca_file))
    assert http("GET", url, context=anonymous)[0] == 401
    status, tenants = http("GET", url, context=anonymous, headers=bearer(token(secret_key, "admin")))
    assert status == 200 and "public" in tenants
    admin = pki.issue("admin")
    with_cert = ssl.create_default_context(cafile=str(pki.ca_file))
    with_cert.load_cert_chain(str(admin.cert), str(admin.key))
    assert http("GET", url, context=with_cert)[0] == 200
    nobody = pki.issue("nobody")
    as_nobody = ssl.create_default_context(cafile=str(pki.ca_file))
    as_nobody.load_cert_chain(str(nobody.cert), str(nobody.key))
    assert http("GET", url, context=as_nobody)[0] == 403


def _served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        cert = sock.getpeercert(binary_form=True)
    assert cert is not None
    return cert


def test_certificate_files_are_reloaded_when_they_change(broker: SecureBroker, pki: Pki) -> None:
    files: CertFiles = broker.server_files  # type: ignore[attr-defined]
    before = _served_certificate(broker.tls_port)
    renewed = pki.issue("localhost-renewed", server=True)
    files.key.write_bytes(renewed.key.read_bytes())
    files.cert.write_bytes(renewed.cert.read_bytes())
    assert broker.wait_for_log("TLS certificate reloaded", 15)
    after = _served_certificate(broker.tls_port)
    assert after != before
    assert ssl.DER_cert_to_PEM_cert(after).strip() == renewed.cert.read_text().strip()
    assert _served_certificate(broker.https_port) == after


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureBroker]:
    server = pki.issue("localhost-strict", server=True)
    proc = start_broker(Path(tmp_path_factory.mktemp("strict")), {
        **_tls_settings(server, pki.ca_file),
        "tlsRequireTrustedClientCertOnConnect": "true",
        "tlsProtocols": "TLSv1.3",
    })
    try:
        yield proc
    finally:
        proc.kill()


def test_required_client_certificate_and_protocols(strict_broker: SecureBroker, pki: Pki,
                                                   closing: list[pulsar.Client]) -> None:
    without = client(strict_broker.tls_url, timeout_s=FAIL_FAST_S, tls_trust_certs_file_path=str(pki.ca_file))
    closing.append(without)
    with pytest.raises(REFUSED):
        without.create_producer("persistent://public/default/strict")
    user = pki.issue("user")
    with_cert = client(strict_broker.tls_url, tls_trust_certs_file_path=str(pki.ca_file),
                       authentication=pulsar.AuthenticationTLS(str(user.cert), str(user.key)))
    closing.append(with_cert)
    _round_trip(with_cert)
    old = ssl.create_default_context(cafile=str(pki.ca_file))
    old.load_cert_chain(str(user.cert), str(user.key))
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", strict_broker.tls_port), timeout=10) as raw, \
            pytest.raises(ssl.SSLError):
        old.wrap_socket(raw, server_hostname="localhost")
