"""The geo-replicator's remote producers, built on this client (the broker's ``RemoteProducerFactory``).

The broker declares what it needs (``magnetar.broker.replication.api``) and cannot import a client; the
composition root (``magnetar standalone``) hands it a :class:`RemoteProducers`. It matches the broker's
Protocols structurally and imports nothing from the broker. One :class:`~magnetar.client.Client` per
remote broker URL, shared by all of that cluster's replicators; partitioned topics are created on the
remote through its admin API (``serviceUrl``) so the remote has the same partition count.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any, Protocol

import aiohttp

from magnetar.client._client import Client
from magnetar.client._producer import Producer, ProducerState
from magnetar.client.errors import PulsarClientError

__all__ = ["RemoteProducers"]

ADMIN_TIMEOUT_S = 30.0


class _Cluster(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def service_url(self) -> str: ...

    @property
    def broker_service_url(self) -> str: ...


class _RemoteProducer:
    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    @property
    def connected(self) -> bool:
        return self._producer.state is ProducerState.READY

    def send_entry(
        self, entry: bytes, *, num_messages: int | None, is_chunk: bool, marker: bool
    ) -> asyncio.Future[Any]:
        return self._producer.send_entry(entry, num_messages=num_messages, is_chunk=is_chunk, marker=marker)

    async def close(self) -> None:
        await self._producer.close()


class RemoteProducers:
    """Producers on remote clusters: no send timeout (the replicator's cursor holds the backlog), and
    reconnects backing off from ``backoff_initial_ms`` to ``backoff_max_ms``."""

    def __init__(self, *, operation_timeout_ms: int = 30_000, backoff_max_ms: int = 10_000) -> None:
        self._operation_timeout_ms = operation_timeout_ms
        self._backoff_max_ms = backoff_max_ms
        self._clients: dict[str, Client] = {}

    def _client(self, url: str) -> Client:
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = Client(
                url, operation_timeout_ms=self._operation_timeout_ms, backoff_max_ms=self._backoff_max_ms
            )
        return client

    async def create_producer(
        self, cluster: _Cluster, topic: str, producer_name: str, *, queue_size: int
    ) -> _RemoteProducer:
        producer = await self._client(cluster.broker_service_url).create_entry_producer(
            topic, producer_name=producer_name, send_timeout_ms=0, max_pending_messages=queue_size,
            block_if_queue_full=False, chunking=False,
        )
        return _RemoteProducer(producer)

    async def ensure_partitioned_topic(self, cluster: _Cluster, topic: str, partitions: int) -> None:
        if not cluster.service_url:
            raise PulsarClientError(f"cluster {cluster.name} has no serviceUrl to create {topic} on")
        url = cluster.service_url.rstrip("/") + _admin_path(topic) + "/partitions"
        timeout = aiohttp.ClientTimeout(total=ADMIN_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.get(url) as resp:
                current = int((await resp.json()).get("partitions", 0)) if resp.status == 200 else 0
            if current >= partitions:
                return
            method = "PUT" if current == 0 else "POST"
            async with session.request(method, url, data=json.dumps(partitions),
                                       headers={"Content-Type": "application/json"}) as resp:
                if resp.status not in (200, 204, 409):
                    reason = await resp.text()
                    raise PulsarClientError(f"cannot create {topic} with {partitions} partitions in "
                                            f"{cluster.name}: HTTP {resp.status} {reason}")

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()


def _admin_path(topic: str) -> str:
    """``persistent://tenant/ns/local`` as the admin API's path (the local name URL-encoded)."""
    domain, _, rest = topic.partition("://")
    tenant, namespace, local = rest.split("/", 2)
    return f"/admin/v2/{domain}/{tenant}/{namespace}/{urllib.parse.quote(local, safe='')}"
