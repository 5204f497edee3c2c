"""The dispatch table: command type -> handler, from every family's ``HANDLERS``."""

from __future__ import annotations

from magnetar.server.binary.handlers import (
    connect,
    consume,
    lookup,
    nonpersistent,
    produce,
    schema,
    transactions,
    txn_topic,
)
from magnetar.server.binary.session import Handler


def dispatch_table() -> dict[int, Handler]:
    table: dict[int, Handler] = {}
    for module in (connect, lookup, produce, consume, transactions, txn_topic, schema):
        table.update(module.HANDLERS)
    return nonpersistent.route(table)  # commands on non-persistent:// topics go to their own handlers
