"""A tiny JSON-over-HTTP helper for the admin tests (urllib: the tests drive the real process)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

TIMEOUT_S = 15.0


def call(base: str, method: str, path: str, body: Any = None, *, headers: Mapping[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> tuple[int, Any]:
    """(status, JSON body or text); ``headers`` carry credentials, ``context`` is for https:// URLs."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=context) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        status = exc.code
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")
