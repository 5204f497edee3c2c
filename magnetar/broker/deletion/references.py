"""Ledgers referenced outside the managed-ledger records, for the audit: a topic's compacted ledgers are
named by its ``__compaction`` cursor (the current view, a compaction being written, the one a switch
retired and readers may still hold)."""

from __future__ import annotations

from magnetar.broker.compaction.state import (
    COMPACTION_CURSOR,
    LEDGER_PROPERTY,
    NONE,
    PENDING_PROPERTY,
    RETIRED_PROPERTY,
)
from magnetar.broker.deletion.audit import register_references
from magnetar.ledger.formats import cursor_key, decode_cursor
from magnetar.metadata.api import MetadataStore


async def compacted_ledgers(metadata: MetadataStore, names: list[str]) -> set[int]:
    found: set[int] = set()
    for name in names:
        key = cursor_key(name, COMPACTION_CURSOR)
        stored = await metadata.get(key)
        if stored is None:
            continue
        properties = decode_cursor(stored.value, key).properties
        found.update(properties.get(p, NONE) for p in (LEDGER_PROPERTY, PENDING_PROPERTY, RETIRED_PROPERTY))
    found.discard(NONE)
    return found


register_references(compacted_ledgers)
