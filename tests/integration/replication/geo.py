"""Several real clusters for the geo-replication tests: one ``magnetar standalone`` process each (own data
dir, own ``clusterName``, loopback ports), registered with each other through the admin API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pulsar

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

TENANT = "geo"
WAIT_S = 30.0
POLL_S = 0.05


class Clusters:
    def __init__(self, root: Path, names: tuple[str, ...], *extra: str) -> None:
        self.procs = {
            n: BrokerProcess(root / n, extra_args=("--set", f"clusterName={n}", *extra)) for n in names
        }

    def start(self) -> Clusters:
        for proc in self.procs.values():
            proc.start()
        for proc in self.procs.values():
            for name, other in self.procs.items():
                self.register(proc, name, other)
            status, _ = call(proc.web_url, "PUT", f"/admin/v2/tenants/{TENANT}",
                             {"adminRoles": [], "allowedClusters": list(self.procs)})
            assert status == 204
        return self

    @staticmethod
    def register(proc: BrokerProcess, name: str, other: BrokerProcess) -> None:
        data = {"serviceUrl": other.web_url, "brokerServiceUrl": other.url}
        status, _ = call(proc.web_url, "PUT", f"/admin/v2/clusters/{name}", data)
        if status == 409:  # the local cluster's record exists from the start
            status, _ = call(proc.web_url, "POST", f"/admin/v2/clusters/{name}", data)
        assert status == 204, status

    def __getitem__(self, name: str) -> BrokerProcess:
        return self.procs[name]

    def kill_all(self) -> None:
        """SIGKILL every cluster; their logs stay beside their data (``{name}.log``) for a failed run."""
        for name, proc in self.procs.items():
            proc.kill()
            (proc.data_dir.parent / f"{name}.log").write_text(proc.log_text())

    def namespace(self, ns: str, clusters: list[str]) -> str:
        """Create ``geo/{ns}`` replicating to ``clusters`` in each of those clusters."""
        full = f"{TENANT}/{ns}"
        for name in clusters:
            base = self.procs[name].web_url
            assert call(base, "PUT", f"/admin/v2/namespaces/{full}")[0] == 204
            assert call(base, "POST", f"/admin/v2/namespaces/{full}/replication", clusters)[0] == 204
        return full

    def stats(self, name: str, topic: str) -> dict[str, Any]:
        status, body = call(self.procs[name].web_url, "GET", f"/admin/v2/persistent/{topic}/stats")
        assert status == 200, body
        assert isinstance(body, dict)
        return body

    def internal_stats(self, name: str, topic: str) -> dict[str, Any]:
        status, body = call(self.procs[name].web_url, "GET", f"/admin/v2/persistent/{topic}/internalStats")
        assert status == 200, body
        assert isinstance(body, dict)
        return body

    @contextmanager
    def client(self, name: str) -> Iterator[pulsar.Client]:
        c = make_client(self.procs[name].url)
        try:
            yield c
        finally:
            c.close()


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll ``predicate`` (bounded in time and count) until it holds; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / POLL_S) + 1):
        if predicate():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_S)  # polling an external process's state, bounded: not synchronisation by sleep
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def receive_all(consumer: pulsar.Consumer, count: int, timeout_s: float = WAIT_S) -> list[pulsar.Message]:
    """Receive exactly ``count`` messages (acking each), each within the time left."""
    deadline = time.monotonic() + timeout_s
    got = []
    for _ in range(count):
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        msg = consumer.receive(timeout_millis=left_ms)
        consumer.acknowledge(msg)
        got.append(msg)
    return got


def assert_nothing_more(consumer: pulsar.Consumer, timeout_ms: int = 1000) -> None:
    """No further message arrives within ``timeout_ms`` (the negative check after an exact count)."""
    try:
        msg = consumer.receive(timeout_millis=timeout_ms)
    except pulsar.Timeout:
        return
    raise AssertionError(f"unexpected extra message {msg.data()!r} from {msg.topic_name()}")
