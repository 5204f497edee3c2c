"""Schema values: a schema as clients declare it, a stored version, the compatibility strategies, and the
names Pulsar's REST API gives the wire's type numbers."""

from __future__ import annotations

import enum
import hashlib
import struct
from dataclasses import dataclass, field

from magnetar.broker.errors import InvalidRequest

#: wire type number (``Schema.Type``) -> Pulsar's ``SchemaType`` name in REST bodies
_TYPE_NAMES: dict[int, str] = {
    0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 6: "INT8", 7: "INT16",
    8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE", 12: "DATE", 13: "TIME", 14: "TIMESTAMP",
    15: "KEY_VALUE", 16: "INSTANT", 17: "LOCAL_DATE", 18: "LOCAL_TIME", 19: "LOCAL_DATE_TIME",
    20: "PROTOBUF_NATIVE", 21: "AUTO_CONSUME", 22: "EXTERNAL",
}
_TYPE_NUMBERS = {name: number for number, name in _TYPE_NAMES.items()}
AVRO_BASED = frozenset({2, 4})  # JSON and AVRO: both carry an Avro record definition
AUTO_CONSUME = 21
SCHEMA_DATA_BYTES_MAX = 1024 * 1024


def type_name(number: int) -> str:
    return _TYPE_NAMES.get(number, f"UNKNOWN_{number}")


def type_number(name: str) -> int:
    try:
        return _TYPE_NUMBERS[name.upper()]
    except KeyError:
        raise InvalidRequest(f"Unknown schema type {name!r}; known: {', '.join(_TYPE_NUMBERS)}") from None


def version_bytes(version: int) -> bytes:
    """Pulsar's ``LongSchemaVersion`` on the wire: 8 bytes, big-endian."""
    return struct.pack(">q", version)


def version_of(raw: bytes) -> int:
    if len(raw) != 8:
        raise InvalidRequest(f"A schema version is 8 bytes, got {len(raw)}")
    return int(struct.unpack(">q", raw)[0])


class Strategy(enum.Enum):
    """``SchemaCompatibilityStrategy``: which earlier versions a new schema is checked against, and how."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, text: str) -> Strategy:
        try:
            return cls(text.strip().upper())
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise InvalidRequest(f"Unknown schema compatibility strategy {text!r}; known: {known}") from None

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def base(self) -> str:
        return self.value.removesuffix("_TRANSITIVE")


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """A schema as a client or an admin declares it."""

    type: int
    data: bytes
    properties: dict[str, str] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        if len(self.data) > SCHEMA_DATA_BYTES_MAX:
            raise InvalidRequest(f"Schema data exceeds {SCHEMA_DATA_BYTES_MAX} bytes")

    @property
    def fingerprint(self) -> str:
        """What makes two declarations the same schema (type and data, as Pulsar's ``SchemaHash``)."""
        return hashlib.sha256(self.type.to_bytes(4, "big", signed=True) + self.data).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredSchema:
    version: int
    info: SchemaInfo
    timestamp_ms: int
    deleted: bool = False  # a delete marker: the versions before it are gone for producers and readers

    def rest(self) -> dict[str, object]:
        """Pulsar's ``GetSchemaResponse``."""
        return {
            "version": self.version,
            "type": type_name(self.info.type),
            "timestamp": self.timestamp_ms,
            "data": self.info.data.decode("utf-8", "replace"),
            "properties": dict(self.info.properties),
        }
