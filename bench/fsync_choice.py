"""What one durable 1 KiB append costs on this disk: fsync vs fdatasync, appending vs a preallocated file.

    .venv/bin/python bench/fsync_choice.py [--dir DIR] [--count 2000] [--repeats 2] [--group 1]

Each variant writes ``--group`` records of 1,036 bytes (a 1 KiB message as the embedded store frames it)
then syncs, ``--count`` times, in one process, the variants alternating so all see the same machine:

- ``append+fsync``: O_APPEND write, fsync (what the embedded store does);
- ``append+fdatasync``: O_APPEND write, fdatasync (the size still changes, so the inode is flushed too);
- ``prealloc+fdatasync``: pwrite into a file already written with zeros and synced, fdatasync (no size
  change: only the data pages are flushed).

Prints latency p50/p99/mean per sync and the process CPU (user+system) per sync, which is what the broker
pays for each group-commit round. Figures and the choice made are in docs/publish-path.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable

RECORD_BYTES = 1036


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(directory: str, name: str, *, prealloc: bool, sync: Callable[[int], None], count: int, group: int) -> str:
    path = os.path.join(directory, f"fsync-choice-{name}.log")
    record = os.urandom(RECORD_BYTES) * group
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | (0 if prealloc else os.O_APPEND), 0o644)
    try:
        if prealloc:
            os.pwrite(fd, bytes(count * len(record) + 4096), 0)
            os.fsync(fd)
        latencies_ms: list[float] = []
        offset, cpu_before = 0, _cpu_s()
        for _ in range(count):
            started = time.perf_counter()
            if prealloc:
                os.pwrite(fd, record, offset)
                offset += len(record)
            else:
                os.write(fd, record)
            sync(fd)
            latencies_ms.append((time.perf_counter() - started) * 1e3)
        cpu_us = (_cpu_s() - cpu_before) / count * 1e6
    finally:
        os.close(fd)
        os.unlink(path)
    latencies_ms.sort()
    return (f"{name:20s} p50 {latencies_ms[count // 2]:6.3f} ms  p99 {latencies_ms[int(count * 0.99)]:6.3f} ms  "
            f"mean {statistics.fmean(latencies_ms):6.3f} ms  CPU {cpu_us:6.1f} µs per sync")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="a directory on the disk to measure (default: a temporary one)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--group", type=int, default=1, help="records written per sync (a group-commit round)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for _ in range(args.repeats):
            for name, prealloc, sync in (
                ("append+fsync", False, os.fsync),
                ("append+fdatasync", False, os.fdatasync),
                ("prealloc+fdatasync", True, os.fdatasync),
            ):
                print(run(directory, name, prealloc=prealloc, sync=sync, count=args.count, group=args.group),
                      flush=True)


if __name__ == "__main__":
    main()
