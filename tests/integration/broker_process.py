"""Start and stop the real ``magnetar standalone`` (or ``magnetar broker``) process for integration tests.

The process binds port 0 and logs its real ports in its ready line; we wait for that line (bounded),
never on sleeps. Its log is drained in a thread and kept so tests can assert on it.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

READY = re.compile(r"ready: broker pulsar://[^:]+:(\d+) web http://[^:]+:(\d+)")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class BrokerProcess:
    def __init__(
        self, data_dir: Path, *, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
        cwd: Path | None = None, command: str = "standalone", port: int = 0, web_port: int = 0,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.data_dir = data_dir
        self.cwd = cwd  # where relative paths in settings resolve (default: the test's own directory)
        self.command = command
        self.start_timeout_s = start_timeout_s
        self.extra_args = extra_args
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.port = port
        self.web_port = web_port
        self.log_lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log_changed = threading.Condition()

    @property
    def url(self) -> str:
        return f"pulsar://localhost:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def start(self) -> BrokerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [
            sys.executable, "-m", "magnetar.cli", self.command,
            "--data-dir", str(self.data_dir),
            "--bind-address", "127.0.0.1",
            "--broker-port", str(self.port), "--web-port", str(self.web_port),
            *self.extra_args,
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=self.cwd
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._drain, args=(self.proc, self._lines), daemon=True).start()
        while True:
            try:
                line = self._lines.get(timeout=self.start_timeout_s)
            except queue.Empty:
                self.kill()
                raise RuntimeError(
                    f"magnetar {self.command} did not become ready:\n" + "".join(self.log_lines)) from None
            if line is None:
                raise RuntimeError(f"magnetar {self.command} exited during start:\n" + "".join(self.log_lines))
            match = READY.search(line)
            if match:
                self.port, self.web_port = int(match.group(1)), int(match.group(2))
                return self

    def _drain(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._log_changed:
                self.log_lines.append(line)
                self._log_changed.notify_all()
            lines.put(line)
        lines.put(None)

    def stop(self) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=STOP_TIMEOUT_S)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> BrokerProcess:
        """Graceful stop, then start on the same ports and data."""
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return "".join(self.log_lines)

    def wait_for_log(self, text: str, timeout_s: float) -> bool:
        """Wait until the broker logs a line containing ``text`` (True), or the timeout passes (False)."""
        return self.wait_for(lambda log: text in log, timeout_s)

    def wait_until(self, check: Callable[[], bool], timeout_s: float, recheck_s: float = 0.1) -> bool:
        """Wait until ``check()`` holds, for state the log does not show (HTTP answers, /proc): waits on the log
        condition, so it re-checks whenever the broker logs a line and at least every ``recheck_s``; bounded by
        ``timeout_s``. True if it held."""
        deadline = time.monotonic() + timeout_s
        while not check():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._log_changed:
                self._log_changed.wait(min(recheck_s, remaining))
        return True

    def wait_for(self, predicate: Callable[[str], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(whole log so far)`` holds, re-checked on each new log line (bounded)."""
        with self._log_changed:
            return self._log_changed.wait_for(lambda: predicate("".join(self.log_lines)), timeout_s)
