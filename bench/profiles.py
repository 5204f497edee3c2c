"""Profile the broker with py-spy while a workload runs: a flame graph SVG and a top-functions text per path.

py-spy samples the running broker from outside (no code change, no restart); ``--idle`` is off, so the
samples are where the broker spends CPU. The text lists self time and inclusive time per function.
"""

from __future__ import annotations

import collections
import contextlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

SAMPLE_RATE_HZ = 250
STOP_TIMEOUT_S = 60
TOP_ROWS = 35


class Profiler:
    def __init__(self, directory: Path, *, gil: bool = False) -> None:
        self.directory = directory
        self.gil = gil  # sample only the thread holding the GIL: the broker's Python CPU, not its waits
        self.py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

    @contextlib.contextmanager
    def record(self, pid: int, name: str) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        raw = self.directory / f"{name}.raw.txt"
        svg = self.directory / f"{name}.svg"
        procs = [
            subprocess.Popen([self.py_spy, "record", "--pid", str(pid), "-r", str(SAMPLE_RATE_HZ), "-f", fmt,
                              "-o", str(path), "--nonblocking", *(["--gil"] if self.gil else [])],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for fmt, path in (("raw", raw), ("flamegraph", svg))
        ]
        try:
            yield
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGINT)
            for proc in procs:
                proc.wait(STOP_TIMEOUT_S)
        if raw.exists():
            (self.directory / f"{name}.top.txt").write_text(top_functions(raw))
            raw.unlink()


def top_functions(raw: Path) -> str:
    """Self and inclusive shares of samples per function, from py-spy's raw (collapsed stacks) output."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{total} samples at {SAMPLE_RATE_HZ} Hz (busy samples only)", "", "self time:"]
    lines += [f"{n / total:7.1%}  {frame}" for frame, n in own.most_common(TOP_ROWS)]
    lines += ["", "inclusive time:"]
    lines += [f"{n / total:7.1%}  {frame}" for frame, n in inclusive.most_common(TOP_ROWS)]
    return "\n".join(lines) + "\n"
