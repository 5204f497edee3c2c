"""Compatibility between schema versions under a strategy.

Avro and JSON schemas (both carry an Avro record definition, as Pulsar's clients write them) are checked
by the ``avro`` library's reader/writer resolution: BACKWARD means the new schema can read data written
with the old one, FORWARD the reverse, FULL both. Other types are compatible only with their own type.
A schema nested deeper than the parsers can follow is invalid (never an internal error).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import avro.compatibility as avro_compat
import avro.errors
import avro.schema

from magnetar.broker.schema.types import AVRO_BASED, SchemaInfo, Strategy, type_name


class InvalidSchema(ValueError):
    """Schema data that does not parse as its type says."""


def parse_avro(info: SchemaInfo) -> avro.schema.Schema:
    try:
        return avro.schema.parse(info.data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, avro.errors.AvroException) as exc:
        raise InvalidSchema(f"Invalid {type_name(info.type)} schema: {exc}") from exc
    except RecursionError:  # the JSON or the Avro parser, on a schema nested deeper than the interpreter's stack
        raise InvalidSchema(f"Invalid {type_name(info.type)} schema: nested too deeply") from None


def validate(info: SchemaInfo) -> None:
    if info.type in AVRO_BASED:
        parse_avro(info)


def _reads(reader: SchemaInfo, writer: SchemaInfo) -> bool:
    checker = avro_compat.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    try:
        result = checker.get_compatibility(parse_avro(reader), parse_avro(writer))
    except RecursionError:  # too deep to compare: not shown compatible
        return False
    return result.compatibility == avro_compat.SchemaCompatibilityType.compatible


def _pair_compatible(new: SchemaInfo, old: SchemaInfo, base: str) -> bool:
    if new.type != old.type:
        return False
    if new.type not in AVRO_BASED:
        return True
    backward = base in ("BACKWARD", "FULL")
    forward = base in ("FORWARD", "FULL")
    return (not backward or _reads(new, old)) and (not forward or _reads(old, new))


def incompatibility(new: SchemaInfo, existing: Sequence[SchemaInfo], strategy: Strategy) -> str | None:
    """Why ``new`` may not follow ``existing`` (oldest first) under ``strategy``; None when it may."""
    if not existing or strategy is Strategy.ALWAYS_COMPATIBLE:
        return None
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        return "Schema compatibility strategy is ALWAYS_INCOMPATIBLE"
    against = existing if strategy.transitive else existing[-1:]
    for old in reversed(against):
        if new.type != old.type:
            return (f"Incompatible schema: exists schema type {type_name(old.type)}, "
                    f"new schema type {type_name(new.type)}")
        if not _pair_compatible(new, old, strategy.base):
            return f"Incompatible schema used with {strategy.value} compatibility strategy"
    return None


def is_compatible(new: SchemaInfo, existing: Sequence[SchemaInfo], strategy: Strategy) -> bool:
    return incompatibility(new, existing, strategy) is None
