"""An ``https://`` service URL with the official client: HTTP lookup and partitioned metadata over TLS, then
the binary protocol at the ``pulsar+ssl://`` URL the lookup answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.security.conftest import SecureBroker, client, start_broker
from tests.integration.security.pki import Pki


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureBroker]:
    server = pki.issue("localhost", server=True)
    proc = start_broker(Path(tmp_path_factory.mktemp("https-url")), {
        "brokerServicePortTls": "0", "webServicePortTls": "0", "tlsCertificateFilePath": str(server.cert),
        "tlsKeyFilePath": str(server.key), "tlsTrustCertsFilePath": str(pki.ca_file),
    })
    try:
        yield proc
    finally:
        proc.kill()


def test_https_service_url_round_trip(broker: SecureBroker, pki: Pki) -> None:
    c = client(broker.https_url, tls_trust_certs_file_path=str(pki.ca_file), use_tls=True)
    try:
        topic = f"https-url-{uuid.uuid4().hex[:6]}"
        consumer = c.subscribe(topic, "s")
        c.create_producer(topic).send(b"over https lookup")
        assert consumer.receive(timeout_millis=10_000).data() == b"over https lookup"
    finally:
        c.close()
