"""``magnetar perf --processes N``: N client processes load the broker at once; the parent merges what they saw.

One Python client process tops out well below the broker (the official client's callbacks share one GIL), so
client-bound msg/s would hide the broker's own cost. Each child (``spawn``: no inherited client threads) runs
the usual driver on its share of the messages, rate and topics; once every child is connected and warmed up the
parent opens them all at once, then each child sends its recorders' intervals (counts and the raw latency
histogram) every tick. The parent adds them into its own recorders, so the progress lines, totals and latency
percentiles are those of one run over all processes.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue as queue_module
import signal
import threading
import time
from multiprocessing.synchronize import Event
from typing import Any, TextIO

from magnetar.perf._flows import Flows, share
from magnetar.perf._options import PerfOptions
from magnetar.perf._run import (
    START_TIMEOUT_S,
    TICK_S,
    PerfError,
    clock,
    drive,
    driver_for,
    finish,
    measured_recorders,
)

CHILD_POLL_S = 0.1  # how often a child looks at the parent's stop signal
JOIN_TIMEOUT_S = 30.0


def child_options(options: PerfOptions, index: int) -> PerfOptions:
    """Process ``index``'s part: its share of the count and rate; the parent owns the clock and the output."""
    return dataclasses.replace(
        options, process_index=index, messages=share(options.messages, options.processes, index),
        rate_per_s=options.rate_per_s / options.processes, duration_s=0.0, json=False, progress=False,
        broker_pid=0,
    )


def measure_processes(options: PerfOptions, flows: Flows, out: TextIO, err: TextIO) -> int:
    context = multiprocessing.get_context("spawn")
    inbox: Any = context.Queue()
    go, stop = context.Event(), context.Event()
    children = [context.Process(target=child_main, args=(child_options(options, i), inbox, go, stop), daemon=True)
                for i in range(options.processes)]
    for child in children:
        child.start()
    parent = _Parent(flows, inbox, stop, children)
    try:
        parent.await_ready()
        go.set()
        clocked = clock(options, flows, parent.wait, parent.alive, err)
    finally:
        stop.set()
        for child in children:
            child.join(JOIN_TIMEOUT_S)
            if child.is_alive():
                child.kill()
    return finish(options, flows, clocked, "; ".join(parent.problems), out, err)


class _Parent:
    """The parent's side of the queue: readiness, intervals into the recorders, the end of each child."""

    def __init__(self, flows: Flows, inbox: Any, stop: Event, children: list[Any]) -> None:
        self.flows = flows
        self.inbox = inbox
        self.stop = stop
        self.children = children
        self.ended: set[int] = set()
        self.ready = 0
        self.problems: list[str] = []

    @property
    def running(self) -> int:
        return len(self.children) - len(self.ended)

    def await_ready(self) -> None:
        deadline_s = time.monotonic() + START_TIMEOUT_S
        while self.ready + len(self.problems) < self.running and time.monotonic() < deadline_s:
            self._take(deadline_s - time.monotonic())
        if self.problems or self.ready < self.running:
            raise PerfError(f"could not start: {'; '.join(self.problems) or 'timed out'}")

    def alive(self) -> bool:
        return self.running > 0

    def wait(self, timeout_s: float) -> None:
        """Take what children send until ``timeout_s`` passed or every child ended."""
        deadline_s = time.monotonic() + timeout_s
        while self.running:
            if self.flows.stop.is_set():
                self.stop.set()  # the duration is up or Ctrl-C: every child stops, then sends its last interval
            left_s = deadline_s - time.monotonic()
            if left_s <= 0:
                return
            self._take(min(left_s, TICK_S))

    def _take(self, timeout_s: float) -> None:
        try:
            kind, index, body = self.inbox.get(timeout=max(timeout_s, 0.001))
        except queue_module.Empty:
            self._bury()
            return
        if kind == "ready":
            self.ready += 1
        elif kind == "tick":
            recorders = {r.name: r for r in (self.flows.publish, self.flows.consume)}
            for name, hist, messages, size, errors in body:
                recorders[name].add(hist, messages, size, errors)
        elif kind == "done":
            self.ended.add(index)
            if body:
                self.problems.append(f"process {index}: {body}")

    def _bury(self) -> None:
        """A child that died without saying so (killed, crashed) ends too, as a failure; nothing waits on it."""
        for index, child in enumerate(self.children):
            if index not in self.ended and not child.is_alive():
                self.ended.add(index)
                self.problems.append(f"process {index} exited with code {child.exitcode}")


def child_main(options: PerfOptions, outbox: Any, go: Event, stop: Event) -> None:
    """One client process: connect and warm up, wait for the parent's go, send intervals until done."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and says stop
    index = options.process_index
    flows = Flows()
    flows.gate.clear()
    failure: list[BaseException] = []
    thread = threading.Thread(target=drive, args=(driver_for(options), options, flows, failure), daemon=True)
    thread.start()
    if not flows.started.wait(START_TIMEOUT_S) or failure:
        flows.stop.set()
        outbox.put(("done", index, f"{failure[0] if failure else 'timed out'}"))
        return
    outbox.put(("ready", index, None))
    if not go.wait(START_TIMEOUT_S * 2):
        stop.set()
    flows.gate.set()
    recorders = measured_recorders(options, flows)
    last_s = time.monotonic()
    while thread.is_alive():
        thread.join(CHILD_POLL_S)
        if stop.is_set():
            flows.stop.set()
        if time.monotonic() - last_s >= TICK_S or not thread.is_alive():
            last_s = time.monotonic()
            outbox.put(("tick", index, [(r.name, *r.take()) for r in recorders]))
    outbox.put(("done", index, f"{type(failure[0]).__name__}: {failure[0]}" if failure else None))
