"""Run one ``magnetar perf`` measurement: prepare topics, start the driver thread, tick once a second.

The runner owns time: it starts the clock when the driver says warm-up is over, stops the driver when the
duration is up (or on Ctrl-C), ticks the recorders into per-second intervals for the progress line and
totals for the summary. Partitioned topics are created through the admin HTTP API, as pulsar-perf does.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from magnetar.perf._flows import Driver, Flows
from magnetar.perf._options import PerfOptions
from magnetar.perf._recorder import Interval, Recorder
from magnetar.perf._report import progress_line, summary_json, summary_table

TICK_S = 1.0
START_TIMEOUT_S = 120.0  # bound on connecting, subscribing and warming up
INTERVALS_MAX = 86_400  # a day of per-second intervals kept for --json
ADMIN_TIMEOUT_S = 30.0


class PerfError(RuntimeError):
    """The run could not be set up (no broker, admin API refused, driver failed)."""


def driver_for(options: PerfOptions) -> Driver:
    if options.client == "official":
        from magnetar.perf._official import run_official

        return run_official
    from magnetar.perf._native import run_native

    return run_native


def create_partitions(options: PerfOptions) -> None:
    """Create each topic with ``options.partitions`` partitions (409 Conflict: it exists; fine)."""
    for topic in options.all_topic_names():
        domain, _, rest = topic.partition("://") if "://" in topic else ("persistent", "", f"public/default/{topic}")
        path = "/".join(urllib.parse.quote(part, safe="") for part in rest.split("/"))
        url = f"{options.admin_url.rstrip('/')}/admin/v2/{domain}/{path}/partitions"
        request = urllib.request.Request(url, data=str(options.partitions).encode(), method="PUT",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_S):
                pass
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise PerfError(f"creating {topic} with {options.partitions} partitions: HTTP {exc.code}") from exc
        except OSError as exc:
            raise PerfError(f"admin API at {options.admin_url} unreachable: {exc}") from exc


def measure(options: PerfOptions, flows: Flows, out: TextIO, err: TextIO) -> int:
    """One process measures (``_processes`` runs several, each measuring in its own)."""
    failure: list[BaseException] = []
    thread = threading.Thread(target=drive, args=(driver_for(options), options, flows, failure), daemon=True)
    thread.start()
    if not flows.started.wait(START_TIMEOUT_S) or failure:
        flows.stop.set()
        raise PerfError(f"could not start: {failure[0] if failure else 'timed out'}")
    clocked = clock(options, flows, thread.join, thread.is_alive, err)
    problem = f"{type(failure[0]).__name__}: {failure[0]}" if failure else ""
    return finish(options, flows, clocked, problem, out, err)


@dataclass(frozen=True, slots=True)
class Clocked:
    """What the clock saw: the measured time, the per-second intervals, the broker's CPU over that time."""

    elapsed_s: float
    intervals: list[list[Interval]]
    server_cpu_s: float | None


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process on this machine (``/proc/<pid>/stat``); None when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime: fields 14 and 15


def clock(options: PerfOptions, flows: Flows, wait: Callable[[float], object], alive: Callable[[], bool],
          err: TextIO) -> Clocked:
    """Tick the recorders once a second until the work ends (``alive`` false); stop it when the duration is up.

    ``wait(seconds)`` blocks until the next tick is due or the work ended (a thread join, a queue drain)."""
    recorders = measured_recorders(options, flows)
    intervals: list[list[Interval]] = []
    cpu_before_s = process_cpu_s(options.broker_pid) if options.broker_pid else None
    start_s = last_s = time.perf_counter()
    try:
        while alive():  # bounded: the work ends on its count, or on stop (duration / Ctrl-C)
            wait(max(0.0, last_s + TICK_S - time.perf_counter()))
            now_s = time.perf_counter()
            if options.duration_s and now_s - start_s >= options.duration_s:
                flows.stop.set()
            if now_s - last_s >= TICK_S or not alive():
                partial = now_s - last_s < TICK_S
                tick = [r.tick(now_s - last_s) for r in recorders]
                last_s = now_s
                if len(intervals) < INTERVALS_MAX:
                    intervals.append(tick)
                if options.progress and not partial:
                    print(progress_line(now_s - start_s, tick), file=err, flush=True)
    except KeyboardInterrupt:  # a second signal, or one outside the main thread's handler
        flows.stop.set()
        wait(START_TIMEOUT_S)
    elapsed_s = time.perf_counter() - start_s
    cpu_after_s = process_cpu_s(options.broker_pid) if cpu_before_s is not None else None
    used_s = cpu_after_s - cpu_before_s if cpu_after_s is not None and cpu_before_s is not None else None
    return Clocked(elapsed_s, intervals, used_s)


def finish(options: PerfOptions, flows: Flows, clocked: Clocked, problem: str, out: TextIO, err: TextIO) -> int:
    """Fold the last counts in, print the closing line and the summary; 1 when ``problem`` says the run failed."""
    elapsed_s, cpu_s = clocked.elapsed_s, clocked.server_cpu_s
    recorders = measured_recorders(options, flows)
    for r in recorders:
        r.tick(0.0)
    totals = [r.overall(elapsed_s) for r in recorders]
    if options.progress:  # the closing line covers the whole run, never a partial second scaled up
        print(progress_line(elapsed_s, totals, label="total"), file=err, flush=True)
    if problem:
        print(f"magnetar perf: {problem}", file=err)
    text = summary_json(options, elapsed_s, totals, clocked.intervals, cpu_s) if options.json else \
        summary_table(options, elapsed_s, totals, cpu_s)
    print(text, file=out, flush=True)
    return 1 if problem else 0


def measured_recorders(options: PerfOptions, flows: Flows) -> list[Recorder]:
    return [r for r in (flows.publish, flows.consume) if _measures(options, r.name)]


def _measures(options: PerfOptions, flow: str) -> bool:
    return (flow == "publish" and options.verb != "consume") or (flow == "consume" and options.verb != "produce")


def drive(driver: Driver, options: PerfOptions, flows: Flows, failure: list[BaseException]) -> None:
    try:
        driver(options, flows)
    except Exception as exc:
        failure.append(exc)
    finally:
        flows.started.set()
