"""The schemathesis run over the admin API's OpenAPI document with authentication and authorization on:
as the super-user every answer fits the document and none is a 500; as a role without rights every
operation is refused with a documented 403 (or served, for the few open to any role); with no credentials,
401 everywhere but the open paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import schemathesis

from tests.integration.admin.test_metrics_cli_schema import CHECKS
from tests.integration.security.conftest import SecureBroker, bearer, http, start_broker, token_broker_settings
from tests.integration.security.pki import token


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, keys_dir: Path, secret_key: bytes) -> Iterator[SecureBroker]:
    proc = start_broker(Path(tmp_path_factory.mktemp("schema-auth")), token_broker_settings(keys_dir))
    try:
        yield proc
    finally:
        proc.kill()


def _run(base: str, headers: dict[str, str], examples: int, skip: tuple[str, ...] = ()) -> list[str]:
    schema = schemathesis.openapi.from_url(base + "/admin/v2/openapi.json")
    failures: list[str] = []
    statuses: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.label in skip:
            continue

        @hypothesis.settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call_and_validate(base_url=base, headers=headers, checks=CHECKS)
            statuses.append(response.status_code)

        try:
            check()
        except Exception as exc:  # collect, so one run reports every broken operation
            failures.append(f"{operation.label}: {exc}")
    assert statuses
    return failures


def test_super_user_run_fits_the_document(broker: SecureBroker, secret_key: bytes) -> None:
    base, root = f"http://127.0.0.1:{broker.web_port}", bearer(token(secret_key, "admin"))
    failures = _run(base, root, 3)
    assert not failures, "\n\n".join(failures)


def test_role_without_rights_is_refused_as_documented(broker: SecureBroker, secret_key: bytes) -> None:
    failures = _run(f"http://127.0.0.1:{broker.web_port}", bearer(token(secret_key, "nobody")), 2)
    assert not failures, "\n\n".join(failures)


def test_no_credentials_get_401_on_every_guarded_operation(broker: SecureBroker) -> None:
    base = f"http://127.0.0.1:{broker.web_port}"
    status, document = http("GET", base + "/admin/v2/openapi.json")
    assert status == 200
    checked = 0
    for path, operations in document["paths"].items():
        concrete = path.replace("{", "x").replace("}", "")
        for method in operations:
            got, answer = http(method.upper(), base + concrete)
            assert got == 401, (method, path, answer)
            assert answer == {"reason": "Authentication required"}
            checked += 1
    assert checked > 50
