"""Keys and certificates made for the security tests with ``cryptography``: a CA, a server certificate for
localhost/127.0.0.1, client certificates whose CN is the role, JWT keys, and an htpasswd file."""

from __future__ import annotations

import datetime
import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

PEM = serialization.Encoding.PEM
DAY = datetime.timedelta(days=1)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: Any, path: Path) -> Path:
    path.write_bytes(key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


class Pki:
    """A CA that signs server and client certificates, all written under ``root``."""

    def __init__(self, root: Path, name: str = "magnetar-test-ca") -> None:
        self.root = root
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = root / f"{name}.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(PEM))

    def issue(self, cn: str, *, server: bool = False) -> CertFiles:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(self.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        files = CertFiles(self.root / f"{cn}.cert.pem", self.root / f"{cn}.key.pem")
        files.cert.write_bytes(cert.public_bytes(PEM))
        _write_key(key, files.key)
        return files


def rsa_key_pair(root: Path) -> tuple[Any, Path]:
    """An RSA private key and its public key written as DER (as ``pulsar tokens create-key-pair`` does)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = root / "rsa-public.der"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.DER,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return key, public


def token(key: Any, subject: str, *, algorithm: str = "HS256", expires_in_s: float | None = None,
          **claims: Any) -> str:
    body: dict[str, Any] = {"sub": subject, **claims}
    if expires_in_s is not None:
        body["exp"] = int(time.time() + expires_in_s)
    return jwt.encode(body, key, algorithm=algorithm)
