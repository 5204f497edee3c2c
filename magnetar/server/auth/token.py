"""JWT authentication (Pulsar's ``AuthenticationProviderToken``), with PyJWT.

The token arrives as the CONNECT's auth data (method ``token``) or as ``Authorization: Bearer <token>``.
It is signed with ``tokenSecretKey`` (HS256/384/512) or the private half of ``tokenPublicKey`` (RS*/PS*
or ES*); the role is the ``tokenAuthClaim`` claim (``sub`` by default; the first string of a list), and
``exp``, when present, bounds its life. With ``tokenAudienceClaim`` set, that claim must name
``tokenAudience``. Failure reasons are Pulsar's: INVALID_AUTH_DATA, INVALID_TOKEN, INVALID_AUDIENCES.
"""

from __future__ import annotations

from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from magnetar.server.auth.keys import load_public_key, read_key_url
from magnetar.server.auth.provider import AuthFailed, Credentials, Identity
from magnetar.server.auth.settings import SecuritySettings

HMAC_ALGORITHMS = ["HS256", "HS384", "HS512"]
RSA_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
EC_ALGORITHMS = ["ES256", "ES384", "ES512"]
TOKEN_CHARS_MAX = 64 * 1024


def validation_key(settings: SecuritySettings) -> tuple[Any, list[str]]:
    """The key that checks signatures and the algorithms it admits; ValueError when none is configured."""
    if settings.token_secret_key.strip():
        return read_key_url(settings.token_secret_key, allow_path=False), HMAC_ALGORITHMS
    if settings.token_public_key.strip():
        key = load_public_key(read_key_url(settings.token_public_key, allow_path=False))
        if isinstance(key, rsa.RSAPublicKey):
            return key, RSA_ALGORITHMS
        if isinstance(key, ec.EllipticCurvePublicKey):
            return key, EC_ALGORITHMS
        raise ValueError("tokenPublicKey must be an RSA or EC public key")
    raise ValueError("token authentication needs tokenSecretKey or tokenPublicKey")


def decode(token: str, key: Any, algorithms: list[str]) -> dict[str, Any]:
    """Verify the signature and expiry; the claims. Raises jwt.InvalidTokenError."""
    return jwt.decode(token, key, algorithms=algorithms, options={"verify_aud": False, "require": []})


class TokenProvider:
    method = "token"
    name = "AuthenticationProviderToken"

    def __init__(self, settings: SecuritySettings) -> None:
        self._key, self._algorithms = validation_key(settings)
        self._role_claim = settings.token_auth_claim or "sub"
        self._audience_claim = settings.token_audience_claim
        self._audience = settings.token_audience
        if self._audience_claim and not self._audience:
            raise ValueError(f"tokenAudienceClaim {self._audience_claim!r} is set but tokenAudience is not")

    def authenticate(self, credentials: Credentials) -> Identity:
        raw = credentials.data
        if not raw or not raw.strip():
            raise AuthFailed("INVALID_AUTH_DATA", "Blank token found")
        if len(raw) > TOKEN_CHARS_MAX:
            raise AuthFailed("INVALID_AUTH_DATA", "Token too long")
        try:
            claims = decode(raw.decode("ascii").strip(), self._key, self._algorithms)
        except (UnicodeDecodeError, jwt.InvalidTokenError) as exc:
            raise AuthFailed("INVALID_TOKEN", f"Failed to authentication token: {_why(exc)}") from None
        self._check_audience(claims)
        role = _role(claims.get(self._role_claim))
        if role is None:
            raise AuthFailed("INVALID_TOKEN", f"Token has no {self._role_claim!r} claim naming a role")
        exp = claims.get("exp")
        return Identity(role, self.method, int(exp * 1000) if isinstance(exp, int | float) else None)

    def _check_audience(self, claims: dict[str, Any]) -> None:
        if not self._audience_claim:
            return
        value = claims.get(self._audience_claim)
        audiences = value if isinstance(value, list) else [value]
        if self._audience not in audiences:
            raise AuthFailed("INVALID_AUDIENCES", f"Audiences in token do not contain this broker: {self._audience}")


def _role(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and isinstance(value[0], str) and value[0]:
        return value[0]
    return None


def _why(exc: Exception) -> str:
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "JWT expired"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "JWT signature does not match locally computed signature"
    if isinstance(exc, UnicodeDecodeError):
        return "token is not ASCII"
    return type(exc).__name__
