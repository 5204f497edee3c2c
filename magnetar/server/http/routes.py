"""The admin API's route table and request helpers: one :class:`Route` per operation, used both to
register aiohttp handlers and to write the OpenAPI document, so the two never drift apart.

Broker errors become Pulsar's statuses with a JSON ``{"reason": ...}`` body here (``error_middleware``);
bad input is always a 4xx, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from magnetar.broker import errors

log = logging.getLogger("magnetar.server.admin")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Schema = dict[str, Any]

BODY_BYTES_MAX = 1024 * 1024
BODY_TIMEOUT_S = 30.0  # default of httpRequestTimeoutSeconds
BODY_TIMEOUT_KEY: web.AppKey[float] = web.AppKey("body_timeout_s", float)
ERROR_STATUSES = (400, 401, 403, 404, 405, 406, 409, 412, 422, 503)

_STATUS_BY_ERROR: tuple[tuple[type[errors.BrokerError], int], ...] = (
    (errors.AuthenticationError, 401),
    (errors.AuthorizationError, 403),
    (errors.NotFound, 404),
    (errors.TopicNotFound, 404),
    (errors.SubscriptionNotFound, 404),
    (errors.ConsumerNotFound, 404),
    (errors.Conflict, 409),
    (errors.ProducerBusy, 409),
    (errors.ConsumerBusy, 409),
    (errors.TopicTerminated, 409),
    (errors.PreconditionFailed, 412),
    (errors.TopicQuotaExceeded, 412),
    (errors.InvalidRequest, 400),
    (errors.InvalidTopicName, 400),
    (errors.NotAcceptable, 406),
    (errors.MethodNotAllowed, 405),
    (errors.NotAllowed, 405),
    (errors.ServiceNotReady, 503),
)


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    ok: int = 200
    result: Schema | None = None  # JSON schema of the success body; None: 204 or non-JSON
    result_type: str = "application/json"
    body: Schema | None = None
    body_required: bool = False
    query: dict[str, Schema] = field(default_factory=dict)


def status_of(exc: errors.BrokerError) -> int:
    for kind, status in _STATUS_BY_ERROR:
        if isinstance(exc, kind):
            return status
    return 500


def reason(status: int, text: str) -> web.Response:
    return web.json_response({"reason": text}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.BrokerError as exc:
        status = status_of(exc)
        if status >= 500:
            log.error("admin %s %s failed: %s", request.method, request.path, exc)
        return reason(status, str(exc) or type(exc).__name__)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return reason(exc.status, exc.reason)


def ok(value: Any = None, status: int = 200) -> web.Response:
    if value is None and status == 204:
        return web.Response(status=204)
    return web.json_response(value, status=status)


def no_content() -> web.Response:
    return web.Response(status=204)


async def json_body(request: web.Request, *, required: bool) -> Any:
    """The request's JSON body (None when empty and optional); 400 on bad JSON or a missing body.

    Read whole by the framework (however many TCP segments it took), refused with 413 when its
    declared or actual size is over ``BODY_BYTES_MAX``, with 408 when it does not arrive in time."""
    if request.content_length is not None and request.content_length > BODY_BYTES_MAX:
        raise web.HTTPRequestEntityTooLarge(max_size=BODY_BYTES_MAX, actual_size=request.content_length)
    try:
        async with asyncio.timeout(request.app.get(BODY_TIMEOUT_KEY, BODY_TIMEOUT_S)):
            raw = await request.read()  # bounded by the application's client_max_size
    except TimeoutError:
        raise web.HTTPRequestTimeout(text="The request body did not arrive in time") from None
    if not raw.strip():
        if required:
            raise errors.InvalidRequest("A JSON body is required")
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise errors.InvalidRequest(f"The body is not valid JSON: {exc}") from exc


def int_value(value: Any, what: str, low: int = 0, high: int = 2**63 - 1) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 10)
        except ValueError:
            raise errors.InvalidRequest(f"{what} must be an integer") from None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise errors.InvalidRequest(f"{what} must be an integer between {low} and {high}")
    return value


def flag(request: web.Request, name: str) -> bool:
    text = request.query.get(name, "false").lower()
    if text not in ("true", "false"):
        raise errors.InvalidRequest(f"Query parameter {name} must be true or false")
    return text == "true"


def match(request: web.Request, name: str) -> str:
    return request.match_info[name]
