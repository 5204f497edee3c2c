"""The topic side of transactions as operators see it, in Pulsar's JSON shapes: ``TransactionBufferStats``,
``TransactionPendingAckStats``, ``TransactionInBufferStats``, ``TransactionInPendingAckStats`` and the three
transaction counters of ``TopicStats``. Pure functions over the buffer and pending-ack stores.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.buffer import TransactionBuffer
from magnetar.broker.transactions.pending_ack import PendingAckStore
from magnetar.broker.transactions.topic_txn import TopicTransactions
from magnetar.ledger.api import Position


def _pos(position: Position | None) -> str | None:
    return None if position is None else f"{position.ledger_id}:{position.entry_id}"


def topic_counts(txn: TopicTransactions | None) -> dict[str, int]:
    """``ongoingTxnCount``, ``abortedTxnCount``, ``committedTxnCount`` of TopicStats."""
    if txn is None:
        return {"ongoingTxnCount": 0, "abortedTxnCount": 0, "committedTxnCount": 0}
    tb = txn.buffer
    return {
        "ongoingTxnCount": len(tb.ongoing()),
        "abortedTxnCount": tb.aborted_total,
        "committedTxnCount": tb.committed_total,
    }


def buffer_stats(tb: TransactionBuffer, last_confirmed: Position, *, segment_stats: bool = False) -> dict[str, Any]:
    limit = tb.max_read_position()
    stats: dict[str, Any] = {
        "state": tb.state.value,
        "maxReadPosition": _pos(limit if limit is not None else last_confirmed),
        "lastSnapshotTimestamps": tb.last_snapshot_ms,
        "lowWaterMarks": None,
        "ongoingTxnSize": len(tb.ongoing()),
        "recoverStartTime": tb.recover_start_ms,
        "recoverEndTime": tb.recover_end_ms,
        "snapshotStats": None,
    }
    info = tb.snapshot_info()
    stats["snapshotType"] = None if info is None else info.kind.capitalize()  # "Single" or "Multiple" (PIP-178)
    stats["snapshotSegments"] = 0 if info is None else info.segments + 1  # keys with -end (1: one record)
    stats["snapshotAbortedTxnIds"] = 0 if info is None else info.aborted  # in the last snapshot
    stats["totalAbortedTransactions"] = tb.aborted_count()  # in the index now
    if segment_stats:
        segments = 0 if info is None else info.segments
        stats["snapshotStats"] = {"segmentsSize": segments, "unsealedAbortTxnIDs": tb.aborted_count()}
    return stats


def pending_ack_stats(store: PendingAckStore | None) -> dict[str, Any]:
    return {
        "state": "Ready" if store is not None else "None",
        "lowWaterMarks": None,
        "ongoingTxnSize": len(store.in_progress()) if store is not None else 0,
    }


def txn_in_buffer_stats(tb: TransactionBuffer, txn: TxnId) -> dict[str, Any]:
    return {"startPosition": _pos(tb.ongoing().get(txn)), "aborted": tb.is_aborted(txn)}


def txn_in_pending_ack_stats(store: PendingAckStore | None, txn: TxnId) -> dict[str, Any]:
    acks = store.in_progress().get(txn) if store is not None else None
    return {"cumulativeAckPosition": _pos(acks.cumulative if acks is not None else None)}
