"""A real S3 API for tests: ``moto[server]`` as a separate process on a loopback port.

Started and stopped by PID (never by name); readiness and shutdown waits are bounded. Tests touch the
bucket through boto3 on the same server (a real client; nothing is mocked).
The server can be stopped and started again on the same port (endpoint-down tests); its data lives in
memory and is lost then, which those tests take into account.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

READY_TIMEOUT_S = 30.0
READY_POLL_S = 0.1
STOP_TIMEOUT_S = 10.0
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MotoServer:
    def __init__(self, port: int | None = None, *, check_credentials: bool = False) -> None:
        """``check_credentials``: moto authenticates every request against its own IAM users (none exist),
        so any access key is a wrong one (INITIAL_NO_AUTH_ACTION_COUNT=0)."""
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = dict(os.environ, **CREDENTIALS)
        if check_credentials:
            self.env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        assert self.proc is None, "already running"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        for _ in range(int(READY_TIMEOUT_S / READY_POLL_S) + 1):  # bounded in count and time
            if self.proc.poll() is not None:
                raise RuntimeError("moto server exited during start")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(READY_POLL_S)  # waiting for another process's socket: there is no event to wait on
        self.stop()
        raise RuntimeError("moto server did not become ready")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)

    def client(self) -> Any:
        """A plain boto3 client on the server (the test's own hands, not the broker's)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def create_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return [str(obj["Key"]) for obj in listed.get("Contents", [])]

    def delete_object(self, bucket: str, key: str) -> None:
        self.client().delete_object(Bucket=bucket, Key=key)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def get_object(self, bucket: str, key: str) -> bytes:
        data: bytes = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return data


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """One S3 server per test module (conftests import this fixture)."""
    server = MotoServer().start()
    try:
        yield server
    finally:
        server.stop()


class TcpGate:
    """A loopback TCP forwarder in front of the S3 server, for "endpoint down" without losing the server's
    data: ``close()`` refuses new connections and cuts open ones; ``stall()`` accepts but forwards nothing
    (requests hang until the client's timeout); ``open()`` forwards again. Threads, bounded by connections."""

    def __init__(self, target_port: int) -> None:
        import threading

        self.target_port = target_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._stalled = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open(self) -> TcpGate:
        import threading

        self._stalled = False
        if self._listener is None:
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self._listener = listener
            threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stall(self) -> None:
        self._stalled = True
        self._cut()

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._cut()

    def _cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        import threading

        while True:  # ends when the listener is closed
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            if self._stalled:
                continue  # held open, never answered
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:  # until either side closes
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
