"""The plug point through which transactions keep aborted and open messages out of a compacted view.

The compactor asks :meth:`TxnFilter.is_aborted` about each transactional entry (metadata with txnid bits)
and compacts only up to :meth:`TxnFilter.max_read_position` (nothing of a still-open transaction may be
folded in). :class:`BufferFilter` answers from a topic's transaction buffer; a topic without one uses
:class:`NoTransactions` ("never aborted", "up to the end").
"""

from __future__ import annotations

from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.buffer import txn_of
from magnetar.ledger.api import Position


class TxnFilter(Protocol):
    async def is_aborted(self, position: Position, metadata: proto.pb.MessageMetadata) -> bool: ...

    def max_read_position(self, last_confirmed: Position) -> Position: ...


class NoTransactions:
    async def is_aborted(self, position: Position, metadata: proto.pb.MessageMetadata) -> bool:
        return False

    def max_read_position(self, last_confirmed: Position) -> Position:
        return last_confirmed


def is_transactional(metadata: proto.pb.MessageMetadata) -> bool:
    return metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits")


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
