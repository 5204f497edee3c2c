"""Security settings: TLS listeners, authentication providers, authorization; Pulsar's ``broker.conf`` keys
(mapped in ``magnetar.config``). One frozen value, read once at start."""

from __future__ import annotations

from dataclasses import dataclass

PROVIDER_PREFIX = "org.apache.pulsar.broker.authentication.AuthenticationProvider"
#: ``authenticationProviders`` entries: Pulsar's class names, or the short method names
PROVIDER_METHODS = {
    f"{PROVIDER_PREFIX}Token": "token",
    f"{PROVIDER_PREFIX}Tls": "tls",
    f"{PROVIDER_PREFIX}Basic": "basic",
    "token": "token",
    "tls": "tls",
    "basic": "basic",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SecuritySettings:
    # TLS listeners (None: off)
    broker_port_tls: int | None = None  # brokerServicePortTls (Pulsar: 6651)
    web_port_tls: int | None = None  # webServicePortTls (Pulsar: 8443)
    tls_certificate_file: str = ""  # tlsCertificateFilePath (PEM)
    tls_key_file: str = ""  # tlsKeyFilePath (PEM)
    tls_trust_certs_file: str = ""  # tlsTrustCertsFilePath: CAs that sign client certificates
    tls_require_trusted_client_cert: bool = False  # tlsRequireTrustedClientCertOnConnect
    tls_allow_insecure_connection: bool = False  # tlsAllowInsecureConnection: do not ask for client certs
    tls_protocols: tuple[str, ...] = ()  # tlsProtocols, e.g. TLSv1.3,TLSv1.2 (empty: the library's default)
    tls_ciphers: tuple[str, ...] = ()  # tlsCiphers (OpenSSL names; empty: the library's default)
    tls_cert_refresh_check_seconds: int = 300  # tlsCertRefreshCheckDurationSec
    # authentication
    authentication_enabled: bool = False  # authenticationEnabled
    authentication_providers: tuple[str, ...] = ()  # authenticationProviders
    authentication_refresh_check_seconds: int = 60  # authenticationRefreshCheckSeconds
    anonymous_user_role: str | None = None  # anonymousUserRole
    authenticate_metrics_endpoint: bool = False  # authenticateMetricsEndpoint
    token_secret_key: str = ""  # tokenSecretKey: data:;base64,..., file:///path, env:VAR
    token_public_key: str = ""  # tokenPublicKey
    token_public_alg: str = "RS256"  # tokenPublicAlg
    token_auth_claim: str = "sub"  # tokenAuthClaim
    token_audience_claim: str = ""  # tokenAudienceClaim
    token_audience: str = ""  # tokenAudience
    basic_auth_conf: str = ""  # basicAuthConf: an htpasswd file (path, file:, data:, or base64 text)
    # authorization
    authorization_enabled: bool = False  # authorizationEnabled
    super_user_roles: tuple[str, ...] = ()  # superUserRoles

    @property
    def tls_enabled(self) -> bool:
        return self.broker_port_tls is not None or self.web_port_tls is not None

    def provider_methods(self) -> tuple[str, ...]:
        """The auth methods of ``authenticationProviders``; ValueError names an unknown provider."""
        methods: list[str] = []
        for name in self.authentication_providers:
            method = PROVIDER_METHODS.get(name.strip())
            if method is None:
                raise ValueError(f"unknown authentication provider {name!r}: use {PROVIDER_PREFIX}Token|Tls|Basic")
            if method not in methods:
                methods.append(method)
        return tuple(methods)
