"""Client credentials, as Pulsar's clients name them: a token (fixed, or a supplier called on every
connect and every AUTH_CHALLENGE), basic user:password, or a TLS client certificate; and the
``authPlugin``/``authParams`` pair of ``client.conf``/``pulsar-admin`` turned into one of these.

An :class:`Authentication` is a frozen value, picklable when its token is a string or a module-level
function, so a Spark executor rebuilds the same client.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from magnetar.client.errors import InvalidConfiguration

__all__ = ["Authentication", "AuthenticationBasic", "AuthenticationTLS", "AuthenticationToken", "from_plugin"]

PLUGIN_PREFIX = "org.apache.pulsar.client.impl.auth."


@dataclass(frozen=True, slots=True)
class Authentication:
    method: str = "none"
    data: bytes | Callable[[], bytes] = b""
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def auth_data(self) -> bytes:
        """The credential to send now (a supplier is asked again each time)."""
        return self.data() if callable(self.data) else self.data

    def http_headers(self) -> dict[str, str]:
        if self.method == "token":
            return {"Authorization": f"Bearer {self.auth_data().decode()}"}
        if self.method == "basic":
            return {"Authorization": "Basic " + base64.b64encode(self.auth_data()).decode()}
        return {}


@dataclass(frozen=True, slots=True)
class _TokenSupplier:
    """Calls the user's supplier on every connect and refresh (picklable when the supplier is)."""

    supplier: Callable[[], str]

    def __call__(self) -> bytes:
        return self.supplier().strip().encode()


def AuthenticationToken(token: str | Callable[[], str]) -> Authentication:
    if callable(token):
        return Authentication("token", _TokenSupplier(token))
    return Authentication("token", token.strip().encode())


def AuthenticationBasic(user: str, password: str, method: str = "basic") -> Authentication:
    return Authentication(method, f"{user}:{password}".encode())


def AuthenticationTLS(cert_file: str, key_file: str) -> Authentication:
    return Authentication("tls", b"", tls_cert_file=cert_file, tls_key_file=key_file)


def _params(text: str) -> dict[str, str]:
    """``{"k": "v"}`` JSON or ``k:v,k2:v2`` (Pulsar accepts both)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise InvalidConfiguration(f"authParams is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidConfiguration("authParams JSON must be an object")
        return {str(k): str(v) for k, v in value.items()}
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition(":")
        if sep:
            pairs[key.strip()] = value.strip()
    return pairs


def _token(params: str) -> Authentication:
    text = params.strip()
    if text.startswith("{"):
        return AuthenticationToken(_params(text).get("token", ""))
    if text.startswith("token:"):
        return AuthenticationToken(text[len("token:"):])
    if text.startswith("file:"):
        path = Path(text[len("file:"):].removeprefix("//"))
        try:
            return AuthenticationToken(path.read_text())
        except OSError as exc:
            raise InvalidConfiguration(f"cannot read the token file {path}: {exc.strerror}") from None
    return AuthenticationToken(text)


def from_plugin(plugin: str, params: str) -> Authentication | None:
    """The credentials of an ``authPlugin`` class name (or ``token``/``basic``/``tls``) and its ``authParams``."""
    name = plugin.strip().removeprefix(PLUGIN_PREFIX)
    if not name:
        return None
    if name in ("AuthenticationToken", "token"):
        return _token(params)
    if name in ("AuthenticationBasic", "basic"):
        p = _params(params)
        return AuthenticationBasic(p.get("userId", ""), p.get("password", ""))
    if name in ("AuthenticationTls", "tls"):
        p = _params(params)
        if "tlsCertFile" not in p or "tlsKeyFile" not in p:
            raise InvalidConfiguration("AuthenticationTls needs tlsCertFile and tlsKeyFile in authParams")
        return AuthenticationTLS(p["tlsCertFile"], p["tlsKeyFile"])
    raise InvalidConfiguration(f"unsupported authPlugin {plugin!r}: use AuthenticationToken, Basic or Tls")
