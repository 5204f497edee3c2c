"""How ``magnetar admin`` prints a message read over REST (peek, examine, get by id), as pulsar-admin does:
its id (``Batch Message ID: L:E:i`` for each message of a batch), publish time, key, properties, and a
hex dump of the payload."""

from __future__ import annotations

import json
from collections.abc import Mapping

from magnetar import protocol as proto

BYTES_PER_LINE = 16


def hex_dump(data: bytes) -> str:
    """Netty's pretty hex dump layout: offset, 16 bytes in hex, the printable characters."""
    rule = "+--------+-------------------------------------------------+----------------+"
    lines = ["         +-------------------------------------------------+",
             "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |", rule]
    for offset in range(0, len(data), BYTES_PER_LINE):
        chunk = data[offset:offset + BYTES_PER_LINE]
        hexes = " ".join(f"{b:02x}" for b in chunk).ljust(3 * BYTES_PER_LINE - 1)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk).ljust(BYTES_PER_LINE)
        lines.append(f"|{offset:08x}| {hexes} |{text}|")
    lines.append(rule)
    return "\n".join(lines)


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _one(label: str, message_id: str, h: Mapping[str, str], key: str | None, props: dict[str, str],
         body: bytes) -> str:
    lines = [f"{label}: {message_id}"]
    if "x-pulsar-publish-time" in h:
        lines.append(f"Publish time: {h['x-pulsar-publish-time']}")
    if key is not None:
        lines.append(f"Key: {key}")
    if props:
        lines.append("Properties:")
        lines.append(json.dumps(props, indent=2, sort_keys=True))
    lines.append(hex_dump(body))
    return "\n".join(lines)


def format_message(headers: Mapping[str, str], body: bytes) -> str:
    h = _headers(headers)
    message_id = h.get("x-pulsar-message-id", "?")
    count = int(h.get("x-pulsar-num-batch-message", "0") or 0)
    if count > 0 and "x-pulsar-compression" not in h:
        try:
            parts = proto.batch.split_batch(body, count)
        except proto.MalformedFrame:
            parts = []
        if parts:
            return "\n".join(
                _one("Batch Message ID", f"{message_id}:{i}", h,
                     single.partition_key if single.HasField("partition_key") else None,
                     {kv.key: kv.value for kv in single.properties}, bytes(data))
                for i, (single, data) in enumerate(parts))
    props = {k[len("x-pulsar-property-"):]: v for k, v in h.items() if k.startswith("x-pulsar-property-")}
    return _one("Message ID", message_id, h, h.get("x-pulsar-key"), props, body)
