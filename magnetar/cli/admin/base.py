"""What every ``magnetar admin`` verb family builds on: one HTTP call (:class:`Call`) and how it is sent,
a verb's declaration (:class:`Verb` and its argparse ``Spec`` s), names turned into admin paths, amounts with
units (``10m``, ``2G``) and message ids. Verb families (``verbs``, ``policies``, ``schemas``) import this
module and never each other; the command (``magnetar.cli.admin``) gathers them."""

from __future__ import annotations

import argparse
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.broker.errors import BrokerError
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.cli.admin.connection import AdminConnection

TIMEOUT_S = 30.0
REDIRECTS_MAX = 20  # pulsar-admin's clients follow as many
RESPONSE_BYTES_MAX = 64 * 1024 * 1024
UNITS_MIN = {"m": 1, "h": 60, "d": 1440, "w": 10080, "y": 525600}
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
UNITS_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
UNITS_BYTES = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


class UsageError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    body: Any = None
    query: dict[str, str] | None = None
    raw: bool = False  # the answer is bytes (peek), not JSON
    done: str | None = None  # printed when the answer is empty (pulsar-admin's confirmation)


@dataclass(frozen=True, slots=True)
class HttpError(Exception):
    status: int
    reason: str


def request(conn: AdminConnection, call: Call) -> tuple[int, bytes, dict[str, str]]:
    """One admin call; a 307/308 (the broker that owns the topic or bundle is another one) is followed with
    the same method and body, as pulsar-admin does, at most ``REDIRECTS_MAX`` times."""
    url = conn.url.rstrip("/") + call.path
    if call.query:
        url += "?" + urllib.parse.urlencode(call.query)
    data = json.dumps(call.body).encode() if call.body is not None else None
    opener = urllib.request.build_opener(_KeepMethodRedirects(), urllib.request.HTTPSHandler(context=conn.context))
    for _ in range(REDIRECTS_MAX + 1):
        req = urllib.request.Request(url, data=data, method=call.method, headers=conn.headers)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with opener.open(req, timeout=TIMEOUT_S) as resp:
                return resp.status, resp.read(RESPONSE_BYTES_MAX), dict(resp.headers.items())
        except urllib.error.HTTPError as exc:
            location = exc.headers.get("Location") if exc.code in (307, 308) else None
            if location:
                url = urllib.parse.urljoin(url, location)
                continue
            body = exc.read(RESPONSE_BYTES_MAX)
            try:
                reason = str(json.loads(body).get("reason", body.decode(errors="replace")))
            except (ValueError, AttributeError):
                reason = body.decode(errors="replace") or exc.reason
            raise HttpError(exc.code, reason) from None
    raise HttpError(508, f"more than {REDIRECTS_MAX} redirects")


class _KeepMethodRedirects(urllib.request.HTTPRedirectHandler):
    """307/308 come back to :func:`request`, which repeats the call there with its method and body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# ---- names and values --------------------------------------------------------------------------------


def topic_path(name: str) -> str:
    try:
        t = TopicName.parse(name)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
    return f"/admin/v2/{t.domain}/{t.tenant}/{t.namespace}/{urllib.parse.quote(t.local_name, safe='')}"


def ns_path(name: str) -> str:
    try:
        ns = NamespaceName.parse(name)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
    return f"/admin/v2/namespaces/{ns.tenant}/{ns.namespace}"


def amount(text: str, units: Mapping[str, float], what: str) -> int:
    match = re.fullmatch(r"(-?\d+)([A-Za-z]?)", text.strip())
    if match is None or (match.group(2) and match.group(2).lower() not in units):
        raise UsageError(f"Invalid {what}: {text!r}")
    value = int(match.group(1))
    if value < 0:
        return -1
    factor = units[match.group(2).lower()] if match.group(2) else next(iter(units.values()))
    return int(value * factor)


def message_id(text: str) -> dict[str, int]:
    if text == "latest":
        return {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1, "partitionIndex": -1}
    if text == "earliest":
        return {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
    match = re.fullmatch(r"(-?\d+):(-?\d+)(?::(-?\d+))?", text)
    if match is None:
        raise UsageError(f"Invalid message id {text!r}: use latest, earliest or ledgerId:entryId")
    return {"ledgerId": int(match.group(1)), "entryId": int(match.group(2)),
            "partitionIndex": int(match.group(3) or -1)}


def force(args: argparse.Namespace) -> dict[str, str]:
    return {"force": "true"} if args.force else {}


def retention_body(a: argparse.Namespace) -> dict[str, int]:
    return {"retentionTimeInMinutes": amount(a.time, UNITS_MIN, "retention time"),
            "retentionSizeInMB": amount(a.size, UNITS_MB, "retention size")}


def q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


# ---- verbs: each builds one Call (or several) from its arguments -------------------------------------

Spec = tuple[tuple[str, ...], dict[str, Any]]
Build = Callable[[argparse.Namespace], "Call | list[Call]"]


@dataclass(frozen=True, slots=True)
class Verb:
    group: str
    names: tuple[str, ...]
    specs: tuple[Spec, ...]
    build: Build
    help: str


NAME: Spec = (("name",), {})
TOPIC: Spec = (("topic",), {"help": "topic name: persistent://tenant/ns/t, tenant/ns/t or t"})
NS: Spec = (("namespace",), {"help": "tenant/namespace"})
TENANT: Spec = (("tenant",), {})
FORCE: Spec = (("-f", "--force"), {"action": "store_true"})
SUB: Spec = (("-s", "--subscription"), {"required": True})
PARTS: Spec = (("-p", "--partitions"), {"type": int, "required": True})
ROLES: Spec = (("-r", "--admin-roles"), {"default": ""})
CLUSTERS: Spec = (("-c", "--allowed-clusters"), {"default": ""})


def split_list(text: str) -> list[str]:
    return [x for x in text.split(",") if x]
