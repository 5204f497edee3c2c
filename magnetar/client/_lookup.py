"""Topic discovery: PARTITIONED_METADATA and LOOKUP (following redirects) over the pool.

Answers "how many partitions" and "which broker URL serves this topic"; knows nothing of
producers or consumers. Failures map through ``errors.from_server``.
"""

from __future__ import annotations

import functools

from magnetar.client._pool import ConnectionPool
from magnetar.client.errors import LookupError_, from_server
from magnetar.protocol import commands, pb

__all__ = ["lookup_broker", "partition_count", "topics_of_namespace"]

_PM = pb.CommandPartitionedTopicMetadataResponse
_LR = pb.CommandLookupTopicResponse


async def partition_count(pool: ConnectionPool, service_url: str, topic: str) -> int:
    conn = await pool.get(service_url)
    reply = await conn.request(lambda rid: commands.partitioned_metadata(topic, rid))
    r = reply.partitionMetadataResponse
    if not r.HasField("response") or r.response != _PM.Success:
        raise from_server(r.error, r.message or f"partitioned metadata for {topic} failed")
    return r.partitions


async def lookup_broker(pool: ConnectionPool, service_url: str, topic: str, *, max_redirects: int) -> str:
    """The ``pulsar://`` URL of the broker that owns ``topic``."""
    url, authoritative = service_url, False
    for _ in range(max_redirects + 1):
        conn = await pool.get(url)
        reply = await conn.request(functools.partial(_lookup, topic, authoritative=authoritative))
        r = reply.lookupTopicResponse
        if not r.HasField("response") or r.response == _LR.Failed:
            raise from_server(r.error, r.message or f"lookup of {topic} failed")
        if not r.brokerServiceUrl:
            raise LookupError_(f"lookup of {topic} returned no broker URL")
        if r.response == _LR.Connect:
            return service_url if r.proxy_through_service_url else r.brokerServiceUrl
        url, authoritative = r.brokerServiceUrl, r.authoritative
    raise LookupError_(f"more than {max_redirects} lookup redirects for {topic}")


def _lookup(topic: str, request_id: int, *, authoritative: bool) -> pb.BaseCommand:
    cmd = commands.lookup(topic, request_id, authoritative=authoritative)
    return cmd


async def topics_of_namespace(pool: ConnectionPool, service_url: str, namespace: str) -> list[str]:
    conn = await pool.get(service_url)
    reply = await conn.request(lambda rid: commands.get_topics_of_namespace(rid, namespace))
    return list(reply.getTopicsOfNamespaceResponse.topics)
