"""A fault-injecting HTTP proxy in front of the S3 server, for the object ledger store's fault tests.

It forwards every request to the upstream S3 endpoint (a moto server) and, as its :class:`Faults` say,
answers some requests itself or spoils them, per HTTP method:

* ``error_503``: answer ``503 Service Unavailable`` (S3's ``SlowDown``-like refusal) without forwarding;
* ``lose_answer``: forward the request (the S3 server applies it), then cut the connection instead of
  answering: to the client, a failure whose outcome it cannot know;
* ``stall``: hold the request unanswered (never forwarded) until :meth:`Faults.release` (the client times out);
* ``strip_conditional``: drop the ``If-None-Match`` header before forwarding: the upstream then behaves like
  a service that does not honour conditional writes (moto does not check signatures by default).

Each fault applies to the next ``count`` requests of its method (or to all while ``count`` is None). Thread
based (``ThreadingHTTPServer``), so it serves broker processes and in-process clients alike; started and
stopped explicitly, every wait bounded.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STALL_MAX_S = 60.0
UPSTREAM_TIMEOUT_S = 30.0
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class _Rule:
    kind: str
    method: str
    count: int | None  # requests left to spoil; None: all of them


@dataclass
class Faults:
    rules: list[_Rule] = field(default_factory=list)
    injected: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

    def add(self, kind: str, method: str = "PUT", count: int | None = 1) -> None:
        assert kind in ("error_503", "lose_answer", "stall", "strip_conditional"), kind
        with self.lock:
            self.released.clear()
            self.rules.append(_Rule(kind, method, count))

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
        self.release()

    def release(self) -> None:
        """Let stalled requests go (they are then answered 503: the client gave up on them long ago)."""
        self.released.set()

    def take(self, method: str) -> str | None:
        """The fault for this request, if any (and count it)."""
        with self.lock:
            self.requests[method] = self.requests.get(method, 0) + 1
            for rule in self.rules:
                if rule.method == method and (rule.count is None or rule.count > 0):
                    if rule.count is not None:
                        rule.count -= 1
                    self.injected[rule.kind] = self.injected.get(rule.kind, 0) + 1
                    return rule.kind
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            for _ in range(1_000_000):  # bounded: one chunk per turn, ends at the zero-length chunk
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        body = self._body()
        fault = self.server.faults.take(self.command)
        if fault == "error_503":
            message = b"<Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>"
            self._answer(503, [("Content-Type", "application/xml")], message)
            return
        if fault == "stall":
            self.server.faults.released.wait(STALL_MAX_S)
            self.close_connection = True
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if fault == "strip_conditional":
            headers = {k: v for k, v in headers.items() if k.lower() != "if-none-match"}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            answer = response.read()
        finally:
            upstream.close()
        if fault == "lose_answer":
            self.close_connection = True  # applied upstream; the client gets no answer
            return
        self._answer(response.status, response.getheaders(), answer)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream_port: int, faults: Faults) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream_port = upstream_port
        self.faults = faults


class S3FaultProxy:
    def __init__(self, upstream_port: int) -> None:
        self.faults = Faults()
        self._server = _ProxyServer(upstream_port, self.faults)
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> S3FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.faults.release()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
