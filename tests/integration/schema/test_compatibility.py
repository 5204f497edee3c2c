"""Schema evolution per compatibility strategy, over the admin API of the real broker: each strategy (and
its _TRANSITIVE form) accepts and refuses the versions Apache Pulsar does, by Avro reader/writer rules."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


def avro(*fields: tuple[str, bool]) -> dict[str, Any]:
    """An Avro record ``User`` of int fields; ``(name, True)`` has a default."""
    spec = [{"name": n, "type": "int", **({"default": 0} if d else {})} for n, d in fields]
    return {"type": "AVRO", "schema": json.dumps({"type": "record", "name": "User", "fields": spec}),
            "properties": {}}


A = avro(("a", False))
A0 = avro(("a", True))
A_B0 = avro(("a", False), ("b", True))
A_B = avro(("a", False), ("b", False))
B = avro(("b", False))
C = avro(("c", False))
C0 = avro(("c", True))

# strategy, versions offered in order, whether each after the first is accepted
CASES = [
    ("BACKWARD", [A, A_B0, B], [True, True]),
    ("BACKWARD_TRANSITIVE", [A, A_B0, B], [True, False]),
    ("BACKWARD", [A, A_B], [False]),
    ("FORWARD", [A, A_B], [True]),
    ("FORWARD", [A, A0, C], [True, True]),
    ("FORWARD_TRANSITIVE", [A, A0, C], [True, False]),
    ("FULL", [A, A_B], [False]),
    ("FULL", [A, A0, C0], [True, True]),
    ("FULL_TRANSITIVE", [A, A0, C0], [True, False]),
    ("ALWAYS_INCOMPATIBLE", [A, A_B0, A], [False, True]),  # the same schema again is its existing version
    ("ALWAYS_COMPATIBLE", [A, C, {"type": "STRING", "schema": "", "properties": {}}], [True, True]),
]


@pytest.mark.parametrize(("strategy", "versions", "accepted"), CASES)
def test_strategy_accepts_and_refuses_like_pulsar(
    broker: BrokerProcess, strategy: str, versions: list[dict[str, Any]], accepted: list[bool]
) -> None:
    ns = f"public/compat-{uuid.uuid4().hex[:8]}"
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    assert call(broker.web_url, "PUT", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy", strategy)[0] == 204
    assert call(broker.web_url, "GET", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy") == (200, strategy)
    path = f"/admin/v2/schemas/{ns}/evolving"
    status, body = call(broker.web_url, "POST", path + "/schema", versions[0])
    assert (status, body) == (200, {"version": {"version": 0}})
    for offered, ok in zip(versions[1:], accepted, strict=True):
        status, check = call(broker.web_url, "POST", path + "/compatibility", offered)
        assert status == 202 and check == {"compatibility": ok, "schemaCompatibilityStrategy": strategy}
        status, body = call(broker.web_url, "POST", path + "/schema", offered)
        assert status == (200 if ok else 409), body


def test_unknown_strategy_and_bad_schema_are_refused(broker: BrokerProcess) -> None:
    status, body = call(broker.web_url, "PUT", "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy",
                        "SIDEWAYS")
    assert status == 400 and "SIDEWAYS" in body["reason"]
    status, body = call(broker.web_url, "POST", "/admin/v2/schemas/public/default/bad-schema/schema",
                        {"type": "AVRO", "schema": "{not avro", "properties": {}})
    assert status == 400 and "Invalid AVRO schema" in body["reason"]
    assert call(broker.web_url, "GET", "/admin/v2/schemas/public/default/bad-schema/schema")[0] == 404
