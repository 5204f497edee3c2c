"""Metadata keys and the JSON records of a managed ledger and of its durable cursors.

Owns the on-metadata format (and only that): where records live and how they are encoded and checked.
Knows nothing of storage or of how the records are used.

Keys::

    /managed-ledgers/<name>                                  managed-ledger record
    /managed-ledgers/<name>/cursors/<percent-encoded cursor> cursor record

Managed-ledger record (UTF-8 JSON, compact separators)::

    {"format": 1,
     "ledgers": [[ledger_id, entries, size_bytes, created_ms], ...],   # ascending ids; last = current
     "properties": {"k": "v", ...}}

An offloaded ledger (tiered storage) has a fifth element, its offload context::

    {"driver": "aws-s3", "bucket": "b", "prefix": "p/", "uuid": "...", "complete": true,
     "deleted": false, "ts": 1700000000000}      # deleted: the local copy is gone (bookkeeperDeleted)

Entry counts and sizes are exact for every ledger but the last, whose numbers are as of the last rollover
or close (recovery takes the real ones from storage).

Cursor record::

    {"format": 1,
     "mark_delete": [ledger_id, entry_id],
     "ranges": [[first_ledger, first_entry, last_ledger, last_entry], ...],   # closed, acked, ascending
     "batches": [[ledger_id, entry_id, [word, ...]], ...],                     # unacked bits, int64 words
     "properties": {"k": int, ...}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from magnetar.ledger.api import LedgerOffload, LedgerSummary, ManagedLedgerError, Position
from magnetar.storage.offload.api import OffloadContext

ROOT_KEY = "/managed-ledgers"
CURSORS_SEGMENT = "cursors"
FORMAT = 1


class CorruptMetadata(ManagedLedgerError):
    """A record under /managed-ledgers could not be decoded."""


def ledger_key(name: str) -> str:
    if not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise ManagedLedgerError(f"invalid managed-ledger name {name!r}")
    return f"{ROOT_KEY}/{name}"


def cursors_key(name: str) -> str:
    return f"{ledger_key(name)}/{CURSORS_SEGMENT}"


def cursor_key(name: str, cursor: str) -> str:
    if not cursor:
        raise ManagedLedgerError("a cursor name must not be empty")
    return f"{cursors_key(name)}/{quote(cursor, safe='')}"


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    ledgers: tuple[LedgerSummary, ...]
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CursorRecord:
    mark_delete: Position
    ranges: tuple[tuple[Position, Position], ...] = ()
    batches: tuple[tuple[Position, tuple[int, ...]], ...] = ()
    properties: Mapping[str, int] = field(default_factory=dict)


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptMetadata(f"{what}: not JSON") from exc
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CorruptMetadata(f"{what}: unknown format")
    return obj


def _encode_summary(x: LedgerSummary) -> list[object]:
    item: list[object] = [x.ledger_id, x.entries, x.size_bytes, x.created_ms]
    if x.offload is not None:
        c = x.offload.context
        item.append({"driver": c.driver, "bucket": c.bucket, "prefix": c.prefix, "uuid": c.uuid,
                     "complete": x.offload.complete, "deleted": x.offload.local_deleted, "ts": x.offload.timestamp_ms})
    return item


def _decode_summary(item: list[Any]) -> LedgerSummary:
    ledger_id, entries, size_bytes, created_ms = (int(v) for v in item[:4])
    offload = None
    if len(item) == 5:
        o = item[4]
        context = OffloadContext(str(o["driver"]), str(o["bucket"]), str(o["prefix"]), str(o["uuid"]), ledger_id)
        offload = LedgerOffload(context, bool(o["complete"]), bool(o["deleted"]), int(o["ts"]))
    elif len(item) != 4:
        raise ValueError("a ledger has 4 or 5 fields")
    return LedgerSummary(ledger_id, entries, size_bytes, created_ms, offload)


def encode_ledger(record: LedgerRecord) -> bytes:
    ledgers = [_encode_summary(x) for x in record.ledgers]
    return _dump({"format": FORMAT, "ledgers": ledgers, "properties": dict(record.properties)})


def decode_ledger(data: bytes, what: str) -> LedgerRecord:
    obj = _load(data, what)
    try:
        ledgers = tuple(_decode_summary(item) for item in obj["ledgers"])
        properties = {str(k): str(v) for k, v in obj.get("properties", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadata(f"{what}: bad managed-ledger record") from exc
    ids = [x.ledger_id for x in ledgers]
    if ids != sorted(set(ids)):
        raise CorruptMetadata(f"{what}: ledger ids not ascending")
    return LedgerRecord(ledgers, properties)


def encode_cursor(record: CursorRecord) -> bytes:
    md = record.mark_delete
    return _dump(
        {
            "format": FORMAT,
            "mark_delete": [md.ledger_id, md.entry_id],
            "ranges": [[f.ledger_id, f.entry_id, la.ledger_id, la.entry_id] for f, la in record.ranges],
            "batches": [[p.ledger_id, p.entry_id, list(words)] for p, words in record.batches],
            "properties": dict(record.properties),
        }
    )


def decode_cursor(data: bytes, what: str) -> CursorRecord:
    obj = _load(data, what)
    try:
        md_ledger, md_entry = obj["mark_delete"]
        ranges = tuple(
            (Position(int(a), int(b)), Position(int(c), int(d))) for a, b, c, d in obj.get("ranges", [])
        )
        batches = tuple(
            (Position(int(a), int(b)), tuple(int(w) for w in words)) for a, b, words in obj.get("batches", [])
        )
        properties = {str(k): int(v) for k, v in obj.get("properties", {}).items()}
        return CursorRecord(Position(int(md_ledger), int(md_entry)), ranges, batches, properties)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptMetadata(f"{what}: bad cursor record") from exc
