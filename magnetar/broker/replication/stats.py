"""The ``replication`` section of topic stats (Pulsar's ReplicatorStats per remote cluster) and its sum
over partitions. Outbound figures come from this topic's replicators, inbound ones from the remote
replicators' producers publishing here. Builders read, never change; no HTTP.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, Protocol

from magnetar.broker.replication.api import source_of_producer
from magnetar.broker.topic.extensions import ReplicatorView
from magnetar.broker.topic.producer import Producer


class _Rates(Protocol):
    def rate(self, key: str, counter: float) -> float: ...


def _blank() -> dict[str, Any]:
    return {
        "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
        "msgRateExpired": 0.0, "replicationBacklog": 0, "connected": False, "replicationDelayInSeconds": 0,
        "inboundConnection": None, "inboundConnectedSince": None,
        "outboundConnection": None, "outboundConnectedSince": None,
    }


def replication_stats(
    topic_name: str, replicators: Iterable[ReplicatorView], inbound: Iterable[Producer], rates: _Rates
) -> dict[str, dict[str, Any]]:
    """Per remote cluster: rates in (from its replicator) and out (to it), backlog, connection, delay."""
    result: dict[str, dict[str, Any]] = {}
    for r in replicators:
        key = f"{topic_name}|repl-out|{r.remote_cluster}"
        stats = result.setdefault(r.remote_cluster, _blank())
        stats.update({
            "msgRateOut": rates.rate(key + "|msg", r.msg_out_counter),
            "msgThroughputOut": rates.rate(key + "|bytes", r.bytes_out_counter),
            "replicationBacklog": r.backlog(),
            "connected": r.connected,
            "replicationDelayInSeconds": int(r.delay_s()),
            "outboundConnection": r.remote_address if r.connected else None,
            "outboundConnectedSince": _iso(r.connected_since_ms),
        })
    for p in inbound:
        source = source_of_producer(p.name)
        if source is None:
            continue
        key = f"{topic_name}|repl-in|{source}|{p.name}"
        stats = result.setdefault(source, _blank())
        stats["msgRateIn"] += rates.rate(key + "|msg", p.msg_in_counter)
        stats["msgThroughputIn"] += rates.rate(key + "|bytes", p.bytes_in_counter)
        stats["inboundConnection"] = p.endpoint.remote_address
        stats["inboundConnectedSince"] = _iso(p.created_ms)
    return result


_SUMMED = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgRateExpired", "replicationBacklog")


def sum_replication(partitions: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Partitioned stats: rates and backlog summed, connected only if every partition's is, the worst delay."""
    total: dict[str, dict[str, Any]] = {}
    for part in partitions:
        for cluster, stats in part.items():
            into = total.get(cluster)
            if into is None:
                total[cluster] = dict(stats)
                continue
            for key in _SUMMED:
                into[key] += stats[key]
            into["connected"] = into["connected"] and stats["connected"]
            into["replicationDelayInSeconds"] = max(into["replicationDelayInSeconds"],
                                                    stats["replicationDelayInSeconds"])
    return total


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
