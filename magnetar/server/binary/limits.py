"""Admission limits at the network edge: connection counts.

``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp`` (Pulsar's keys; 0 = no limit) cap the binary
protocol's connections in total and per remote address; a connection over a cap is closed at once,
before it costs more than its socket.
"""

from __future__ import annotations

import logging
from collections import Counter

from magnetar.core.logs import RateLimitedLog

log = logging.getLogger("magnetar.server.limits")


class ConnectionLimiter:
    def __init__(self, total_max: int, per_address_max: int) -> None:
        self.total_max = total_max
        self.per_address_max = per_address_max
        self.total = 0
        self._by_address: Counter[str] = Counter()
        self._refusals = RateLimitedLog(log, interval_s=10.0)

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when over a cap."""
        if self.total_max > 0 and self.total >= self.total_max:
            self._refusals.warning("refusing connection from %s: brokerMaxConnections=%d reached",
                                   address, self.total_max)
            return False
        if self.per_address_max > 0 and self._by_address[address] >= self.per_address_max:
            self._refusals.warning("refusing connection from %s: brokerMaxConnectionsPerIp=%d reached",
                                   address, self.per_address_max)
            return False
        self.total += 1
        self._by_address[address] += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self._by_address[address] -= 1
        if self._by_address[address] <= 0:
            del self._by_address[address]
