"""Releasing and replaying records of a (possibly batched) transaction or pending-ack log.

A record is released when its transaction has ended: a plain entry is acked whole on the log's cursor; a
record inside a batched entry has its batch index acked (the batch-index ack sets consumers use), and the
entry goes once every index is acked. Replay reads the log from the cursor, skipping acked entries and
acked indexes, so a restart never sees a released record again, whatever mix of plain and batched entries
the log holds (batching can be switched at runtime).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from magnetar.broker.transactions.buffered_writer import RecordPosition
from magnetar.ledger.api import Cursor
from magnetar.ledger.bitset import all_set, int_to_words, words_to_int
from magnetar.protocol.txn_log_batch import LogKind, decode_entry, is_batched

REPLAY_READ_ENTRIES = 100


def release(cursor: Cursor, position: RecordPosition) -> None:
    """The record at ``position`` is no longer needed by anyone."""
    if not position.batched:
        cursor.acknowledge([position.entry])
        return
    _release_index(cursor, position)


def release_all(cursor: Cursor, positions: Iterable[RecordPosition]) -> None:
    """The records at ``positions`` are no longer needed: the plain entries acked in one call."""
    plain = []
    for position in positions:
        if position.batched:
            _release_index(cursor, position)
        else:
            plain.append(position.entry)
    if plain:
        cursor.acknowledge(plain)


def _release_index(cursor: Cursor, position: RecordPosition) -> None:
    words = cursor.batch_ack_set(position.entry)
    unacked = all_set(position.batch_size) if words is None else words_to_int(words, position.batch_size)
    unacked &= ~(1 << position.batch_index)
    cursor.acknowledge_batch_indexes(position.entry, int_to_words(unacked), position.batch_size)


async def replay(cursor: Cursor, kind: LogKind) -> AsyncIterator[tuple[RecordPosition, bytes]]:
    """Every record not yet released, in log order. Rewinds ``cursor`` (a log's own cursor, read by no
    one else) and leaves its read position at the end."""
    cursor.rewind()
    while batch := await cursor.read_entries(REPLAY_READ_ENTRIES):  # each pass moves forward or stops
        for entry in batch:
            records = decode_entry(kind, entry.data)
            if not is_batched(entry.data):
                yield RecordPosition(entry.position.ledger_id, entry.position.entry_id, 1, 0), records[0]
                continue
            size = len(records)
            words = cursor.batch_ack_set(entry.position)
            unacked = all_set(size) if words is None else words_to_int(words, size)
            for index, record in enumerate(records):
                if unacked >> index & 1:
                    yield RecordPosition(entry.position.ledger_id, entry.position.entry_id, size, index), record
