"""Test-only crash points: aimed kills for the SIGKILL tests.

Code that makes a multi-step change durable (a ledger rollover, a retention trim, a cursor write) names the
moments between its steps with :func:`reached`. Nothing happens unless a test armed that name (config key
``magnetarTestingCrashPoints``, never set in production): then the process logs one line and SIGKILLs
itself right there, so a test can kill the broker between two writes that no log line separates, with no
sleep and no race. ``name@N`` fires on the N-th time the point is reached; ``name~text`` counts only the
times it is reached for a subject (a managed ledger's or cursor's name) containing ``text``.

Like ``clock`` and ``faults``, this module sits below every layer and imports nothing from magnetar.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("magnetar.crashpoints")

#: Every crash point the code names; arming another name is refused (a typo would silently never fire).
KNOWN = frozenset({
    "rollover.created",   # the next ledger exists in storage; the managed-ledger record does not list it
    "rollover.recorded",  # the record lists the next ledger; the broker has not switched to it
    "trim.queued",        # two-phase: the trimmed ledgers are queued for deletion; the record still lists them
    "trim.recorded",      # the record no longer lists the trimmed ledgers; their files are not deleted yet
    "trim.deleting",      # one-phase: some trimmed ledgers are deleted, the others are not
    "cursor.persisting",  # acks are applied in memory; the cursor record is about to be written
    "cursor.persisted",   # the cursor record was written; nothing after it happened
})

Armed = dict[str, tuple[int, str]]  # name -> (times it must still be reached, subject filter)
_armed: Armed = {}


def parse(spec: str) -> Armed:
    """``"a,b@3~x"`` -> ``{"a": (1, ""), "b": (3, "x")}``; unknown names and counts below 1 are refused."""
    points: Armed = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        item, _, subject = item.partition("~")
        name, _, count = item.partition("@")
        if name not in KNOWN:
            raise ValueError(f"unknown crash point {name!r} (known: {', '.join(sorted(KNOWN))})")
        hits = int(count) if count else 1
        if hits < 1:
            raise ValueError(f"crash point {name}: the count must be at least 1, got {hits}")
        points[name] = (hits, subject)
    return points


def arm(points: Armed) -> None:
    _armed.clear()
    _armed.update(points)
    for name, (hits, subject) in sorted(points.items()):
        log.warning("TESTING: crash point %s armed: the process kills itself the %d. time it is reached%s",
                    name, hits, f" for a name containing {subject!r}" if subject else "")


def reached(name: str, subject: str = "") -> None:
    """The process is at ``name`` (for ``subject``): SIGKILL it if a test armed this point and its count is
    used up."""
    armed = _armed.get(name)
    if armed is None or armed[1] not in subject:
        return
    left, wanted = armed
    if left > 1:
        _armed[name] = (left - 1, wanted)
        return
    log.warning("TESTING: crash point %s reached for %s: SIGKILL", name, subject or "-")
    for handler in logging.getLogger().handlers + log.handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)
