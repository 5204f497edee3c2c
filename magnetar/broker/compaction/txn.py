"""The plug point through which transactions keep aborted and open messages out of a compacted view.

The compactor asks :meth:`TxnFilter.is_aborted` about each transactional entry (metadata with txnid bits)
and compacts only up to :meth:`TxnFilter.max_read_position` (nothing of a still-open transaction may be
folded in). Transactions supply the filter of a topic with a transaction buffer
(``broker/transactions/compaction_filter.py``, wired by the composition root); a topic without one uses
:class:`NoTransactions` ("never aborted", "up to the end").
"""

from __future__ import annotations

from typing import Protocol

from magnetar import protocol as proto
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
