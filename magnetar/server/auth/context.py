"""Everything the network edges need to secure a request, built once at start: the settings, the
authentication service (None when ``authenticationEnabled`` is off), the authorization service (None when
``authorizationEnabled`` is off), the TLS context, and the bound ports (for lookups that answer the URL of
the other listener)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from magnetar.broker.authorization import AuthorizationService
from magnetar.resources import MetadataResources
from magnetar.server.auth.service import AuthenticationService
from magnetar.server.auth.settings import SecuritySettings
from magnetar.server.auth.tls import server_context


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True, kw_only=True)
class SecurityContext:
    settings: SecuritySettings = field(default_factory=SecuritySettings)
    authn: AuthenticationService | None = None
    authz: AuthorizationService | None = None
    tls: ssl.SSLContext | None = None
    broker_port: int | None = None  # bound plain port (None: no plain listener)
    broker_port_tls: int | None = None  # bound TLS port
    now_ms: Callable[[], int] = wall_ms  # wall-clock time: token expiry is wall-clock

    @classmethod
    def build(cls, settings: SecuritySettings, resources: MetadataResources) -> SecurityContext:
        """ValueError/OSError name what is misconfigured."""
        authn = AuthenticationService.from_settings(settings) if settings.authentication_enabled else None
        authz = None
        if settings.authorization_enabled:
            authz = AuthorizationService(resources, enabled=True,
                                         super_user_roles=frozenset(settings.super_user_roles))
        tls = server_context(settings) if settings.tls_enabled else None
        return cls(settings=settings, authn=authn, authz=authz, tls=tls)
