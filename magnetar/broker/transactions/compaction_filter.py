"""A topic's transaction buffer as compaction's transaction filter (``broker/compaction/txn.py``'s
``TxnFilter``, met structurally: nothing of compaction is imported): aborted transactions' entries are
left out of the compacted view, and nothing after the first open transaction is folded in.
"""

from __future__ import annotations

from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.buffer import txn_of
from magnetar.ledger.api import Position


class AbortedIndex(Protocol):
    """What :class:`BufferFilter` needs of a transaction buffer."""

    def is_aborted(self, txn: TxnId) -> bool: ...

    def max_read_position(self) -> Position | None: ...


class BufferFilter:
    def __init__(self, buffer: AbortedIndex) -> None:
        self._buffer = buffer

    async def is_aborted(self, position: Position, metadata: proto.pb.MessageMetadata) -> bool:
        txn = txn_of(metadata)
        return txn is not None and self._buffer.is_aborted(txn)

    def max_read_position(self, last_confirmed: Position) -> Position:
        limit = self._buffer.max_read_position()
        return last_confirmed if limit is None else min(last_confirmed, limit)
