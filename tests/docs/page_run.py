"""Runs one page's code blocks in order, in one working directory, against the servers they ask for.

A page is one session, as a reader would type it: shell blocks run one after another in the page's directory
(which links ``.venv``, ``scripts``, ``examples`` and ``bench`` of this checkout, so ``.venv/bin/magnetar`` works),
python blocks run in ONE python process per page (a later block sees an earlier block's names), ``file`` blocks
write their text into the directory, and an ``output`` block must match the output of the block before it.

Ports: the documented ports (6650-6659, 8080-8089, 8443-8444, 2181-2183, 5000, 7077), where a block writes them as ports
(``:6650``, ``port 6650``, ``Port=6650``), are replaced by free ports of this run, the same number for the whole page,
so pages never meet each other's (or a developer's) servers. ``magnetar admin`` without ``--admin-url`` reaches the
page's 8080 through ``PULSAR_CLIENT_CONF``. Every process started here (the page's broker, moto, ZooKeeper, the python
worker, each shell block's process group) is stopped by its id when the page ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.blocks import NEEDS, REPO, Block
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import MotoServer, free_port
from tests.zk_server import ZooKeeperServer

DOC_PORTS = frozenset([*range(6650, 6660), *range(8080, 8090), 8443, 8444, 2181, 2182, 2183, 5000, 7077])
PORT_IN_TEXT = re.compile(r"(?P<pre>:|[Pp]ort(?:Tls)?[ =])(?P<port>\d{4})(?!\d)")
LINKED = (".venv", "scripts", "examples", "bench", "tests")
STOP_TIMEOUT_S = 15.0
POLL_S = 0.1
OUTPUT_TAIL = 80


class BlockFailed(AssertionError):
    pass


@dataclass
class PageRun:
    page: str
    workdir: Path
    ports: dict[int, int] = field(default_factory=dict)
    not_run: list[tuple[Block, str]] = field(default_factory=list)
    ran: int = 0
    broker: BrokerProcess | None = None
    broker_settings: tuple[tuple[str, str], ...] = ()
    moto: MotoServer | None = None
    zookeeper: ZooKeeperServer | None = None
    groups: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker: subprocess.Popen[str] | None = None
    last_output: str | None = None
    counter: int = 0
    timings: list[tuple[str, float]] = field(default_factory=list)  # (block, seconds), to see what a page costs

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name in LINKED:
            link = self.workdir / name
            if not link.exists():
                link.symlink_to(REPO / name)

    # --- the page --------------------------------------------------------------------------------------------
    def run(self, blocks: list[Block]) -> None:
        for block in blocks:
            self.run_block(block)

    def run_block(self, block: Block) -> None:
        if block.kind == "skip":
            self.not_run.append((block, f"skip: {block.arg}"))
            self.last_output = None
            return
        if block.kind == "file":
            (self.workdir / block.arg).write_text(self.substitute(block.text), encoding="utf-8")
            return
        if block.kind == "output":
            self.check_output(block)
            return
        unwired = sorted(need for need in block.needs if not NEEDS[need])
        if unwired:
            self.not_run.append((block, f"needs {', '.join(unwired)} (not wired yet)"))
            self.last_output = None
            return
        if "zookeeper" in block.needs:
            self.ensure_zookeeper()
        if "broker" in block.needs:
            self.ensure_broker(block)
        if "moto" in block.needs:
            self.ensure_moto()
        self.counter += 1
        started = time.monotonic()
        if block.kind == "shell":
            self.run_shell(block)
        else:
            self.run_python(block)
        self.timings.append((block.where, time.monotonic() - started))
        self.ran += 1

    # --- ports and environment ---------------------------------------------------------------------------------
    def port_for(self, documented: int) -> int:
        if documented not in self.ports:
            self.ports[documented] = free_port()
        return self.ports[documented]

    def substitute(self, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            port = int(match.group("port"))
            if port not in DOC_PORTS:
                return match.group(0)
            return f"{match.group('pre')}{self.port_for(port)}"

        return PORT_IN_TEXT.sub(replace, text)

    def documented_ports(self, text: str) -> list[int]:
        return sorted({int(m.group("port")) for m in PORT_IN_TEXT.finditer(text) if int(m.group("port")) in DOC_PORTS})

    def env(self) -> dict[str, str]:
        conf = self.workdir / ".client.conf"
        conf.write_text(f"webServiceUrl=http://localhost:{self.port_for(8080)}\n"
                        f"brokerServiceUrl=pulsar://localhost:{self.port_for(6650)}\n", encoding="utf-8")
        return dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
                    PULSAR_CLIENT_CONF=str(conf), PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")

    # --- servers ---------------------------------------------------------------------------------------------
    def ensure_broker(self, block: Block) -> None:
        if self.broker is not None:
            if block.settings and block.settings != self.broker_settings:
                raise BlockFailed(f"{block.where}: the page's broker already runs with {self.broker_settings}; put "
                                  f"broker settings on the first block that needs the broker")
            return
        if 6650 in self.ports and _listening(self.ports[6650]):
            if block.settings:
                raise BlockFailed(f"{block.where}: a broker started by the page itself runs at 6650; its settings "
                                  f"are the page's business")
            return  # a `starts` block of this page runs it
        broker = BrokerProcess(self.workdir / ".broker-data", cwd=self.workdir, extra_args=tuple(
            arg for k, v in block.settings for arg in ("--set", f"{k}={self.substitute(v)}")))
        broker.port, broker.web_port = self.ports.get(6650, 0), self.ports.get(8080, 0)
        self.broker = broker  # before start: a failed start is still cleaned up
        self.broker_settings = block.settings
        try:
            broker.start()
        except RuntimeError as exc:
            raise BlockFailed(f"{block.where}: the page's broker did not start: {exc}") from None
        self.ports[6650], self.ports[8080] = broker.port, broker.web_port

    def ensure_moto(self) -> None:
        if self.moto is None:
            self.moto = MotoServer(self.port_for(5000))
            self.moto.start()

    def ensure_zookeeper(self) -> None:
        """A ZooKeeper server (Debian's, from scripts/install) at the documented port 2181."""
        if self.zookeeper is None:
            self.zookeeper = ZooKeeperServer(port=self.port_for(2181))
            self.zookeeper.start()

    # --- shell -----------------------------------------------------------------------------------------------
    def run_shell(self, block: Block) -> None:
        script = self.workdir / f".block-{self.counter}.sh"
        script.write_text("set -euo pipefail\n" + self.substitute(block.text), encoding="utf-8")
        out_path = self.workdir / f".block-{self.counter}.out"
        with out_path.open("wb") as out:
            proc = subprocess.Popen(["bash", str(script)], cwd=self.workdir, env=self.env(), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        if "starts" in block.needs:
            self.groups.append(proc)
            self.wait_started(block, proc, out_path)
            self.last_output = out_path.read_text(errors="replace")
            return
        try:
            code = proc.wait(timeout=block.timeout_s)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            raise BlockFailed(self.report(block, f"still running after {block.timeout_s:.0f} s", out_path)) from None
        _stop_group(proc)  # a block that is not `starts` leaves nothing running
        self.last_output = out_path.read_text(errors="replace")
        if code != 0:
            raise BlockFailed(self.report(block, f"exit status {code}", out_path))

    def wait_started(self, block: Block, proc: subprocess.Popen[bytes], out_path: Path) -> None:
        """Until every port the block names accepts connections; the block's shell may exit (servers sent to the
        background) or keep running (a server in the foreground)."""
        ports = [self.ports[p] for p in self.documented_ports(block.text)]
        if not ports:
            raise BlockFailed(f"{block.where}: a `starts` block must name the ports of what it starts")
        deadline = time.monotonic() + block.timeout_s
        for _ in range(int(block.timeout_s / POLL_S) + 1):  # bounded in count and time
            code = proc.poll()
            if code not in (None, 0):
                raise BlockFailed(self.report(block, f"exit status {code} while starting", out_path))
            if all(_listening(port) for port in ports):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(POLL_S)  # another process's socket: there is no event to wait on
        raise BlockFailed(self.report(block, f"ports {ports} not open after {block.timeout_s:.0f} s", out_path))

    # --- python ----------------------------------------------------------------------------------------------
    def run_python(self, block: Block) -> None:
        if self.worker is None or self.worker.poll() is not None:
            self.worker = subprocess.Popen([sys.executable, "-m", "tests.docs.pyworker"], cwd=self.workdir,
                                           env=dict(self.env(), PYTHONPATH=str(REPO)), stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                           start_new_session=True)
        out_path = self.workdir / f".block-{self.counter}.out"
        self.env()  # refresh client.conf with the ports known now
        request = {"page": self.page, "line": block.line, "code": self.substitute(block.text), "out": str(out_path)}
        assert self.worker.stdin is not None and self.worker.stdout is not None
        self.worker.stdin.write(json.dumps(request) + "\n")
        self.worker.stdin.flush()
        ready, _, _ = select.select([self.worker.stdout], [], [], block.timeout_s)
        if not ready:
            _stop_group(self.worker)
            self.worker = None
            raise BlockFailed(self.report(block, f"still running after {block.timeout_s:.0f} s", out_path))
        line = self.worker.stdout.readline()
        if not line:
            raise BlockFailed(self.report(block, f"the python process died (status {self.worker.wait()})", out_path))
        answer = json.loads(line)
        self.last_output = out_path.read_text(errors="replace") if out_path.exists() else ""
        if not answer["ok"]:
            raise BlockFailed(self.report(block, answer["error"], out_path))

    # --- output ----------------------------------------------------------------------------------------------
    def check_output(self, block: Block) -> None:
        if self.last_output is None:
            self.not_run.append((block, "the block before it did not run"))
            return
        expected = [line.strip() for line in self.substitute(block.text).splitlines()]
        actual = [line.strip() for line in self.last_output.splitlines()]
        position = 0
        for line in expected:
            if not line or line == "...":
                continue
            pattern = re.compile(".*".join(re.escape(part) for part in line.split("...")))
            while position < len(actual) and not pattern.fullmatch(actual[position]):
                position += 1
            if position == len(actual):
                raise BlockFailed(f"{block.where}: output line {line!r} not found (in order) in the output of the "
                                  f"block before it:\n" + _tail(self.last_output))
            position += 1

    # --- reports and cleanup -----------------------------------------------------------------------------------
    def report(self, block: Block, what: str, out_path: Path) -> str:
        output = out_path.read_text(errors="replace") if out_path.exists() else ""
        text = f"{block.where} ({block.lang}, {' '.join(sorted(block.needs))}): {what}\n--- output ---\n{_tail(output)}"
        if self.broker is not None:
            text += f"\n--- the page's broker log ---\n{_tail(self.broker.log_text())}"
        return text

    def close(self) -> None:
        if self.worker is not None:
            _stop_group(self.worker)
        for proc in self.groups:
            _stop_group(proc)
        if self.broker is not None:
            self.broker.kill()
        if self.moto is not None:
            self.moto.stop()
        if self.zookeeper is not None:
            self.zookeeper.close()


def _tail(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(lines[-OUTPUT_TAIL:])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is in group ``pgid``: read from /proc, since zombies that nobody
    reaps still count for ``killpg``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                return True
    return False


def _stop_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGTERM the process group this harness created for ``proc`` (by its id), then SIGKILL what is left."""
    pgid = proc.pid  # start_new_session: the group's id is the leader's pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for _ in range(int(STOP_TIMEOUT_S / POLL_S) + 1):  # bounded: wait for the group to be empty
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0)
            if not _group_alive(pgid):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
