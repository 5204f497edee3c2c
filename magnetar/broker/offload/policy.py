"""Which ledgers an offload takes: by a message id (the admin trigger) or by the namespace's size threshold.

Pulsar's rules, as plain functions over ledger summaries (oldest first, the last one current):

* a trigger with a message id offloads every sealed ledger whose id is below the id's ledger;
* ``offload_threshold`` (bytes kept on local disk; ``managedLedgerOffloadAutoTriggerSizeThresholdBytes`` by
  default; negative: off) walks from the newest ledger back summing sizes; once the sum passes the
  threshold, every older ledger not offloaded yet goes;
* ``offload_deletion_lag_ms`` (``managedLedgerOffloadDeletionLagMs`` by default; negative: never) is how long
  after its copy completed a ledger's local copy is deleted;
* an admin request is kept in a managed-ledger property until it completes, and resumed as a whole.

No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from magnetar.ledger.api import LedgerSummary, Position


@dataclass(frozen=True, slots=True)
class OffloadPolicies:
    threshold_bytes: int  # < 0: no automatic offload
    deletion_lag_ms: int  # < 0: local copies stay


def _int_or(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def resolve(namespace_policies: Mapping[str, Any], threshold_default: int, lag_default: int) -> OffloadPolicies:
    """The namespace's ``offload_threshold`` / ``offload_deletion_lag_ms`` where set, the broker's elsewhere."""
    threshold = _int_or(namespace_policies.get("offload_threshold"), threshold_default)
    lag = _int_or(namespace_policies.get("offload_deletion_lag_ms"), lag_default)
    return OffloadPolicies(threshold, lag)


def sealed(ledgers: Sequence[LedgerSummary]) -> list[LedgerSummary]:
    return [x for x in ledgers[:-1] if x.entries > 0]


def before(ledgers: Sequence[LedgerSummary], until: Position) -> list[LedgerSummary]:
    """The sealed ledgers a trigger at message id ``until`` offloads (not offloaded yet)."""
    return [x for x in sealed(ledgers) if x.ledger_id < until.ledger_id and not x.offloaded]


def over_threshold(ledgers: Sequence[LedgerSummary], threshold_bytes: int) -> list[LedgerSummary]:
    """The sealed ledgers beyond the newest ``threshold_bytes`` of the topic (not offloaded yet)."""
    if threshold_bytes < 0 or not ledgers:
        return []
    chosen: list[LedgerSummary] = []
    summed = 0
    for summary in reversed(ledgers):
        summed += summary.size_bytes
        if summed > threshold_bytes and summary is not ledgers[-1] and summary.entries > 0 and not summary.offloaded:
            chosen.append(summary)
    return list(reversed(chosen))


def incomplete(ledgers: Sequence[LedgerSummary]) -> list[LedgerSummary]:
    """Sealed ledgers with an interrupted offload (a crash, a store failure): retried under a fresh uuid."""
    return [x for x in sealed(ledgers) if x.offload is not None and not x.offload.complete]


def due_for_release(ledgers: Sequence[LedgerSummary], lag_ms: int, now_ms: int) -> list[LedgerSummary]:
    """Completely offloaded ledgers whose local copy has outlived the deletion lag."""
    if lag_ms < 0:
        return []
    return [
        x for x in ledgers[:-1]
        if x.offload is not None and x.offload.complete and not x.offload.local_deleted
        and now_ms - x.offload.timestamp_ms >= lag_ms
    ]


def first_unoffloaded(ledgers: Sequence[LedgerSummary]) -> Position:
    """The first entry not in the offload store (Pulsar's firstUnoffloadedMessage)."""
    for summary in ledgers:
        if not summary.offloaded and summary.entries > 0:
            return Position(summary.ledger_id, 0)
    last = ledgers[-1] if ledgers else None
    return Position(last.ledger_id, 0) if last is not None else Position(-1, -1)


def threshold_message_id(ledgers: Sequence[tuple[int, int]], threshold_bytes: int) -> Position | None:
    """What ``topics offload --size-threshold`` asks for, from (ledger id, size) pairs oldest first: the first
    ledger of the newest ``threshold_bytes``, as pulsar-admin computes it (None: nothing to offload)."""
    suffix = 0
    previous = ledgers[-1][0] if ledgers else -1
    for ledger_id, size_bytes in reversed(ledgers):
        suffix += size_bytes
        if suffix > threshold_bytes:
            return Position(previous, 0)
        previous = ledger_id
    return None


#: Managed-ledger property holding an admin-requested offload until it completes ("ledgerId:entryId"; ""
#: when none), so an offload cut short by a crash or a failing store is resumed as a whole after restart.
REQUEST_PROPERTY = "magnetar.offload.requested"


def encode_request(until: Position) -> str:
    return f"{until.ledger_id}:{until.entry_id}"


def requested(properties: Mapping[str, str]) -> Position | None:
    """The persisted request, None when there is none (or it is unreadable: nothing to resume)."""
    ledger, sep, entry = properties.get(REQUEST_PROPERTY, "").partition(":")
    try:
        return Position(int(ledger), int(entry)) if sep else None
    except ValueError:
        return None


def work_due(ledgers: Sequence[LedgerSummary], properties: Mapping[str, str], policies: OffloadPolicies,
             now_ms: int) -> bool:
    """Whether the pass has anything to do for a managed ledger (decided from its stored record)."""
    until = requested(properties)
    return bool(
        (until is not None and before(ledgers, until)) or incomplete(ledgers)
        or over_threshold(ledgers, policies.threshold_bytes)
        or due_for_release(ledgers, policies.deletion_lag_ms, now_ms)
    )
