"""Basic authentication from an htpasswd file (apr1-MD5 and crypt entries, as ``htpasswd`` writes them)
with the official client: good credentials, a bad password, an unknown user, an unknown auth method, and
``Authorization: Basic`` on the admin API."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
from passlib.hash import apr_md5_crypt, sha512_crypt

from tests.integration.security.conftest import BASIC_PROVIDER, FAIL_FAST_S, SecureBroker, client, http, start_broker

REFUSED = (pulsar.Timeout, pulsar.ConnectError, pulsar.AuthenticationError)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, keys_dir: Path) -> Iterator[SecureBroker]:
    htpasswd = keys_dir / "htpasswd"
    htpasswd.write_text(f"alice:{apr_md5_crypt.hash('wonderland')}\nbob:{sha512_crypt.hash('builder')}\n")
    proc = start_broker(Path(tmp_path_factory.mktemp("basic")), {
        "authenticationEnabled": "true",
        "authenticationProviders": BASIC_PROVIDER,
        "basicAuthConf": str(htpasswd),
    })
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.parametrize(("user", "password"), [("alice", "wonderland"), ("bob", "builder")])
def test_good_credentials_produce_and_consume(broker: SecureBroker, user: str, password: str,
                                             closing: list[pulsar.Client]) -> None:
    c = client(broker.url, authentication=pulsar.AuthenticationBasic(user, password))
    closing.append(c)
    topic = f"persistent://public/default/basic-{uuid.uuid4().hex[:8]}"
    consumer = c.subscribe(topic, "s")
    c.create_producer(topic).send(b"hi")
    assert consumer.receive(timeout_millis=10_000).data() == b"hi"


@pytest.mark.parametrize(("user", "password", "method"), [
    ("alice", "not-the-password-42", "basic"), ("mallory", "wonderland", "basic"), ("alice", "wonderland", "other"),
])
def test_bad_credentials_or_method_are_refused(broker: SecureBroker, user: str, password: str, method: str,
                                               closing: list[pulsar.Client]) -> None:
    c = client(broker.url, timeout_s=FAIL_FAST_S, authentication=pulsar.AuthenticationBasic(user, password, method))
    closing.append(c)
    with pytest.raises(REFUSED):
        c.create_producer("persistent://public/default/basic-refused")
    reason = "UNSUPPORTED_METHOD" if method == "other" else "INVALID_AUTH_DATA"
    assert broker.wait_for_log(f"method='{method}' reason={reason}", 10)
    assert password not in broker.log_text()  # failures are logged without the secret


def test_admin_api_takes_basic_authorization(broker: SecureBroker) -> None:
    url = f"http://127.0.0.1:{broker.web_port}/admin/v2/clusters"

    def basic(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    assert http("GET", url, headers=basic("alice", "wonderland")) == (200, ["standalone"])
    assert http("GET", url, headers=basic("alice", "nope"))[0] == 401
    assert http("GET", url)[0] == 401


def test_an_unknown_method_with_an_anonymous_role_is_refused_by_authorization(
    tmp_path: Path, keys_dir: Path, closing: list[pulsar.Client]
) -> None:
    """The official client's test_basic_auth_method: Pulsar takes a CONNECT whose method no provider serves as
    the anonymous role, so a topic that role may not use answers AuthorizationError (not a timed-out retry)."""
    htpasswd = keys_dir / "htpasswd-anon"
    htpasswd.write_text(f"alice:{apr_md5_crypt.hash('wonderland')}\n")
    proc = start_broker(tmp_path, {
        "authenticationEnabled": "true", "authorizationEnabled": "true", "anonymousUserRole": "anonymous",
        "superUserRoles": "alice", "authenticationProviders": BASIC_PROVIDER, "basicAuthConf": str(htpasswd),
    })
    try:
        topic = f"persistent://public/default/basic-anon-{uuid.uuid4().hex[:8]}"
        good = client(proc.url, authentication=pulsar.AuthenticationBasic("alice", "wonderland", "basic"))
        closing.append(good)
        good.create_producer(topic).send(b"ok")
        unknown = client(proc.url, timeout_s=30, authentication=pulsar.AuthenticationBasic("alice", "wonderland",
                                                                                          "unknown"))
        closing.append(unknown)
        with pytest.raises(pulsar.AuthorizationError):
            unknown.create_producer(topic)
    finally:
        proc.kill()
