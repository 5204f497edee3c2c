"""TLS client-certificate authentication (Pulsar's ``AuthenticationProviderTls``): the role is the common
name (CN) of the certificate the client presented in the TLS handshake and the listener verified against
``tlsTrustCertsFilePath``. Failure reasons: INVALID_CERTS, INVALID_CN."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from magnetar.server.auth.provider import AuthFailed, Credentials, Identity


class TlsProvider:
    method = "tls"
    name = "AuthenticationProviderTls"

    def authenticate(self, credentials: Credentials) -> Identity:
        if not credentials.peer_certificate:
            raise AuthFailed("INVALID_CERTS", "Failed to get TLS certificates from client")
        try:
            cert = x509.load_der_x509_certificate(credentials.peer_certificate)
            names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        except ValueError:
            raise AuthFailed("INVALID_CERTS", "Unreadable client certificate") from None
        if not names or not str(names[0].value):
            raise AuthFailed("INVALID_CN", "Client certificate has no common name")
        return Identity(str(names[0].value), self.method)  # the handshake checked the validity dates
