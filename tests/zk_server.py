"""A real ZooKeeper for tests: Debian's server jar (``scripts/install``) as a separate Java process.

:class:`ZooKeeperServer` runs one standalone node on a free loopback port with its own data directory
(``tickTime`` 200 ms, sessions of 0.4-60 s allowed, so a test can expire one in 2 s while a broker keeps
Pulsar's 30 s default; the admin HTTP server off). It is started and
stopped by PID (never by name), readiness and shutdown waits are bounded, and :meth:`restart` brings it back
on the same port and data (ZooKeeper keeps its snapshot and transaction log there, so znodes survive and
sessions that have not timed out resume).

:class:`TcpProxy` sits between one client and the server so a test can cut that client's link without root:
``cut()`` closes the open connections and refuses new ones (the client sees its connection drop and every
reconnect fail, and the server expires its session after the session timeout); ``restore()`` forwards again.

Fixtures: ``zk_server`` is one server per test session (tests isolate themselves with a fresh chroot from
:func:`unique_chroot`); ``own_zk_server`` is a server of a test's own, for tests that stop or restart it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 200  # the server checks session expiry once a tick
READY_TIMEOUT_S = 60.0
READY_POLL_S = 0.05
STOP_TIMEOUT_S = 15.0
# A small heap and the client compiler only: a test node holds a few thousand znodes, and startup CPU is what
# a shared two-core machine notices.
JVM_OPTIONS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.jmx.log4j.disable=true"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child before exec: the server gets SIGKILL when the test process dies, even killed (no orphans)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _srvr(port: int) -> str:
    """The server's answer to the ``srvr`` four-letter word ('' while it does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"srvr")
            chunks = []
            for _ in range(64):  # the answer is a few hundred bytes; bounded
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper node in its own process."""

    def __init__(self, *, port: int | None = None, data_dir: Path | None = None) -> None:
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="magnetar-zk-")) if data_dir is None else data_dir
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, chroot: str = "") -> str:
        """The ``metadataStoreUrl`` of this server (``zk:127.0.0.1:PORT[/chroot]``)."""
        return f"zk:{self.hosts}{chroot}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.base_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr\n"
            f"minSessionTimeout={2 * TICK_MS}\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            # The transaction log is preallocated in 64 MiB steps by default; tests write little.
            "preAllocSize=4096\n"
            "snapCount=10000\n"
        )
        return config

    def start(self) -> ZooKeeperServer:
        assert self.proc is None, "already running"
        config = self._write_config()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                ["java", *JVM_OPTIONS, "-cp", ZOOKEEPER_CLASSPATH, MAIN_CLASS, str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        for _ in range(int(READY_TIMEOUT_S / READY_POLL_S) + 1):  # bounded in count and time
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited during start; see {self.log_path}")
            if "Mode: standalone" in _srvr(self.port):
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(READY_POLL_S)  # waiting for another process's socket: there is no event to wait on
        self.stop()
        raise RuntimeError(f"ZooKeeper did not become ready in {READY_TIMEOUT_S} s; see {self.log_path}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process by PID (``SIGKILL`` for a crash) and wait for it."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> ZooKeeperServer:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop and remove the data directory (when this object made it)."""
        self.stop()
        if self._own_dir:
            import shutil

            shutil.rmtree(self.base_dir, ignore_errors=True)


_chroots = itertools.count()


def unique_chroot(name: str = "t") -> str:
    """A chroot no other test of this run uses (the store creates it on connect)."""
    return f"/{name}-{os.getpid()}-{next(_chroots)}-{uuid.uuid4().hex[:6]}"


class TcpProxy:
    """A loopback TCP forwarder in front of ZooKeeper for one client, with a cut switch.

    While cut, new connections are accepted and closed at once (the client's reconnect attempts fail fast,
    as against a dead server) and nothing is forwarded. Threads: one acceptor, two pumps per connection."""

    CONNECTIONS_MAX = 64

    def __init__(self, target_port: int, *, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cut = False
        self._listener: socket.socket | None = None
        self.connections = 0  # accepted while open, for tests that wait for a reconnect

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, chroot: str = "") -> str:
        return f"zk:{self.hosts}{chroot}"

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(self.CONNECTIONS_MAX)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name=f"zk-proxy-{self.port}").start()
        return self

    def cut(self) -> None:
        """Drop the client's connections and refuse new ones until :meth:`restore`."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            _close(s)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:  # ends when the listener is closed
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                refuse = self._cut or len(self._sockets) >= 2 * self.CONNECTIONS_MAX
            if refuse:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2.0)
                upstream.settimeout(None)
            except OSError:
                _close(client)  # the server is down: the client sees a refused connection
                continue
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._sockets += [client, upstream]
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:  # until either side closes
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        with self._lock:
            self._sockets = [s for s in self._sockets if s is not source and s is not sink]
        _close(source)
        _close(sink)


class Events:
    """A callback that records what it is given (watch events, session events), awaited with bounded
    timeouts: ``await events.until(lambda items: ...)``."""

    def __init__(self) -> None:
        self.items: list[object] = []
        self._changed = asyncio.Event()

    def __call__(self, item: object) -> None:
        self.items.append(item)
        self._changed.set()

    async def until(self, predicate: Callable[[list[object]], bool], timeout_s: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate(self.items):
            remaining = deadline - loop.time()
            assert remaining > 0, f"timed out after {timeout_s} s; got {self.items}"
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """One ZooKeeper per test session; tests keep to a chroot of their own (:func:`unique_chroot`)."""
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def own_zk_server() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper for one test alone (it may stop, kill or restart it)."""
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    """A cuttable link to the session's ZooKeeper."""
    proxy = TcpProxy(zk_server.port).start()
    try:
        yield proxy
    finally:
        proxy.close()
