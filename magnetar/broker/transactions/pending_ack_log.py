"""The pending-ack log of one subscription: what transactional acks are waiting, durable across crashes.

Each record is one transactional ACK (the txn, individual or cumulative, the positions with the batch
indexes acked) or the end of a transaction on the subscription (commit or abort, written after the outcome
is applied). Replaying the log in order rebuilds the acks still pending. Records are small JSON documents
with a version, one per ledger entry; PIP-160's batched writer slots in behind :class:`PendingAckLog` (the
store only appends records and replays them).

The log is a managed ledger named ``{topic}-{subscription}__transaction_pending_ack`` in the topic's
namespace, as Pulsar names it. Knows nothing of cursors' meaning or of dispatch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.names import TopicName
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.ledger.api import EntryCorruptedError, ManagedLedger, Position

PENDING_ACK_SUFFIX = "__transaction_pending_ack"
RECORD_VERSION = 1
REPLAY_BATCH_ENTRIES = 256
WHOLE = -1  # the mask of an ack of a whole entry


def pending_ack_topic(topic: TopicName, subscription: str) -> TopicName:
    local = f"{topic.local_name}-{subscription}{PENDING_ACK_SUFFIX}"
    return TopicName(topic.domain, topic.tenant, topic.namespace, local)


def is_transaction_internal(managed_ledger_name: str) -> bool:
    """Pending-ack logs are storage, not topics: listings leave them out (regex consumers must not see them)."""
    return managed_ledger_name.endswith(PENDING_ACK_SUFFIX)


@dataclass(frozen=True, slots=True)
class AckedId:
    """One acked entry: ``mask`` is the batch indexes acked (an int bit set) or WHOLE for the whole entry."""

    position: Position
    mask: int
    batch_size: int


@dataclass(frozen=True, slots=True)
class AckRecord:
    txn: TxnId
    cumulative: bool
    ids: tuple[AckedId, ...]


@dataclass(frozen=True, slots=True)
class EndRecord:
    txn: TxnId
    action: TxnAction


Record = AckRecord | EndRecord


def encode_record(record: Record) -> bytes:
    doc: dict[str, object]
    if isinstance(record, AckRecord):
        ids = [[i.position.ledger_id, i.position.entry_id, i.mask, i.batch_size] for i in record.ids]
        doc = {"v": RECORD_VERSION, "t": "ack", "txn": [record.txn.most, record.txn.least],
               "cumulative": record.cumulative, "ids": ids}
    else:
        doc = {"v": RECORD_VERSION, "t": "end", "txn": [record.txn.most, record.txn.least],
               "action": int(record.action)}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_record(data: bytes) -> Record:
    """Raises ValueError for a record this code cannot read."""
    try:
        doc = json.loads(data)
        if doc["v"] != RECORD_VERSION:
            raise ValueError(f"unknown pending-ack record version {doc['v']!r}")
        txn = TxnId(int(doc["txn"][0]), int(doc["txn"][1]))
        if doc["t"] == "end":
            return EndRecord(txn, TxnAction(int(doc["action"])))
        if doc["t"] != "ack":
            raise ValueError(f"unknown pending-ack record type {doc['t']!r}")
        ids = tuple(
            AckedId(Position(int(lid), int(eid)), int(mask), int(size)) for lid, eid, mask, size in doc["ids"]
        )
        return AckRecord(txn, bool(doc["cumulative"]), ids)
    except (KeyError, TypeError, IndexError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable pending-ack record: {exc}") from exc


class PendingAckLog(Protocol):
    """Where a pending-ack store writes (PIP-160 batches behind this)."""

    async def append(self, record: Record) -> Position: ...

    async def replay(self) -> Sequence[tuple[Position, Record]]: ...

    async def close(self) -> None: ...

    async def delete(self) -> None: ...


class ManagedLedgerAckLog:
    """One record per entry of the subscription's pending-ack managed ledger."""

    def __init__(self, ledger: ManagedLedger) -> None:
        self._ledger = ledger
        self.records_appended = 0

    @property
    def name(self) -> str:
        return self._ledger.name

    async def append(self, record: Record) -> Position:
        position = await self._ledger.add_entry(encode_record(record))
        self.records_appended += 1
        return position

    async def replay(self) -> list[tuple[Position, Record]]:
        cursor = self._ledger.new_non_durable_cursor(self._ledger.next_valid_position(self._ledger.first_position()),
                                                     "__pending_ack_replay")
        last = self._ledger.last_confirmed
        records: list[tuple[Position, Record]] = []
        try:
            while True:  # bounded: reads stop at the last entry confirmed when replay began
                try:
                    entries = await cursor.read_entries(REPLAY_BATCH_ENTRIES, max_position=last)
                except EntryCorruptedError as exc:
                    cursor.seek(self._ledger.next_valid_position(exc.position))
                    continue
                if not entries:
                    return records
                records.extend((e.position, decode_record(e.data)) for e in entries)
        finally:
            await cursor.close()

    async def close(self) -> None:
        await self._ledger.close()

    async def delete(self) -> None:
        await self._ledger.delete()
