"""What a driver shares with the runner: the recorders, the stop signal and how each client's share is cut.

A driver runs in a background thread until its work is done or ``stop`` is set; the runner owns the clock,
the progress line and the output. ``started`` is set once warm-up is over; measuring begins when ``gate`` opens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from magnetar.perf._options import PerfOptions
from magnetar.perf._recorder import Recorder

RECEIVE_POLL_MS = 100  # how often an idle consumer looks at the stop signal
DRAIN_TIMEOUT_S = 60.0  # bound on waiting for the last receipts after the sends stop
CUMULATIVE_ACK_EVERY = 100  # messages between cumulative acks


def _open_gate() -> threading.Event:
    """Open unless a multi-process run closes it to start every process's clients at once."""
    gate = threading.Event()
    gate.set()
    return gate


@dataclass(slots=True)
class Flows:
    publish: Recorder = field(default_factory=lambda: Recorder("publish"))
    consume: Recorder = field(default_factory=lambda: Recorder("consume"))
    stop: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=_open_gate)  # drivers wait on it after ``started``

    def consumed_enough(self, options: PerfOptions) -> bool:
        return options.messages > 0 and self.consume.seen >= options.messages


class Driver(Protocol):
    def __call__(self, options: PerfOptions, flows: Flows) -> None: ...


def share(total: int, parts: int, index: int) -> int:
    """Message count of part ``index`` when ``total`` is cut into ``parts`` (0 total: no limit, 0)."""
    if total == 0:
        return 0
    return total // parts + (1 if index < total % parts else 0)


def rate_share(options: PerfOptions, producers: int) -> float:
    return options.rate_per_s / producers if options.rate_per_s > 0 else 0.0
