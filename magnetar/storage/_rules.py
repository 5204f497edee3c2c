"""Rules every ledger backend shares: limits, the ledger lifecycle table, argument checks.

Owning these in one place is what lets the backends agree exactly (the differential tests check it).
This module knows nothing of files, topics, cursors or the broker.

Ledger lifecycle::

    OPEN ──seal──▶ SEALED
      │               │
      └──delete──▶ DELETED ◀──delete
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from magnetar.core.lifecycle import Transitions
from magnetar.storage.api import EntryNotFound, LedgerSealed, StorageError, StorageIOError

#: Largest entry payload accepted by ``append`` (Pulsar's default max message size is 5 MiB).
ENTRY_BYTES_MAX = 16 * 1024 * 1024
#: Ledger ids start here and only grow.
FIRST_LEDGER_ID = 1


class LedgerState(enum.Enum):
    OPEN = "open"
    SEALED = "sealed"
    DELETED = "deleted"


LEDGER_TRANSITIONS = Transitions(LedgerState, {
    LedgerState.OPEN: {LedgerState.SEALED, LedgerState.DELETED},
    LedgerState.SEALED: {LedgerState.DELETED},
    LedgerState.DELETED: set(),
})


def check_transition(ledger_id: int, current: LedgerState, target: LedgerState) -> None:
    """Assert a lifecycle edge is legal; an illegal one is a bug in the store, not a user error."""
    LEDGER_TRANSITIONS.check(current, target, f"ledger {ledger_id}")


def check_appendable(ledger_id: int, state: LedgerState) -> None:
    if state is LedgerState.SEALED:
        raise LedgerSealed(f"ledger {ledger_id} is sealed", ledger_id=ledger_id)


def check_not_broken(ledger_id: int, broken: bool) -> None:
    if broken:
        raise StorageIOError(
            f"ledger {ledger_id} takes no more appends after a failed one; seal it", ledger_id=ledger_id
        )


def check_entry_size(ledger_id: int, size_bytes: int) -> None:
    if size_bytes > ENTRY_BYTES_MAX:
        raise StorageError(
            f"entry of {size_bytes} bytes exceeds {ENTRY_BYTES_MAX} bytes", ledger_id=ledger_id
        )


def copy_metadata(custom_metadata: Mapping[str, str]) -> dict[str, str]:
    """A private copy, checked to be str -> str (it is persisted as JSON by the embedded store)."""
    copied = dict(custom_metadata)
    for key, value in copied.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("custom metadata must map str to str")
    return copied


def check_range(ledger_id: int, first_entry: int, last_entry: int, entries: int) -> None:
    """EntryNotFound unless ``first..last`` is a non-empty range of existing entries."""
    if first_entry < 0:
        raise EntryNotFound(f"ledger {ledger_id}: no entry {first_entry}", ledger_id, first_entry)
    if last_entry < first_entry:
        raise EntryNotFound(
            f"ledger {ledger_id}: empty range {first_entry}..{last_entry}", ledger_id, last_entry
        )
    if last_entry >= entries:
        missing = max(first_entry, entries)
        raise EntryNotFound(f"ledger {ledger_id}: no entry {missing} (has {entries})", ledger_id, missing)
