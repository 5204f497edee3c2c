"""Where a topic's compacted view is recorded: the ``__compaction`` cursor's properties.

The cursor is a durable cursor of the topic's managed ledger, so its mark-delete position (the horizon once
a compaction has switched) keeps retention from trimming anything the compacted view does not cover. Its
properties name the compacted ledger (Pulsar's ``CompactedTopicLedger``) and the horizon, and two
crash-recovery slots: the ledger a running compaction is writing (``pending``) and the one the last switch
replaced (``retired``), and a ``running`` flag (a restart runs an interrupted compaction again). One
metadata write (the cursor record) switches every field at once, so a crash leaves either the old view or
the new one.

Cursor properties are integers; -1 means "none" (properties are merged, never removed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from magnetar.ledger.api import Position
from magnetar.ledger.formats import cursor_key, decode_cursor
from magnetar.metadata.api import MetadataStore

COMPACTION_CURSOR: Final = "__compaction"
LEDGER_PROPERTY: Final = "CompactedTopicLedger"
HORIZON_LEDGER_PROPERTY: Final = "magnetar.compaction.horizon.ledger"
HORIZON_ENTRY_PROPERTY: Final = "magnetar.compaction.horizon.entry"
ENTRIES_PROPERTY: Final = "magnetar.compaction.entries"
PENDING_PROPERTY: Final = "magnetar.compaction.pending"
RETIRED_PROPERTY: Final = "magnetar.compaction.retired"
RUNNING_PROPERTY: Final = "magnetar.compaction.running"  # 1 from a compaction's start to its switch or failure
NONE: Final = -1
NO_MESSAGE: Final = Position(-1, -1)  # before everything: the start of a view, or "no message"
READ_RUN_ENTRIES_MAX: Final = 128  # compacted entries per storage read


def is_compaction_cursor(name: str) -> bool:
    return name == COMPACTION_CURSOR


@dataclass(frozen=True, slots=True)
class CompactedView:
    """One finished compaction: the compacted ledger, its entry count, and the last position it covers."""

    ledger_id: int
    entries: int
    horizon: Position

    def covers(self, position: Position) -> bool:
        return position <= self.horizon


def view_from(properties: Mapping[str, int]) -> CompactedView | None:
    ledger_id = properties.get(LEDGER_PROPERTY, NONE)
    if ledger_id == NONE or HORIZON_LEDGER_PROPERTY not in properties:
        return None
    horizon = Position(properties[HORIZON_LEDGER_PROPERTY], properties.get(HORIZON_ENTRY_PROPERTY, NONE))
    return CompactedView(ledger_id, properties.get(ENTRIES_PROPERTY, 0), horizon)


def switch_properties(new: CompactedView, retired: int) -> dict[str, int]:
    """Every field the switch writes in one cursor record."""
    return {
        LEDGER_PROPERTY: new.ledger_id,
        ENTRIES_PROPERTY: new.entries,
        HORIZON_LEDGER_PROPERTY: new.horizon.ledger_id,
        HORIZON_ENTRY_PROPERTY: new.horizon.entry_id,
        PENDING_PROPERTY: NONE,
        RETIRED_PROPERTY: retired,
        RUNNING_PROPERTY: 0,
    }


async def referenced_ledgers(metadata: MetadataStore, names: list[str]) -> set[int]:
    """Compacted ledgers the ``__compaction`` cursors name (for the ledger audit: not orphans)."""
    found: set[int] = set()
    for name in names:
        stored = await metadata.get(cursor_key(name, COMPACTION_CURSOR))
        if stored is None:
            continue
        props = decode_cursor(stored.value, cursor_key(name, COMPACTION_CURSOR)).properties
        found |= {props.get(k, NONE) for k in (LEDGER_PROPERTY, PENDING_PROPERTY, RETIRED_PROPERTY)} - {NONE}
    return found
