"""A real cluster for tests: one ZooKeeper server, one moto S3 server and N ``magnetar broker`` processes, each
broker reaching ZooKeeper and S3 through TCP proxies of its own (``tests.zk_server.TcpProxy``), so a test cuts
one broker off one store without root.

Every process is started and stopped by PID; every wait is bounded. Broker ports are fixed when the harness
is built, so a broker restarted (or killed and started again) keeps its id (``127.0.0.1:<web port>``), as a
Pulsar broker keeps its advertised address. The cluster's metadata lives under a chroot of its own and its
ledgers in a bucket of its own. The service URL lists every broker, as an operator's would.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS, MotoServer
from tests.zk_server import TcpProxy, ZooKeeperServer, free_port, unique_chroot

CLUSTER = "test-cluster"
BUCKET = "magnetar-cluster"
SESSION_TIMEOUT_MS = 4000  # failover tests wait out sessions: short, and well above ZooKeeper's tick (200 ms)
HTTP_TIMEOUT_S = 30.0
SETTLE_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0  # a broker's first log line may take this long on a loaded two-core machine


@dataclass
class Node:
    name: str
    zk_proxy: TcpProxy
    s3_proxy: TcpProxy
    process: BrokerProcess
    config: Path
    paused: bool = False  # SIGSTOPped: it answers nobody until resumed

    @property
    def broker_id(self) -> str:
        return f"127.0.0.1:{self.process.web_port}"

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.process.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.process.web_port}"

    @property
    def pid(self) -> int:
        assert self.process.proc is not None
        return self.process.proc.pid

    @property
    def running(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None

    def start(self) -> Node:
        self.process.start()
        return self

    def stop(self) -> int:
        """SIGTERM: the broker moves its bundles away, then exits (its exit code)."""
        return self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def _signal(self, sig: int) -> None:
        assert self.process.proc is not None
        self.process.proc.send_signal(sig)


@dataclass
class ClusterHarness:
    base: Path
    brokers: int = 3
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    settings: dict[str, str] = field(default_factory=dict)
    zk: ZooKeeperServer = field(init=False)
    moto: MotoServer = field(init=False)
    nodes: list[Node] = field(init=False, default_factory=list)
    chroot: str = field(init=False, default_factory=lambda: unique_chroot("cluster"))

    def start(self) -> ClusterHarness:
        self.zk = ZooKeeperServer().start()
        self.moto = MotoServer().start()
        self.moto.create_bucket(BUCKET)
        self._initialize_metadata()
        for i in range(self.brokers):
            self.nodes.append(self._node(f"b{i}"))
        for node in self.nodes:
            node.start()
        self.wait_until(lambda: len(self.registered()) == self.brokers, "every broker registered")
        return self

    def _initialize_metadata(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "magnetar.cli", "initialize-cluster-metadata", "--cluster", CLUSTER,
             "--metadata-store", self.zk.url(self.chroot)],
            capture_output=True, text=True, timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"initialize-cluster-metadata exited {done.returncode}:\n{done.stderr}")

    def _node(self, name: str) -> Node:
        zk_proxy = TcpProxy(self.zk.port).start()
        s3_proxy = TcpProxy(self.moto.port).start()
        data = self.base / name
        data.mkdir(parents=True, exist_ok=True)
        config = data / "broker.conf"
        values = {
            "clusterName": CLUSTER,
            "metadataStoreUrl": zk_proxy.url(self.chroot),
            "metadataStoreSessionTimeoutMillis": str(self.session_timeout_ms),
            "metadataStoreOperationTimeoutSeconds": "10",
            "ledgerStoreUrl": f"s3://{BUCKET}/ledgers",
            "ledgerStoreServiceEndpoint": f"http://127.0.0.1:{s3_proxy.port}",
            "ledgerStoreRegion": "us-east-1",
            "ledgerStoreRequestTimeoutMillis": "5000",
            "advertisedAddress": "127.0.0.1",
            "brokerDeduplicationEnabled": "true",
            **self.settings,
        }
        config.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        process = BrokerProcess(
            data, command="broker", port=free_port(), web_port=free_port(), start_timeout_s=START_TIMEOUT_S,
            extra_args=("--config", str(config)), env=dict(CREDENTIALS),
        )
        return Node(name, zk_proxy, s3_proxy, process, config)

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"127.0.0.1:{n.process.port}" for n in self.nodes)

    def running(self) -> list[Node]:
        """The brokers up and answering (a paused one is up but answers nobody)."""
        return [n for n in self.nodes if n.running and not n.paused]

    def node(self, broker_id_or_url: str) -> Node:
        for n in self.nodes:
            if broker_id_or_url in (n.broker_id, n.url, n.web_url):
                return n
        raise KeyError(broker_id_or_url)

    # ---- the admin API -------------------------------------------------------------------------------

    def http(self, node: Node, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request to ``node`` (redirects not followed): (status, decoded JSON or text)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(node.web_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=HTTP_TIMEOUT_S) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
            if 300 <= status < 400:
                return status, exc.headers.get("Location")
        text = raw.decode()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def registered(self) -> list[str]:
        for node in self.running():
            status, value = self.http(node, "GET", f"/admin/v2/brokers/{CLUSTER}")
            if status == 200:
                return sorted(value)
        return []

    def lookup(self, node: Node, topic: str) -> str | None:
        """The broker URL ``node``'s HTTP lookup names for ``topic`` after following its redirects."""
        domain, rest = topic.split("://")
        current, path = node, f"/lookup/v2/topic/{domain}/{rest}"
        for _ in range(20):
            status, value = self.http(current, "GET", path)
            if status == 307:
                target = str(value)
                current = self.node(target.split("/lookup/")[0])
                path = "/lookup/" + target.split("/lookup/", 1)[1]
                continue
            return str(value["brokerUrl"]) if status == 200 else None
        raise AssertionError(f"more than 20 redirects for {topic}")

    def owned(self, node: Node) -> list[str]:
        status, value = self.http(node, "GET", f"/admin/v2/brokers/{CLUSTER}/{node.broker_id}/ownedNamespaces")
        assert status == 200, value
        return sorted(value)

    def wait_until(self, check: Any, what: str, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Until ``check()`` holds: re-checked on a short period (these are other processes' states, with no
        event to wait on), bounded."""
        deadline = time.monotonic() + timeout_s
        for _ in range(int(timeout_s / 0.1) + 1):
            if check():
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    def close(self) -> None:
        """Stop everything by PID; each broker's log is left in ``base/<name>.log`` for a failed test's reader."""
        for node in self.nodes:
            (self.base / f"{node.name}.log").write_text(node.process.log_text())
            if node.running:
                node.resume()
                node.kill()
            node.zk_proxy.close()
            node.s3_proxy.close()
        if hasattr(self, "moto"):
            self.moto.stop()
        if hasattr(self, "zk"):
            self.zk.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
