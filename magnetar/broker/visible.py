"""Where the last entry a consumer can receive is: a bounded walk back from a position over entries that
are never delivered (markers; with transactions, aborted entries too). GET_LAST_MESSAGE_ID asks it.
Knows entries and the managed ledger, nothing of topics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from magnetar import protocol as proto
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, Position

VISIBLE_SCAN_ENTRIES_MAX: Final = 1000  # entries GET_LAST_MESSAGE_ID walks back over


def is_marker(meta: proto.pb.MessageMetadata) -> bool:
    return meta.HasField("marker_type")


async def last_visible(
    ledger: ManagedLedger, position: Position, hidden: Callable[[proto.pb.MessageMetadata], bool] = is_marker
) -> Position:
    """The last entry at or before ``position`` that ``hidden`` does not hide (past the bound: ``position``)."""
    probe = position
    for _ in range(VISIBLE_SCAN_ENTRIES_MAX):
        if probe.entry_id < 0:  # before a ledger's first entry: the previous ledger's last one
            earlier = [s for s in ledger.ledgers() if s.ledger_id < probe.ledger_id and s.entries > 0]
            if not earlier:
                return min(probe, ledger.first_position())  # nothing readable at all
            previous = max(earlier, key=lambda s: s.ledger_id)
            probe = Position(previous.ledger_id, previous.entries - 1)
            continue
        try:
            entry = await ledger.read_entry(probe)
        except ManagedLedgerError:
            return position
        if not hidden(proto.parse_entry_metadata(entry.data)):
            return probe
        probe = Position(probe.ledger_id, probe.entry_id - 1)
    return position
