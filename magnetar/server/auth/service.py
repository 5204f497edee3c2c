"""The authentication service: the configured providers by method name, the anonymous role, and the
success/failure counters (Pulsar's ``pulsar_authentication_success_total`` and
``pulsar_authentication_failures_total`` with ``provider_name``, ``auth_method`` and ``reason``).

Every failure is logged with the method, the remote address and the reason, never with the credential,
at most one line per ``FAILURE_LOG_INTERVAL_S`` and metric series (failures cost nothing to send). A
method name is the client's choice: one this broker has no provider for is counted under
``auth_method="unknown"``, so made-up names cannot add metric series.

Callers get :class:`magnetar.broker.errors.AuthenticationError` carrying Pulsar's client-facing message.
"""

from __future__ import annotations

import base64
import binascii
import collections
import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from magnetar.broker.errors import AuthenticationError
from magnetar.core.logs import RateLimitedLog
from magnetar.server.auth.basic import BasicProvider
from magnetar.server.auth.provider import AuthenticationProvider, AuthFailed, Credentials, Identity
from magnetar.server.auth.settings import SecuritySettings
from magnetar.server.auth.tls_cert import TlsProvider
from magnetar.server.auth.token import TokenProvider

log = logging.getLogger("magnetar.server.auth")

CONNECT_FAILURE_MESSAGE = "Unable to authenticate"
HTTP_FAILURE_MESSAGE = "Authentication required"
SERVICE_NAME = "AuthenticationService"
FAILURE_LOG_INTERVAL_S = 10.0
#: the methods counted by name (those of configured providers too); any other is ``UNKNOWN_METHOD``
KNOWN_METHODS = frozenset({"", "none", "token", "basic", "tls"})
UNKNOWN_METHOD = "unknown"


def build_provider(method: str, settings: SecuritySettings) -> AuthenticationProvider:
    if method == "token":
        return TokenProvider(settings)
    if method == "basic":
        return BasicProvider(settings)
    return TlsProvider()


class AuthenticationService:
    def __init__(self, providers: list[AuthenticationProvider], *, anonymous_role: str | None = None) -> None:
        self.providers = {p.method: p for p in providers}
        self.anonymous_role = anonymous_role or None
        self.successes: collections.Counter[tuple[str, str]] = collections.Counter()
        self.failures: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._failure_logs: dict[tuple[str, str, str], RateLimitedLog] = {}  # per series: bounded as they are

    @classmethod
    def from_settings(cls, settings: SecuritySettings) -> AuthenticationService:
        """ValueError names what is misconfigured (the process refuses to start)."""
        providers = [build_provider(m, settings) for m in settings.provider_methods()]
        if not providers and not settings.anonymous_user_role:
            raise ValueError("authenticationEnabled needs authenticationProviders (or anonymousUserRole)")
        return cls(providers, anonymous_role=settings.anonymous_user_role)

    def authenticate(self, method: str, credentials: Credentials, remote: str) -> Identity:
        """Authenticate with the provider of ``method``; a method no provider serves (``none``, empty, or a name
        the client made up) falls back to the anonymous role when there is one, as Pulsar's CONNECT does, so
        such a client is refused by authorization at once instead of retrying a refused login."""
        provider = self.providers.get(method)
        if provider is None:
            if self.anonymous_role is not None:
                return Identity(self.anonymous_role, "none")
            reason = "AUTH_REQUIRED" if method in ("", "none") else "UNSUPPORTED_METHOD"
            raise self._failed(SERVICE_NAME, method, reason, f"No authentication provider for method {method!r}",
                               remote)
        try:
            identity = provider.authenticate(credentials)
        except AuthFailed as exc:
            raise self._failed(provider.name, method, exc.reason, str(exc), remote) from None
        self.successes[(provider.name, method)] += 1
        return identity

    def authenticate_http(self, authorization: str | None, peer_certificate: bytes | None, remote: str) -> Identity:
        """An HTTP request: ``Bearer`` token, ``Basic`` user:password, else the TLS client certificate,
        else the anonymous role. AuthenticationError when none applies or the credential is bad."""
        if authorization:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() == "bearer":
                return self.authenticate("token", Credentials(value.strip().encode()), remote)
            if scheme.lower() == "basic":
                try:
                    data = base64.b64decode(value.strip(), validate=True)
                except (binascii.Error, ValueError):
                    data = b""
                return self.authenticate("basic", Credentials(data), remote)
            raise self._failed(SERVICE_NAME, scheme, "INVALID_HEADER", "Unsupported Authorization scheme", remote)
        if peer_certificate and "tls" in self.providers:
            return self.authenticate("tls", Credentials(peer_certificate=peer_certificate), remote)
        return self.authenticate("none", Credentials(), remote)

    def _failed(self, provider: str, method: str, reason: str, detail: str, remote: str) -> AuthenticationError:
        label = method if method in KNOWN_METHODS or method in self.providers else UNKNOWN_METHOD
        series = (provider, label, reason)
        self.failures[series] += 1
        failure_log = self._failure_logs.get(series)
        if failure_log is None:
            failure_log = self._failure_logs[series] = RateLimitedLog(log, FAILURE_LOG_INTERVAL_S)
        failure_log.warning("authentication failed from %s: method=%r reason=%s: %s", remote, method[:64],
                                  reason, detail)
        return AuthenticationError(detail)

    def collector(self) -> Collector:
        return _AuthCollector(self)


class _AuthCollector(Collector):
    def __init__(self, service: AuthenticationService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        ok = CounterMetricFamily("pulsar_authentication_success", "Successful authentications",
                                 labels=["provider_name", "auth_method"])
        for (provider, method), count in sorted(self._service.successes.items()):
            ok.add_metric([provider, method], count)
        failed = CounterMetricFamily("pulsar_authentication_failures", "Failed authentications, by reason",
                                     labels=["provider_name", "auth_method", "reason"])
        for (provider, method, reason), count in sorted(self._service.failures.items()):
            failed.add_metric([provider, method, reason], count)
        yield ok
        yield failed
