"""Peers in the same run: the shared peerbench harness runs Redis, RabbitMQ stream and NATS beside magnetar.

The harness is not part of this repository; ``--peers`` (or ``MAGNETAR_PEERBENCH``) names its directory, the one
holding ``peerbench.py`` and ``peers/start.sh``. Its README says how to install the peers once (Debian packages
and a virtualenv with their Python clients, ``MAGNETAR_PEERBENCH_PYTHON``, default ``/tmp/pv/bin/python``). The
suite starts the peers, runs the harness's workload (N x 1 KiB published with each client's best batched API,
read back, then 1,000 msg/s latency with a live consumer), runs its physical reference (one 4 KiB write+fsync),
stops the peers and turns the summaries into per-message figures keyed like the rows of the table.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEMS = ("redis", "redis-always", "rabbitmq-stream", "nats")
NAMES = {"redis": "Redis", "redis-always": "Redis appendfsync always", "rabbitmq-stream": "RabbitMQ stream",
         "nats": "NATS JetStream"}
START_TIMEOUT_S = 180
RUN_TIMEOUT_S = 1_200


@dataclass
class PeerResults:
    """Figures per peer (``"RabbitMQ stream"`` -> ``{"publish CPU µs/msg": 3.9, ...}``), or why there are none."""

    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    note: str = "not run"
    commands: list[str] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)

    def value(self, peer: str, figure: str) -> float | None:
        return self.figures.get(peer, {}).get(figure)


def harness_dir(option: str | None) -> Path | None:
    text = option or os.environ.get("MAGNETAR_PEERBENCH")
    return Path(text) if text else None


def run_peers(directory: Path, quick: bool, repeats: int) -> PeerResults:
    """Start the peers, measure them, stop them. Any failure becomes the note instead of figures."""
    python = os.environ.get("MAGNETAR_PEERBENCH_PYTHON", "/tmp/pv/bin/python")
    results = PeerResults(note="")
    if not (directory / "peerbench.py").exists() or not Path(python).exists():
        return PeerResults(note=f"not run: no {directory / 'peerbench.py'} or no {python} (see its README)")
    started = _sh(directory, ["peers/start.sh", "nats", "redis", "rabbitmq"], START_TIMEOUT_S)
    try:
        n = "50000" if quick else "200000"
        lat_n = "1000" if quick else "2000"
        run = [python, "peerbench.py", "run", *SYSTEMS, "--n", n, "--lat-n", lat_n, "--repeat", str(repeats),
               "--max-other-cores", "0", "--wait-quiet", "0"]
        phys = [python, "peerbench.py", "phys", "--repeat", "1", "--mib", "64", "--small-n", "1000",
                "--tcp-mib", "64", "--iperf-secs", "1"]
        results.commands = [" ".join(run[1:]), " ".join(phys[1:])]
        for line in _sh(directory, run, RUN_TIMEOUT_S).splitlines():
            _add_summary(results, line)
        for line in _sh(directory, phys, RUN_TIMEOUT_S).splitlines():
            _add_phys(results, line)
    except (subprocess.SubprocessError, OSError) as exc:
        results.note = f"failed: {exc}"
    finally:
        _sh(directory, ["peers/stop.sh"], START_TIMEOUT_S, check=False)
    if not results.figures and not results.note:
        results.note = "no figures; peers/start.sh said: " + started.strip().replace("\n", "; ")
    return results


def _sh(directory: Path, cmd: list[str], timeout_s: float, *, check: bool = True) -> str:
    done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=timeout_s, check=False)
    if check and done.returncode != 0:
        raise subprocess.SubprocessError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr[-500:]}")
    return done.stdout


def _add_summary(results: PeerResults, line: str) -> None:
    document = _json(line)
    if document.get("kind") != "summary" or document.get("system") not in NAMES:
        return
    results.raw.append(document)
    median, n = document.get("median", {}), document.get("n")
    if not n:
        return
    figures: dict[str, float] = {}
    for flow in ("publish", "consume"):
        server_s = median.get(f"{flow}_server_cpu_s")
        if server_s is not None:
            figures[f"{flow} CPU µs/msg"] = server_s / n * 1e6
        if f"{flow}_msgs_per_s" in median:
            figures[f"{flow} msg/s"] = median[f"{flow}_msgs_per_s"]
    if "latency_p99_ms" in median:
        figures["e2e p99 ms"] = median["latency_p99_ms"]
    results.figures[NAMES[document["system"]]] = figures


def _add_phys(results: PeerResults, line: str) -> None:
    document = _json(line)
    if document.get("kind") != "phys":
        return
    results.raw.append(document)
    disk = document.get("disk", {})
    for mode, label in (("4KiB_append+fsync", "append + fsync"), ("4KiB_overwrite+fdatasync", "overwrite + fdatasync")):
        if mode in disk:
            results.figures[f"one 4 KiB {label}"] = {"sync p50 ms": disk[mode]["sync_p50_ms"],
                                                     "sync p99 ms": disk[mode]["sync_p99_ms"]}


def _json(line: str) -> dict[str, Any]:
    if not line.startswith("{"):
        return {}
    try:
        document: dict[str, Any] = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return document
