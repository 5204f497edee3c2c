"""Which live broker gets an unowned bundle: the leader's decision (Pulsar's ``LeastLoadedServer`` strategy of
the modular load manager), made so it never flaps.

- The load of a broker is the number of bundles it owns, as its last report lists them, plus the bundles this
  leader assigned to it recently that its report does not list yet (so a burst of lookups for a new
  partitioned topic spreads over the brokers instead of landing on the one that looked idlest a moment ago).
- A bundle assigned recently goes to the same broker again while that broker is alive (two lookups racing
  for one bundle get one answer; Pulsar keeps its in-flight assignments the same way).
- Among equally loaded brokers the choice is a rendezvous hash of (bundle, broker): stable for a bundle,
  spread over bundles, and the same on whichever broker decides when the leader is unknown.
- ``exclude``: brokers that must not get it (the broker a bundle is being moved away from).

Pure logic over the reports it is given, with an injected clock: no store, no sockets.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from magnetar.core.clock import Clock

RECENT_TTL_MS = 60_000  # an assignment counts until the broker's report lists it, at most this long
RECENT_MAX = 100_000  # assignments remembered (oldest forgotten first)


@dataclass(frozen=True, slots=True)
class _Assigned:
    broker_id: str
    at_ms: int


def _rendezvous(bundle: str, broker_id: str) -> int:
    digest = hashlib.blake2b(f"{bundle}\x00{broker_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class Assigner:
    """The leader's memory of recent assignments and the choice among live brokers."""

    def __init__(self, clock: Clock, *, recent_ttl_ms: int = RECENT_TTL_MS) -> None:
        self._clock = clock
        self._ttl_ms = recent_ttl_ms
        self._recent: OrderedDict[str, _Assigned] = OrderedDict()

    def choose(
        self, bundle: str, brokers: Mapping[str, Collection[str]], *, exclude: Collection[str] = ()
    ) -> str | None:
        """The broker id for ``bundle`` (``tenant/ns/0x.._0x..``) among ``brokers`` (id -> the bundles its
        report lists); None when none is eligible. The choice is remembered."""
        now = self._clock.now_ms()
        self._expire(now, brokers)
        eligible = {b: owned for b, owned in brokers.items() if b not in exclude}
        if not eligible:
            return None
        previous = self._recent.get(bundle)
        if previous is not None and previous.broker_id in eligible:
            return previous.broker_id
        pending: dict[str, int] = {}
        for name, assigned in self._recent.items():
            if name != bundle and name not in brokers.get(assigned.broker_id, ()):
                pending[assigned.broker_id] = pending.get(assigned.broker_id, 0) + 1
        chosen = min(eligible, key=lambda b: (len(eligible[b]) + pending.get(b, 0), -_rendezvous(bundle, b)))
        self._remember(bundle, chosen, now)
        return chosen

    def forget(self, bundle: str) -> None:
        """The bundle's owner is known (or it was split): no assignment of it stands any more."""
        self._recent.pop(bundle, None)

    def _remember(self, bundle: str, broker_id: str, now_ms: int) -> None:
        self._recent[bundle] = _Assigned(broker_id, now_ms)
        self._recent.move_to_end(bundle)
        while len(self._recent) > RECENT_MAX:
            self._recent.popitem(last=False)

    def _expire(self, now_ms: int, brokers: Mapping[str, Collection[str]]) -> None:
        for name in [n for n, a in self._recent.items()
                     if now_ms - a.at_ms > self._ttl_ms or a.broker_id not in brokers]:
            del self._recent[name]
