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
    local = f"cli-schema-{uuid.uuid4().hex[:6]}"
    topic, rest = f"persistent://public/default/{local}", f"/admin/v2/schemas/public/default/{local}"
    ok(broker, "schemas", "extract", topic, "-c", "tests.integration.schema.records:Order", "-t", "avro")
    latest = json.loads(ok(broker, "schemas", "get", topic))
    assert latest["version"] == 0 and latest["type"] == "AVRO" and '"price"' in latest["data"]
    schema_file = tmp_path / "string.json"
    payload = {"type": "STRING", "schema": "", "properties": {"k": "v"}}
    schema_file.write_text(json.dumps(payload))
    refused = admin(broker, "schemas", "upload", topic, "-f", str(schema_file))
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr  # FULL: AVRO cannot become STRING
    assert call(broker.web_url, "POST", rest + "/compatibility", payload) == (
        202, {"compatibility": False, "schemaCompatibilityStrategy": "FULL"})
    assert json.loads(ok(broker, "schemas", "delete", topic)) == {"version": 1}
    assert call(broker.web_url, "GET", rest + "/schema")[0] == 404  # deleted
    assert call(broker.web_url, "POST", rest + "/schema", payload) == (200, {"version": {"version": 2}})
    by_version = call(broker.web_url, "GET", rest + "/schema/2")[1]
    assert by_version["type"] == "STRING" and by_version["properties"] == {"k": "v"}
    every = call(broker.web_url, "GET", rest + "/schemas")[1]
    assert [v["version"] for v in every["getSchemaResponses"]] == [2]  # the live versions, after the delete
    assert call(broker.web_url, "DELETE", rest + "/schema?force=true") == (200, {"version": 2})
    assert call(broker.web_url, "GET", rest + "/schema")[0] == 404


def test_namespace_schema_policy_verbs(broker: BrokerProcess) -> None:
    ns = f"public/cli-ns-{uuid.uuid4().hex[:6]}"
    base = f"/admin/v2/namespaces/{ns}"
    assert call(broker.web_url, "PUT", base)[0] == 204
    assert call(broker.web_url, "GET", base + "/schemaCompatibilityStrategy") == (200, "UNDEFINED")
    ok(broker, "namespaces", "set-schema-compatibility-strategy", ns, "-c", "backward_transitive")
    assert ok(broker, "namespaces", "get-schema-compatibility-strategy", ns).strip() == '"BACKWARD_TRANSITIVE"'
    assert call(broker.web_url, "GET", base + "/isAllowAutoUpdateSchema") == (200, True)
    ok(broker, "namespaces", "set-is-allow-auto-update-schema", ns, "--disable")
    assert call(broker.web_url, "POST", base + "/schemaValidationEnforced", True)[0] == 204
    policies = call(broker.web_url, "GET", base)[1]
    assert policies["schema_compatibility_strategy"] == "BACKWARD_TRANSITIVE"
    assert policies["is_allow_auto_update_schema"] is False and policies["schema_validation_enforced"] is True
    assert call(broker.web_url, "POST", base + "/schemaValidationEnforced", "yes")[0] == 400
