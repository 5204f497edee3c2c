"""Offsets: per topic partition, the id of the last message consumed (the next read starts after it).

An offset is a ``MessageId`` without its partition, written as ``[ledgerId, entryId, batchIndex]``;
``[-1, -1, -1]`` means "before the first message". A source offset is ``{"partitions": {topic: id}}``
with topics in sorted order, so its JSON is canonical (Spark compares offsets as strings). The
user's ``startingOffsets``/``endingOffsets`` JSON uses the same shape per partition, or the words
``earliest``/``latest``. Pure logic: knows nothing of Spark or of the network.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from magnetar.client import EARLIEST, Message, MessageId
from magnetar.spark.options import OptionError

__all__ = [
    "BEFORE_FIRST",
    "after",
    "decode_id",
    "encode_id",
    "from_source_offset",
    "is_past",
    "parse_user_offsets",
    "reaches",
    "to_source_offset",
]

BEFORE_FIRST: Final = MessageId(EARLIEST.ledger_id, EARLIEST.entry_id, -1)


def encode_id(mid: MessageId) -> list[int]:
    return [mid.ledger_id, mid.entry_id, mid.batch_index]


def decode_id(raw: Any, *, where: str = "offset") -> MessageId:
    if isinstance(raw, list | tuple) and len(raw) in (2, 3) and all(isinstance(x, int) for x in raw):
        return MessageId(raw[0], raw[1], raw[2] if len(raw) == 3 else -1)
    raise OptionError(f"{where}: a message id is [ledgerId, entryId, batchIndex], got {raw!r}")


def to_source_offset(ids: Mapping[str, MessageId]) -> dict[str, Any]:
    return {"partitions": {topic: encode_id(ids[topic]) for topic in sorted(ids)}}


def from_source_offset(offset: Mapping[str, Any]) -> dict[str, MessageId]:
    parts = offset.get("partitions", {})
    return {topic: decode_id(raw, where=f"offset of {topic}") for topic, raw in parts.items()}


def parse_user_offsets(raw: str, option: str) -> dict[str, MessageId | str]:
    """``{"topic-partition-0": [l, e, b] | "earliest" | "latest"}`` as given in an option."""
    parsed = json.loads(raw)
    out: dict[str, MessageId | str] = {}
    for topic, value in parsed.items():
        if isinstance(value, str) and value.lower() in ("earliest", "latest"):
            out[topic] = value.lower()
        else:
            out[topic] = decode_id(value, where=f"{option} for {topic}")
    return out


def after(a: MessageId, b: MessageId) -> bool:
    """Whether ``a`` is a later position than ``b`` (a whole entry, batch index -1, ends after its messages)."""
    if a.entry != b.entry:
        return a.entry > b.entry
    if b.batch_index < 0:
        return False
    return a.batch_index < 0 or a.batch_index > b.batch_index


def is_past(msg: MessageId, end: MessageId) -> bool:
    """Whether a message lies beyond the inclusive ``end`` of a range."""
    return after(msg, end)


def reaches(msg: Message, end: MessageId) -> bool:
    """Whether ``msg`` is the last message of a range ending at ``end`` (inclusive)."""
    mid = msg.message_id
    if mid.entry != end.entry:
        return mid.entry > end.entry
    if end.batch_index < 0:
        return mid.batch_index < 0 or mid.batch_index >= msg.batch_size - 1
    return mid.batch_index >= end.batch_index


def inclusive_to_exclusive(first: MessageId) -> MessageId:
    """The exclusive start that makes ``first`` the first message read."""
    if first.batch_index > 0:
        return MessageId(first.ledger_id, first.entry_id, first.batch_index - 1)
    return MessageId(first.ledger_id, first.entry_id - 1, -1)


def contiguous(start: MessageId, first: MessageId) -> bool:
    """Whether nothing can be missing between ``start`` and the first message read after it: retention
    removes whole ledgers, oldest first, so within one ledger the entries that follow are all there."""
    return start == BEFORE_FIRST or first.ledger_id == start.ledger_id
