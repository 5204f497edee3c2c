"""``magnetar tokens ...``: Pulsar's ``pulsar tokens`` for the keys and JWTs that token authentication uses.

* ``create-secret-key [-a HS256] [-o FILE] [-b]``: random HMAC key bytes (base64 text with ``-b``);
* ``create-key-pair [-a RS256|ES256] --output-private-key F --output-public-key F``: DER (PKCS#8 / X.509) files;
* ``create (--secret-key K | --private-key K) --subject ROLE [--expiry-time 1y] [-c k=v ...]``: prints a token;
* ``show [-i TOKEN | -f FILE | --stdin]``: prints the header, ``---``, the claims (no signature check);
* ``validate (--secret-key K | --public-key K) [-i TOKEN | -f FILE | --stdin]``: prints the claims or fails.

Keys are given as broker.conf takes them: ``file:///path``, ``data:;base64,...``, or a path. Exit codes: 0 done,
1 invalid token or unreadable key, 2 bad usage.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from magnetar.server.auth.keys import KeyMaterialError, load_private_key, load_public_key, read_key_url
from magnetar.server.auth.token import EC_ALGORITHMS, HMAC_ALGORITHMS, RSA_ALGORITHMS, decode

SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
EC_CURVES: dict[str, ec.EllipticCurve] = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31_536_000}


class TokenCliError(Exception):
    pass


def add_tokens_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = verbs.add_parser("tokens", help="create keys and tokens like pulsar tokens")
    sub = tokens.add_subparsers(dest="tokens_verb", required=True)
    secret = sub.add_parser("create-secret-key", help="a random secret key for HS256/384/512")
    secret.add_argument("-a", "--signature-algorithm", default="HS256", choices=sorted(SECRET_BYTES))
    secret.add_argument("-o", "--output", type=Path, default=None, help="file to write (default: stdout)")
    secret.add_argument("-b", "--base64", action="store_true", help="write the key base64-encoded")
    pair = sub.add_parser("create-key-pair", help="a private/public key pair for RS256 or ES256")
    pair.add_argument("-a", "--signature-algorithm", default="RS256", choices=[*RSA_ALGORITHMS[:3], *EC_ALGORITHMS])
    pair.add_argument("--output-private-key", type=Path, required=True)
    pair.add_argument("--output-public-key", type=Path, required=True)
    create = sub.add_parser("create", help="create a token")
    create.add_argument("-a", "--signature-algorithm", default=None, help="default HS256, or RS256/ES256 by key")
    keys = create.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="file:///path or data:;base64,...")
    keys.add_argument("-pk", "--private-key", help="file:///path or data:;base64,...")
    create.add_argument("-s", "--subject", required=True, help="the role")
    create.add_argument("-e", "--expiry-time", default=None, help="relative: 30s, 10m, 2h, 7d, 1w, 1y")
    create.add_argument("-c", "--claims", action="append", default=[], metavar="KEY=VALUE")
    for name, helptext in (("show", "print a token's header and claims"), ("validate", "check a token's signature")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("-i", "--token", default=None)
        p.add_argument("-f", "--token-file", type=Path, default=None)
        p.add_argument("--stdin", action="store_true")
        if name == "validate":
            v = p.add_mutually_exclusive_group(required=True)
            v.add_argument("-sk", "--secret-key")
            v.add_argument("-pk", "--public-key")


def _write(data: bytes, output: Path | None) -> None:
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        output.write_bytes(data)


def relative_seconds(text: str) -> int:
    match = re.fullmatch(r"(\d+)([smhdwy]?)", text.strip())
    if match is None:
        raise TokenCliError(f"invalid expiry time {text!r}: use a number and one of s, m, h, d, w, y")
    return int(match.group(1)) * UNIT_SECONDS[match.group(2) or "s"]


def _key_pair(args: argparse.Namespace) -> None:
    alg = args.signature_algorithm
    private: Any = ec.generate_private_key(EC_CURVES[alg]) if alg in EC_CURVES else rsa.generate_private_key(
        public_exponent=65537, key_size=2048)
    args.output_private_key.write_bytes(private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    args.output_public_key.write_bytes(private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def _create(args: argparse.Namespace) -> str:
    claims: dict[str, Any] = {"sub": args.subject}
    for item in args.claims:
        key, sep, value = item.partition("=")
        if not sep:
            raise TokenCliError(f"--claims expects key=value, got {item!r}")
        claims[key] = value
    if args.expiry_time:
        claims["exp"] = int(time.time()) + relative_seconds(args.expiry_time)
    if args.secret_key:
        return str(jwt.encode(claims, read_key_url(args.secret_key), algorithm=args.signature_algorithm or "HS256"))
    key = load_private_key(read_key_url(args.private_key))
    default = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    return str(jwt.encode(claims, key, algorithm=args.signature_algorithm or default))


def _token_input(args: argparse.Namespace) -> str:
    if args.token:
        return str(args.token).strip()
    if args.token_file is not None:
        return str(args.token_file.read_text()).strip()
    if args.stdin:
        return sys.stdin.read().strip()
    raise TokenCliError("give the token with -i TOKEN, -f FILE or --stdin")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _java_map(claims: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in claims.items()) + "}"


def _show(token: str) -> str:
    try:
        header, claims = jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as exc:
        raise TokenCliError(f"not a JWT: {exc}") from None
    return f"{_compact(header)}\n---\n{_compact(claims)}"


def _validate(args: argparse.Namespace, token: str) -> str:
    if args.secret_key:
        key: Any = read_key_url(args.secret_key)
        algorithms = HMAC_ALGORITHMS
    else:
        key = load_public_key(read_key_url(args.public_key))
        algorithms = EC_ALGORITHMS if isinstance(key, ec.EllipticCurvePublicKey) else RSA_ALGORITHMS
    try:
        return _java_map(decode(token, key, algorithms))
    except jwt.InvalidTokenError as exc:
        raise TokenCliError(f"invalid token: {exc}") from None


def run_tokens(args: argparse.Namespace) -> int:
    try:
        verb = args.tokens_verb
        if verb == "create-secret-key":
            key = os.urandom(SECRET_BYTES[args.signature_algorithm])
            _write(base64.b64encode(key) if args.base64 else key, args.output)
        elif verb == "create-key-pair":
            _key_pair(args)
        elif verb == "create":
            print(_create(args))
        elif verb == "show":
            print(_show(_token_input(args)))
        else:
            print(_validate(args, _token_input(args)))
    except (TokenCliError, KeyMaterialError, OSError) as exc:
        print(f"magnetar tokens: {exc}", file=sys.stderr)
        return 1
    return 0
