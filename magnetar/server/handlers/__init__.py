"""Command handlers, one module per family, joined into one dispatch table.

A handler takes ``(connection, command, payload)`` and either acts at once (returns None: SEND, FLOW,
ACK keep their order on the wire) or returns an awaitable the connection runs as a request task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magnetar import protocol as proto

if TYPE_CHECKING:
    from magnetar.server.connection import ServerConnection

Handler = Callable[["ServerConnection", proto.pb.BaseCommand, memoryview | None], Awaitable[None] | None]


def dispatch_table() -> dict[int, Handler]:
    from magnetar.server.handlers import consume, lookup, produce, schema, session, transactions, txn_topic

    table: dict[int, Handler] = {}
    for module in (session, lookup, produce, consume, transactions, txn_topic, schema):
        table.update(module.HANDLERS)
    from magnetar.server.handlers import nonpersistent

    return nonpersistent.route(table)  # commands on non-persistent:// topics go to their own handlers
