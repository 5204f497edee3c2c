"""The deletion topics' messages: ordinary Pulsar message entries whose body is PIP-186's
``PendingDeleteLedgerInfo`` as JSON (Pulsar's field names), so any client can read the topic.

A retried message carries Pulsar's retry-letter property ``RECONSUMETIMES`` and a ``deliver_at_time``.
Anything that does not decode is :class:`InvalidDeletionMessage`: the service acks it, counts it and
deletes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from magnetar import protocol as proto
from magnetar.ledger.deletion import LedgerComponent, LedgerType, PendingDeleteLedger

PRODUCER_NAME = "pulsar.ledger-deletion"
RECONSUME_TIMES = "RECONSUMETIMES"
#: a deletion message is small; anything larger is not one of ours
MESSAGE_BYTES_MAX = 64 * 1024


class InvalidDeletionMessage(Exception):
    pass


@dataclass(frozen=True, slots=True)
class DeletionMessage:
    request: PendingDeleteLedger
    reconsume_times: int = 0
    deliver_at_ms: int | None = None


def to_json(request: PendingDeleteLedger) -> dict[str, Any]:
    return {
        "topicName": request.topic,
        "ledgerComponent": request.component.value,
        "cursorName": request.cursor_name,
        "schemaId": request.schema_id,
        "ledgerType": request.ledger_type.value,
        "ledgerId": request.ledger_id,
        "offloadContext": dict(request.offload_context) if request.offload_context is not None else None,
    }


def encode(message: DeletionMessage, *, publish_time_ms: int, sequence_id: int) -> bytes:
    metadata = proto.pb.MessageMetadata(
        producer_name=PRODUCER_NAME, sequence_id=sequence_id, publish_time=publish_time_ms,
        partition_key=str(message.request.ledger_id),
    )
    if message.reconsume_times:
        metadata.properties.add(key=RECONSUME_TIMES, value=str(message.reconsume_times))
    if message.deliver_at_ms is not None:
        metadata.deliver_at_time = message.deliver_at_ms
    return proto.make_entry(metadata, json.dumps(to_json(message.request)).encode())


def _text(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidDeletionMessage(f"{what} must be a non-empty string")
    return value


def request_from_json(body: Any) -> PendingDeleteLedger:
    if not isinstance(body, dict):
        raise InvalidDeletionMessage("the body is not a JSON object")
    ledger_id = body.get("ledgerId")
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int) or ledger_id < 0:
        raise InvalidDeletionMessage("ledgerId must be a non-negative integer")
    try:
        component = LedgerComponent(body.get("ledgerComponent"))
        ledger_type = LedgerType(body.get("ledgerType"))
    except ValueError as exc:
        raise InvalidDeletionMessage(str(exc)) from None
    context = body.get("offloadContext")
    if context is not None and not (isinstance(context, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in context.items())):
        raise InvalidDeletionMessage("offloadContext must map strings to strings")
    schema_id = body.get("schemaId")
    return PendingDeleteLedger(
        topic=str(_text(body.get("topicName"), "topicName")),
        ledger_id=ledger_id,
        component=component,
        ledger_type=ledger_type,
        cursor_name=_text(body.get("cursorName"), "cursorName", optional=True),
        schema_id=None if schema_id is None else str(schema_id),
        offload_context=context,
    )


def decode(entry: bytes) -> DeletionMessage:
    """The message of a stored entry; InvalidDeletionMessage for anything that is not a valid one."""
    if len(entry) > MESSAGE_BYTES_MAX or not proto.verify_entry(entry):
        raise InvalidDeletionMessage("not an intact message entry")
    try:
        metadata = proto.parse_entry_metadata(entry)
        body = json.loads(bytes(proto.entry_payload(entry)))
    except (proto.ProtocolError, ValueError, RecursionError) as exc:
        raise InvalidDeletionMessage(f"undecodable: {exc}") from None
    times = 0
    for prop in metadata.properties:
        if prop.key == RECONSUME_TIMES:
            try:
                times = max(0, int(prop.value))
            except ValueError:
                raise InvalidDeletionMessage("RECONSUMETIMES is not a number") from None
    deliver_at = metadata.deliver_at_time if metadata.HasField("deliver_at_time") else None
    return DeletionMessage(request_from_json(body), times, deliver_at)
