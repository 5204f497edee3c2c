"""The abuse tier: hostile and careless clients against the real ``magnetar standalone`` process.

Each module shares one broker started with small limits (so a bound is reached in a few seconds), drives
it with raw sockets where the official client cannot misbehave, and checks both that the bound holds
(RSS and open descriptors read from ``/proc``) and that other clients keep being served.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from magnetar import protocol as proto
from tests.component.wire import T, WirePeer
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.security.pki import token

pytestmark = pytest.mark.integration

HTTP_TIMEOUT_S = 15.0


def start_broker(tmp_path_factory: pytest.TempPathFactory, *settings: str) -> BrokerProcess:
    args: list[str] = []
    for setting in settings:
        args += ["--set", setting]
    return BrokerProcess(Path(tmp_path_factory.mktemp("abuse-data")), extra_args=tuple(args)).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory)
    try:
        yield proc
    finally:
        proc.kill()


def rss_bytes(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_fds(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


def http(proc: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One admin request; returns (status, parsed JSON body or text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(proc.web_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def entry(seq: int, body: bytes, *, producer: str = "p", **fields: Any) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1000 + seq, **fields)
    return proto.make_entry(meta, body)


async def create_producer(peer: WirePeer, topic: str, producer_id: int = 1, **options: Any) -> proto.Frame:
    peer.send(proto.commands.producer(topic, producer_id, producer_id, **options))
    return await peer.expect(T.PRODUCER_SUCCESS, T.ERROR)


def assert_still_serving(proc: BrokerProcess) -> None:
    """Another, well-behaved official client publishes and consumes at once."""
    client = make_client(proc.url)
    try:
        topic = unique("still-serving")
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"alive")
        assert consumer.receive(10_000).data() == b"alive"
    finally:
        client.close()


async def wait_closed(peer: WirePeer, timeout_s: float) -> bool:
    """True once the broker closes ``peer`` (bounded), discarding what it sends meanwhile."""
    async def drain() -> None:
        while await peer.reader.read(65536):
            pass

    try:
        await asyncio.wait_for(drain(), timeout_s)
    except TimeoutError:
        return False
    except ConnectionError:
        pass  # reset by the broker: closed too
    return True


TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
PRIVATE = "private/ns"  # a namespace no role but the super-user "admin" may use
ROLES = ("alice", "mallory")  # produce and consume in public/default (and pulsar/system, for transactions)


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return os.urandom(32)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, secret: bytes) -> Iterator[BrokerProcess]:
    key = Path(tmp_path_factory.mktemp("keys")) / "secret.key"
    key.write_bytes(secret)
    proc = start_broker(
        tmp_path_factory, "authenticationEnabled=true", f"authenticationProviders={TOKEN_PROVIDER}",
        f"tokenSecretKey=file://{key}", "authorizationEnabled=true", "superUserRoles=admin",
    )
    try:
        root = {"Authorization": f"Bearer {token(secret, 'admin')}"}
        # as in Pulsar, a role using transactions needs a lookup of pulsar/system's coordinator-assign topic
        for role in ROLES:
            for ns in ("public/default", "pulsar/system"):
                status, body = call(proc.web_url, "POST", f"/admin/v2/namespaces/{ns}/permissions/{role}",
                                    ["produce", "consume"], headers=root)
                assert status == 204, body
        status, body = call(proc.web_url, "PUT", "/admin/v2/clusters/registered",
                            {"serviceUrl": "http://127.0.0.1:1"}, headers=root)
        assert status == 204, body
        # a tenant none of ROLES may use
        status, body = call(proc.web_url, "PUT", f"/admin/v2/tenants/{PRIVATE.split('/')[0]}",
                            {"adminRoles": [], "allowedClusters": ["standalone"]}, headers=root)
        assert status == 204, body
        assert call(proc.web_url, "PUT", f"/admin/v2/namespaces/{PRIVATE}", headers=root)[0] == 204
        yield proc
    finally:
        proc.kill()
