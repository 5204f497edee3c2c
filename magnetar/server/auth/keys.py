"""Key material written the ways Pulsar's configuration accepts it:

* ``data:;base64,<base64>`` or ``data:,<text>`` — the bytes inline (a data URL);
* ``file:///path`` — the file's bytes;
* ``env:NAME`` — an environment variable holding base64;
* a path to an existing file (``basicAuthConf`` and the token CLI accept it), else base64 text.

Token keys: a secret key is raw bytes (HS256/384/512); a public or private key is DER (what
``pulsar tokens create-key-pair`` writes) or PEM.
"""

from __future__ import annotations

import base64
import binascii
import os
import urllib.parse
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

KEY_BYTES_MAX = 1024 * 1024


class KeyMaterialError(ValueError):
    """Key material that cannot be read; the message names the source, never the bytes."""


def read_key_url(spec: str, *, allow_path: bool = True) -> bytes:
    """The bytes that ``spec`` designates (see the module docstring)."""
    spec = spec.strip()
    if spec.startswith("data:"):
        head, sep, body = spec[len("data:"):].partition(",")
        if not sep:
            raise KeyMaterialError("a data: URL needs a ',' before its content")
        if head.endswith(";base64"):
            return _b64(body, "data: URL")
        return urllib.parse.unquote_to_bytes(body)
    if spec.startswith("file:"):
        return _read(Path(urllib.parse.unquote(urllib.parse.urlparse(spec).path)))
    if spec.startswith("env:"):
        value = os.environ.get(spec[len("env:"):])
        if value is None:
            raise KeyMaterialError(f"environment variable {spec[len('env:'):]} is not set")
        return _b64(value, spec)
    if allow_path and spec and Path(spec).is_file():
        return _read(Path(spec))
    return _b64(spec, "key text")


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(KEY_BYTES_MAX + 1)
    except OSError as exc:
        raise KeyMaterialError(f"cannot read {path}: {exc.strerror}") from exc
    if len(data) > KEY_BYTES_MAX:
        raise KeyMaterialError(f"{path} is larger than {KEY_BYTES_MAX} bytes")
    return data


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise KeyMaterialError(f"{what} is not valid base64") from None


def load_public_key(data: bytes) -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except ValueError as exc:
        raise KeyMaterialError("not a public key (DER or PEM)") from exc


def load_private_key(data: bytes) -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyMaterialError("not an unencrypted private key (DER or PEM)") from exc
