"""Basic authentication (Pulsar's ``AuthenticationProviderBasic``) from an htpasswd file.

``basicAuthConf`` holds ``user:hash`` lines, as ``htpasswd`` writes them; a hash is an Apache apr1-MD5
(``$apr1$``) entry or a crypt(3) one (DES, ``$1$`` MD5, ``$5$`` SHA-256, ``$6$`` SHA-512), the schemes
Pulsar's reader accepts. Verification is passlib's. The credential is ``user:password``: the CONNECT's
auth data (method ``basic``) or ``Authorization: Basic base64(user:password)``.
"""

from __future__ import annotations

from passlib.context import CryptContext

from magnetar.server.auth.keys import read_key_url
from magnetar.server.auth.provider import AuthFailed, Credentials, Identity
from magnetar.server.auth.settings import SecuritySettings

USERS_MAX = 100_000
_CONTEXT = CryptContext(schemes=["apr_md5_crypt", "md5_crypt", "sha256_crypt", "sha512_crypt", "des_crypt"])


def parse_htpasswd(text: str) -> dict[str, str]:
    users: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user:
            raise ValueError("basicAuthConf lines must be user:hash")
        users[user] = hashed
        if len(users) > USERS_MAX:
            raise ValueError(f"basicAuthConf has more than {USERS_MAX} users")
    return users


class BasicProvider:
    method = "basic"
    name = "AuthenticationProviderBasic"

    def __init__(self, settings: SecuritySettings) -> None:
        if not settings.basic_auth_conf.strip():
            raise ValueError("basic authentication needs basicAuthConf")
        self._users = parse_htpasswd(read_key_url(settings.basic_auth_conf).decode("utf-8"))

    def authenticate(self, credentials: Credentials) -> Identity:
        if not credentials.data:
            raise AuthFailed("EMPTY_AUTH_DATA", "Authentication data is empty")
        user, sep, password = credentials.data.decode("utf-8", errors="replace").partition(":")
        if not sep:
            raise AuthFailed("INVALID_AUTH_DATA", "Basic credentials must be user:password")
        hashed = self._users.get(user)
        if hashed is None:
            raise AuthFailed("INVALID_AUTH_DATA", "User not exist")
        try:
            good = _CONTEXT.verify(password, hashed)
        except (ValueError, TypeError):
            good = False
        if not good:
            raise AuthFailed("INVALID_AUTH_DATA", "Not correct password")
        return Identity(user, self.method)
