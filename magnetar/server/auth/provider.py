"""What every authentication provider offers, and what it returns or raises.

A provider turns credentials into an :class:`Identity` (a role, and when the credentials expire), or raises
:class:`AuthFailed` with a short reason code for the failure metric (Pulsar's ``ErrorCode`` names) and a
message that never contains the secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Identity:
    role: str
    method: str
    expires_at_ms: int | None = None  # None: the credentials do not expire


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a client presented: the CONNECT/AUTH_RESPONSE data or the HTTP credential, and its TLS certificate."""

    data: bytes | None = None
    peer_certificate: bytes | None = None  # DER, when the client sent a verified certificate


class AuthFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class AuthenticationProvider(Protocol):
    @property
    def method(self) -> str:
        """The auth method name clients send (``token``, ``tls``, ``basic``)."""
        ...

    @property
    def name(self) -> str:
        """Pulsar's provider class name, the ``provider_name`` label of the metrics."""
        ...

    def authenticate(self, credentials: Credentials) -> Identity: ...
