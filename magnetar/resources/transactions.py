"""Transactions' records in the metadata store: ``/magnetar/txn-buffer-snapshots/<topic>`` holds a topic's
single-record transaction-buffer snapshot (``broker/transactions/snapshot.py`` owns its format)."""

from __future__ import annotations

from magnetar.resources._names import quoted

TXN_BUFFER_SNAPSHOTS_ROOT = "/magnetar/txn-buffer-snapshots"


def txn_buffer_snapshot_key(topic: str) -> str:
    """``topic`` is the full topic name; it becomes one key segment."""
    return f"{TXN_BUFFER_SNAPSHOTS_ROOT}/{quoted(topic)}"
