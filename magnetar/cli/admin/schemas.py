"""``magnetar admin schemas get|upload|delete|extract|compatibility`` and the namespaces' schema policy verbs,
as pulsar-admin spells them. ``extract`` reads a schema from a Python ``pulsar.schema.Record`` class
(``-c module:Class``), where pulsar-admin reads a Java class from a jar."""

from __future__ import annotations

import argparse
import importlib
import json
import urllib.parse
from pathlib import Path
from typing import Any

from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from magnetar.cli.admin.base import FORCE, NS, TOPIC, Call, UsageError, Verb, ns_path


def schema_path(name: str) -> str:
    try:
        t = TopicName.parse(name)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
    return f"/admin/v2/schemas/{t.tenant}/{t.namespace}/{urllib.parse.quote(t.local_name, safe='')}"


def _get(a: argparse.Namespace) -> Call:
    if a.all_version:
        return Call("GET", schema_path(a.topic) + "/schemas")
    suffix = f"/schema/{a.version}" if a.version is not None else "/schema"
    return Call("GET", schema_path(a.topic) + suffix)


def _payload_file(path: str) -> dict[str, Any]:
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read schema file {path}: {exc}") from exc
    if not isinstance(payload, dict) or "type" not in payload:
        raise UsageError(f"{path}: expected a JSON object with type, schema and properties")
    return payload


def _record_class(spec: str) -> Any:
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise UsageError("--classname must be module:Class (a pulsar.schema.Record subclass)")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {spec}: {exc}") from exc


def extracted_payload(spec: str, kind: str) -> dict[str, Any]:
    """The upload payload of a Python ``Record`` class, as the official client would declare it."""
    from pulsar.schema import AvroSchema, JsonSchema

    record = _record_class(spec)
    schema = (AvroSchema if kind == "avro" else JsonSchema)(record)
    info = schema.schema_info()
    return {"type": kind.upper(), "schema": info.schema(), "properties": {}}


def _extract(a: argparse.Namespace) -> Call:
    return Call("POST", schema_path(a.topic) + "/schema", extracted_payload(a.classname, a.type))


def schema_verbs() -> list[Verb]:
    file_: tuple[tuple[str, ...], dict[str, Any]] = (
        ("-f", "--filename"), {"required": True, "help": "JSON file: {type, schema, properties}"})
    enable = ((("--enable",), {"action": "store_true"}), (("--disable",), {"action": "store_true"}))
    strategy = (("-c", "--compatibility"), {"required": True,
                                            "help": "ALWAYS_COMPATIBLE, ALWAYS_INCOMPATIBLE, BACKWARD, FORWARD, "
                                                    "FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE"})

    def switch(a: argparse.Namespace) -> bool:
        if a.enable == a.disable:
            raise UsageError("give exactly one of --enable or --disable")
        return bool(a.enable)

    return [
        Verb("schemas", ("get",), (TOPIC, (("-v", "--version"), {"type": int}),
                                   (("-a", "--all-version"), {"action": "store_true"})), _get,
             "get the latest schema, one version (-v) or all versions (-a)"),
        Verb("schemas", ("upload",), (TOPIC, file_),
             lambda a: Call("POST", schema_path(a.topic) + "/schema", _payload_file(a.filename)),
             "upload a schema version from a file"),
        Verb("schemas", ("delete",), (TOPIC, FORCE),
             lambda a: Call("DELETE", schema_path(a.topic) + "/schema", query={"force": "true"} if a.force else None),
             "delete the schema (force: every version)"),
        Verb("schemas", ("extract",), (TOPIC, (("-c", "--classname"), {"required": True,
                                                                     "help": "module:Class of a pulsar.schema.Record"}),
                                       (("-t", "--type"), {"required": True, "choices": ["avro", "json"]})),
             _extract, "upload the schema of a Python Record class"),
        Verb("schemas", ("compatibility",), (TOPIC, file_),
             lambda a: Call("POST", schema_path(a.topic) + "/compatibility", _payload_file(a.filename)),
             "test a schema file against the topic's versions"),
        Verb("namespaces", ("set-schema-compatibility-strategy",), (NS, strategy),
             lambda a: Call("PUT", ns_path(a.namespace) + "/schemaCompatibilityStrategy", a.compatibility.upper()),
             "set the schema compatibility strategy"),
        Verb("namespaces", ("get-schema-compatibility-strategy",), (NS,),
             lambda a: Call("GET", ns_path(a.namespace) + "/schemaCompatibilityStrategy"),
             "get the schema compatibility strategy"),
        Verb("namespaces", ("set-is-allow-auto-update-schema",), (NS, *enable),
             lambda a: Call("POST", ns_path(a.namespace) + "/isAllowAutoUpdateSchema", switch(a)),
             "let clients add schema versions (or not)"),
        Verb("namespaces", ("get-is-allow-auto-update-schema",), (NS,),
             lambda a: Call("GET", ns_path(a.namespace) + "/isAllowAutoUpdateSchema"),
             "whether clients may add schema versions"),
        Verb("namespaces", ("set-schema-validation-enforce",), (NS, *enable),
             lambda a: Call("POST", ns_path(a.namespace) + "/schemaValidationEnforced", switch(a)),
             "refuse producers without a schema on topics with one (or not)"),
        Verb("namespaces", ("get-schema-validation-enforce",), (NS,),
             lambda a: Call("GET", ns_path(a.namespace) + "/schemaValidationEnforced"),
             "whether producers need a schema on topics with one"),
    ]
