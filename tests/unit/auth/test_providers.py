"""The authentication providers and service without a network: tokens (HS256/RS256/ES256, expiry, audience,
role claim), key forms, htpasswd entries, TLS common names, failure reasons and metrics."""

from __future__ import annotations

import base64
import datetime
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from passlib.hash import apr_md5_crypt, des_crypt, md5_crypt, sha256_crypt

from magnetar.broker.errors import AuthenticationError
from magnetar.server.auth.basic import BasicProvider, parse_htpasswd
from magnetar.server.auth.keys import KeyMaterialError, read_key_url
from magnetar.server.auth.provider import AuthFailed, Credentials
from magnetar.server.auth.service import AuthenticationService
from magnetar.server.auth.settings import SecuritySettings
from magnetar.server.auth.tls_cert import TlsProvider
from magnetar.server.auth.token import TokenProvider

SECRET = b"s" * 32
B64 = "data:;base64," + base64.b64encode(SECRET).decode()


def tok(key: Any, alg: str = "HS256", **claims: Any) -> bytes:
    return jwt.encode({"sub": "alice", **claims}, key, algorithm=alg).encode()


def reason(provider: Any, data: bytes | None) -> str:
    with pytest.raises(AuthFailed) as info:
        provider.authenticate(Credentials(data))
    return info.value.reason


def test_hs256_token_names_its_role_and_expiry() -> None:
    provider = TokenProvider(SecuritySettings(token_secret_key=B64))
    exp = int(time.time()) + 60
    identity = provider.authenticate(Credentials(tok(SECRET, exp=exp)))
    assert (identity.role, identity.method, identity.expires_at_ms) == ("alice", "token", exp * 1000)
    assert provider.authenticate(Credentials(tok(SECRET))).expires_at_ms is None


@pytest.mark.parametrize(("data", "expected"), [
    (None, "INVALID_AUTH_DATA"),
    (b"  ", "INVALID_AUTH_DATA"),
    (b"not-a-jwt", "INVALID_TOKEN"),
    (tok(b"k" * 32), "INVALID_TOKEN"),
    (tok(SECRET, exp=int(time.time()) - 10), "INVALID_TOKEN"),
    (jwt.encode({"role": "x"}, SECRET, algorithm="HS256").encode(), "INVALID_TOKEN"),  # no sub claim
])
def test_bad_tokens_fail_with_pulsars_reasons(data: bytes | None, expected: str) -> None:
    assert reason(TokenProvider(SecuritySettings(token_secret_key=B64)), data) == expected


def test_role_claim_and_audience() -> None:
    settings = SecuritySettings(token_secret_key=B64, token_auth_claim="role", token_audience_claim="aud",
                                token_audience="broker-1")
    provider = TokenProvider(settings)
    assert provider.authenticate(Credentials(tok(SECRET, role=["ops", "x"], aud=["a", "broker-1"]))).role == "ops"
    assert provider.authenticate(Credentials(tok(SECRET, role="ops", aud="broker-1"))).role == "ops"
    assert reason(provider, tok(SECRET, role="ops", aud="broker-2")) == "INVALID_AUDIENCES"
    assert reason(provider, tok(SECRET, role="ops")) == "INVALID_AUDIENCES"
    with pytest.raises(ValueError):
        TokenProvider(SecuritySettings(token_secret_key=B64, token_audience_claim="aud"))


@pytest.mark.parametrize("kind", ["rsa-der", "rsa-pem", "ec-der"])
def test_public_key_tokens(tmp_path: Path, kind: str) -> None:
    private: Any = ec.generate_private_key(ec.SECP256R1()) if kind.startswith("ec") else rsa.generate_private_key(
        public_exponent=65537, key_size=2048)
    encoding = serialization.Encoding.PEM if kind.endswith("pem") else serialization.Encoding.DER
    public = tmp_path / "public.key"
    public.write_bytes(private.public_key().public_bytes(encoding, serialization.PublicFormat.SubjectPublicKeyInfo))
    provider = TokenProvider(SecuritySettings(token_public_key=f"file://{public}"))
    alg = "ES256" if kind.startswith("ec") else "RS256"
    assert provider.authenticate(Credentials(tok(private, alg))).role == "alice"
    assert reason(provider, tok(SECRET)) == "INVALID_TOKEN"  # an HMAC token cannot pass for a signed one


def test_key_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "k.bin"
    path.write_bytes(SECRET)
    monkeypatch.setenv("MAGNETAR_TEST_KEY", base64.b64encode(SECRET).decode())
    for spec in (B64, f"file://{path}", "env:MAGNETAR_TEST_KEY", str(path), base64.b64encode(SECRET).decode()):
        assert read_key_url(spec) == SECRET, spec
    assert read_key_url("data:,plain%20text") == b"plain text"
    for bad in ("data:no-comma", "env:MAGNETAR_UNSET_KEY", "file:///no/such/file", "!!not base64!!"):
        with pytest.raises(KeyMaterialError):
            read_key_url(bad)


def test_htpasswd_entries_as_pulsar_reads_them(tmp_path: Path) -> None:
    lines = {
        "apr": apr_md5_crypt.hash("p1"), "des": des_crypt.hash("p2"), "md5": md5_crypt.hash("p3"),
        "sha": sha256_crypt.hash("p4"),
    }
    conf = tmp_path / "htpasswd"
    conf.write_text("# users\n" + "".join(f"{u}:{h}\n" for u, h in lines.items()))
    provider = BasicProvider(SecuritySettings(basic_auth_conf=str(conf)))
    for number, user in enumerate(lines, 1):
        assert provider.authenticate(Credentials(f"{user}:p{number}".encode())).role == user
    assert reason(provider, b"apr:wrong") == "INVALID_AUTH_DATA"
    assert reason(provider, b"nobody:p1") == "INVALID_AUTH_DATA"
    assert reason(provider, b"no-colon") == "INVALID_AUTH_DATA"
    assert reason(provider, None) == "EMPTY_AUTH_DATA"
    inline = BasicProvider(SecuritySettings(basic_auth_conf=base64.b64encode(conf.read_bytes()).decode()))
    assert inline.authenticate(Credentials(b"des:p2")).role == "des"
    with pytest.raises(ValueError):
        parse_htpasswd("missing-separator\n")


def _certificate(cn: str | None) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    oid, value = (NameOID.COMMON_NAME, cn) if cn else (NameOID.ORGANIZATION_NAME, "o")
    attrs = [x509.NameAttribute(oid, value)]
    name = x509.Name(attrs)
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_tls_role_is_the_common_name() -> None:
    provider = TlsProvider()
    assert provider.authenticate(Credentials(peer_certificate=_certificate("svc-a"))).role == "svc-a"
    with pytest.raises(AuthFailed) as no_cert:
        provider.authenticate(Credentials())
    assert no_cert.value.reason == "INVALID_CERTS"
    with pytest.raises(AuthFailed) as no_cn:
        provider.authenticate(Credentials(peer_certificate=_certificate(None)))
    assert no_cn.value.reason == "INVALID_CN"


def test_service_dispatches_counts_and_falls_back_to_anonymous() -> None:
    settings = SecuritySettings(
        authentication_enabled=True,
        authentication_providers=("org.apache.pulsar.broker.authentication.AuthenticationProviderToken",),
        token_secret_key=B64,
    )
    service = AuthenticationService.from_settings(settings)
    assert service.authenticate("token", Credentials(tok(SECRET)), "r").role == "alice"
    assert service.authenticate_http("Bearer " + tok(SECRET).decode(), None, "r").role == "alice"
    for method, data in (("token", b"bad"), ("basic", b"a:b"), ("none", None)):
        with pytest.raises(AuthenticationError):
            service.authenticate(method, Credentials(data), "r")
    with pytest.raises(AuthenticationError):
        service.authenticate_http("Digest x", None, "r")
    assert service.successes[("AuthenticationProviderToken", "token")] == 2
    assert service.failures[("AuthenticationProviderToken", "token", "INVALID_TOKEN")] == 1
    assert service.failures[("AuthenticationService", "basic", "UNSUPPORTED_METHOD")] == 1
    assert service.failures[("AuthenticationService", "none", "AUTH_REQUIRED")] == 1
    names = {m.name for m in service.collector().collect()}
    assert names == {"pulsar_authentication_success", "pulsar_authentication_failures"}
    anonymous = AuthenticationService([], anonymous_role="guest")
    assert anonymous.authenticate_http(None, None, "r").role == "guest"
    # as Pulsar's CONNECT: a method no provider serves is the anonymous role, which authorization then judges
    assert anonymous.authenticate("made-up", Credentials(b"x"), "r").role == "guest"
    with pytest.raises(ValueError):
        AuthenticationService.from_settings(SecuritySettings(authentication_enabled=True))
    with pytest.raises(ValueError):
        SecuritySettings(authentication_providers=("com.example.Custom",)).provider_methods()
