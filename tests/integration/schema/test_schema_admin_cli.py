"""``magnetar admin schemas ...`` and the namespaces' schema policy verbs against the real broker, and the
REST shapes they print (Pulsar's GetSchemaResponse, GetAllVersionsSchemaResponse, DeleteSchemaResponse)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


def admin(broker: BrokerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def ok(broker: BrokerProcess, *argv: str) -> str:
    done = admin(broker, *argv)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_schema_verbs_round_trip(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"persistent://public/default/cli-schema-{uuid.uuid4().hex[:6]}"
    ok(broker, "schemas", "extract", topic, "-c", "tests.integration.schema.records:Order", "-t", "avro")
    latest = json.loads(ok(broker, "schemas", "get", topic))
    assert latest["version"] == 0 and latest["type"] == "AVRO" and '"price"' in latest["data"]
    schema_file = tmp_path / "string.json"
    schema_file.write_text(json.dumps({"type": "STRING", "schema": "", "properties": {"k": "v"}}))
    refused = admin(broker, "schemas", "upload", topic, "-f", str(schema_file))
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr  # FULL: AVRO cannot become STRING
    check = json.loads(ok(broker, "schemas", "compatibility", topic, "-f", str(schema_file)))
    assert check == {"compatibility": False, "schemaCompatibilityStrategy": "FULL"}
    assert json.loads(ok(broker, "schemas", "delete", topic)) == {"version": 1}
    assert admin(broker, "schemas", "get", topic).returncode == 1  # deleted: 404
    assert json.loads(ok(broker, "schemas", "upload", topic, "-f", str(schema_file))) == {"version": {"version": 2}}
    by_version = json.loads(ok(broker, "schemas", "get", topic, "-v", "2"))
    assert by_version["type"] == "STRING" and by_version["properties"] == {"k": "v"}
    every = json.loads(ok(broker, "schemas", "get", topic, "-a"))
    assert [v["version"] for v in every["getSchemaResponses"]] == [2]  # the live versions, after the delete
    assert json.loads(ok(broker, "schemas", "delete", topic, "-f")) == {"version": 2}
    status, _ = call(broker.web_url, "GET", "/admin/v2/schemas/public/default/" + topic.rsplit("/", 1)[1] + "/schema")
    assert status == 404


def test_namespace_schema_policy_verbs(broker: BrokerProcess) -> None:
    ns = f"public/cli-ns-{uuid.uuid4().hex[:6]}"
    ok(broker, "namespaces", "create", ns)
    assert ok(broker, "namespaces", "get-schema-compatibility-strategy", ns).strip() == '"UNDEFINED"'
    ok(broker, "namespaces", "set-schema-compatibility-strategy", ns, "-c", "backward_transitive")
    assert ok(broker, "namespaces", "get-schema-compatibility-strategy", ns).strip() == '"BACKWARD_TRANSITIVE"'
    assert ok(broker, "namespaces", "get-is-allow-auto-update-schema", ns).strip() == "true"
    ok(broker, "namespaces", "set-is-allow-auto-update-schema", ns, "--disable")
    assert ok(broker, "namespaces", "get-is-allow-auto-update-schema", ns).strip() == "false"
    ok(broker, "namespaces", "set-schema-validation-enforce", ns, "--enable")
    assert ok(broker, "namespaces", "get-schema-validation-enforce", ns).strip() == "true"
    policies = json.loads(ok(broker, "namespaces", "policies", ns))
    assert policies["schema_compatibility_strategy"] == "BACKWARD_TRANSITIVE"
    assert policies["is_allow_auto_update_schema"] is False and policies["schema_validation_enforced"] is True
    assert admin(broker, "namespaces", "set-schema-validation-enforce", ns).returncode == 2
