"""What every resource module shares: a decoded value with its version, and the JSON codec of the records.

Values are written as ``json.dumps(value).encode()`` (the bytes every earlier version of magnetar wrote, so a
data directory reads the same). A record that is not a JSON object reads as an empty one, with a warning:
defaults apply, as if the record held nothing, and a later write replaces it whole.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

log = logging.getLogger("magnetar.resources")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A decoded record and the version a compare-and-set write must name to replace it."""

    value: T
    version: int


def encode(value: object) -> bytes:
    return json.dumps(value).encode()


def decode_object(raw: bytes, key: str) -> dict[str, Any]:
    """The JSON object stored at ``key`` ({} for an empty or unreadable record, which is logged)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        log.warning("the record at %s is not JSON: it reads as empty (defaults apply)", key)
        return {}
    if not isinstance(value, dict):
        log.warning("the record at %s is not a JSON object: it reads as empty (defaults apply)", key)
        return {}
    return value
