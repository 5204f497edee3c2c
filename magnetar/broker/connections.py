"""Counts of client connections for ``pulsar_active_connections`` and ``pulsar_connection_*``: the server
opens and closes connections and counts them here; the metrics read them. No sockets here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ConnectionCounts:
    created: int = 0  # accepted and served
    closed: int = 0
    refused: int = 0  # turned away before serving (connection limits)

    @property
    def active(self) -> int:
        return self.created - self.closed
