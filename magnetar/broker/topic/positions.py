"""Where things are in a topic's ledger: its last visible message, and the first entry published at a time.

Read-only queries over the managed ledger (and the topic's transactions, which hide what a reader may not
see yet): GET_LAST_MESSAGE_ID, the admin's last message id, and SEEK by publish time use them.
"""

from __future__ import annotations

from typing import Any

from magnetar import protocol as proto
from magnetar.broker.errors import MetadataError
from magnetar.broker.topic.extensions import TxnPort
from magnetar.broker.visible import last_visible
from magnetar.ledger.api import ManagedLedger, ManagedLedgerError, Position


async def last_message_id(ledger: ManagedLedger, txn: TxnPort[Any] | None) -> tuple[Position, int]:
    """The last entry's position and the batch index of its last message (-1 when unbatched)."""
    last = ledger.last_confirmed
    if last.entry_id < 0:  # an empty current ledger (after a restart): the last entry is in an earlier one
        stored = (Position(x.ledger_id, x.entries - 1) for x in reversed(ledger.ledgers()) if x.entries > 0)
        last = next(stored, last)
    if txn is not None:  # not past an open transaction, a marker or an aborted entry
        last = await txn.last_visible(last)
    else:  # not a marker (replicated-subscription snapshots)
        last = await last_visible(ledger, last)
    if last.entry_id < 0:
        return last, -1
    try:
        entry = await ledger.read_entry(last)
    except ManagedLedgerError as exc:  # Pulsar's answer when this read fails (the offload store is down)
        raise MetadataError(f"Failed to get batch size for entry {last}: {exc}") from exc
    meta = proto.parse_entry_metadata(entry.data)
    if meta.HasField("num_messages_in_batch"):
        return last, max(meta.num_messages_in_batch, 1) - 1
    return last, -1


async def first_published_at(ledger: ManagedLedger, publish_time_ms: int) -> Position:
    """The first entry published at or after ``publish_time_ms`` (past the end if none)."""
    for summary in ledger.ledgers():
        if summary.entries <= 0:
            continue
        last = Position(summary.ledger_id, summary.entries - 1)
        if await _publish_time(ledger, last) < publish_time_ms:
            continue
        low, high = 0, summary.entries - 1
        while low < high:  # binary search: at most log2(entries) reads
            middle = (low + high) // 2
            if await _publish_time(ledger, Position(summary.ledger_id, middle)) >= publish_time_ms:
                high = middle
            else:
                low = middle + 1
        return Position(summary.ledger_id, low)
    return ledger.next_valid_position(ledger.last_confirmed)


async def _publish_time(ledger: ManagedLedger, position: Position) -> int:
    entry = await ledger.read_entry(position)
    return int(proto.parse_entry_metadata(entry.data).publish_time)
