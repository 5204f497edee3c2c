"""Which ledgers of a managed ledger may be trimmed: consumed by every durable cursor and past retention.

Pulsar's rule (``ManagedLedgerImpl.internalTrimLedgers``), kept: walk the ledgers oldest first, up to the
one holding the slowest cursor's first unacknowledged entry, never the current ledger; a ledger goes if its
retention time expired *or* the managed ledger is over its retention size without it; the walk stops at
the first ledger that must be kept, so trimming only ever removes a prefix. With no durable cursor, every
ledger but the current one counts as consumed (Pulsar does the same).

A ledger's age is measured from when its last entry could have been written: the creation time of the
next ledger (a rollover seals a ledger before it creates the next), an upper bound on its close time.

Pure logic over summaries and positions: no I/O, no asyncio, no metadata. The managed ledger applies the
result (record first, then storage: one phase; PIP-186's two-phase deletion will reuse this selection).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from magnetar.ledger.api import LedgerSummary, Position, RetentionPolicy


def first_unconsumed_ledger(ledgers: Sequence[LedgerSummary], mark_deletes: Iterable[Position]) -> int:
    """The id of the first ledger some durable cursor has not consumed entirely (the current ledger's id
    when every cursor is at the end, or when there is no cursor)."""
    current = ledgers[-1].ledger_id
    slowest = min(mark_deletes, default=None)
    if slowest is None:
        return current
    for ledger in ledgers:  # bounded by the number of ledgers
        if ledger.ledger_id > slowest.ledger_id:
            return ledger.ledger_id
        if ledger.ledger_id == slowest.ledger_id and slowest.entry_id < ledger.entries - 1:
            return ledger.ledger_id
    return current


def _expired(policy: RetentionPolicy, closed_ms: int, now_ms: int) -> bool:
    return policy.time_ms >= 0 and now_ms - closed_ms > policy.time_ms


def _over_size(policy: RetentionPolicy, remaining_bytes: int) -> bool:
    return policy.size_bytes >= 0 and remaining_bytes > policy.size_bytes


def ledgers_to_trim(
    ledgers: Sequence[LedgerSummary],
    mark_deletes: Iterable[Position],
    policy: RetentionPolicy,
    now_ms: int,
) -> list[LedgerSummary]:
    """The prefix of ``ledgers`` (ascending, last = current) that may go now."""
    if len(ledgers) < 2:
        return []
    limit = first_unconsumed_ledger(ledgers, mark_deletes)
    remaining_bytes = sum(x.size_bytes for x in ledgers)
    chosen: list[LedgerSummary] = []
    for ledger, successor in itertools.pairwise(ledgers):  # never the current ledger
        if ledger.ledger_id >= limit:
            break
        if not (_expired(policy, successor.created_ms, now_ms) or _over_size(policy, remaining_bytes)):
            break
        chosen.append(ledger)
        remaining_bytes -= ledger.size_bytes
    return chosen
