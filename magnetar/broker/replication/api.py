"""What the replicator needs from the layers above it, and the names it reserves.

A replicator copies entries from a local topic to the same topic in a remote cluster through a producer
on that cluster. The broker cannot import a client (imports point down), so it declares here the two
plug points it needs: :class:`RemoteProducerFactory` makes a :class:`RemoteProducer` for a cluster and a
topic. The composition root (``magnetar standalone``) supplies the implementation built on
``magnetar.client``; unit tests supply fakes. Knows nothing of sockets or of the wire's commands.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from magnetar.broker.topic.dedup import REPLICATOR_PREFIX
from magnetar.resources.clusters import ClusterData as ClusterData  # re-exported: the record lives in resources

#: Pulsar's delimiter in a replicator producer's name: ``pulsar.repl.{local}-->{remote}``; the prefix
#: (Pulsar's ``replicatorPrefix``) names replication cursors too: reserved, as every ``pulsar.`` cursor is
PRODUCER_NAME_DELIMITER = "-->"

#: what ``disable_replication`` puts in ``replicate_to``: a cluster name that never exists
LOCAL_ONLY = "__local__"


def cursor_name(remote_cluster: str) -> str:
    """The durable cursor that holds a remote cluster's replication backlog."""
    return f"{REPLICATOR_PREFIX}.{remote_cluster}"


def remote_of_cursor(name: str) -> str | None:
    prefix = REPLICATOR_PREFIX + "."
    return name[len(prefix):] if name.startswith(prefix) else None


def producer_name(local_cluster: str, remote_cluster: str) -> str:
    return f"{REPLICATOR_PREFIX}.{local_cluster}{PRODUCER_NAME_DELIMITER}{remote_cluster}"


def source_of_producer(name: str) -> str | None:
    """The cluster a replicator producer copies from (``pulsar.repl.{source}-->{here}``)."""
    if not name.startswith(REPLICATOR_PREFIX + "."):
        return None
    source, sep, _ = name[len(REPLICATOR_PREFIX) + 1:].partition(PRODUCER_NAME_DELIMITER)
    return source if sep and source else None


class RemoteProducer(Protocol):
    """A producer on a remote cluster's topic that sends stored entries as they are.

    It reconnects and resends what is pending by itself; ``send_entry``'s future fails only when the
    producer is closed or can never send again (then the replicator makes a new one)."""

    @property
    def connected(self) -> bool: ...

    def send_entry(
        self, entry: bytes, *, num_messages: int | None, is_chunk: bool, marker: bool
    ) -> asyncio.Future[Any]:
        """Queue one entry (magic, CRC, metadata, payload); ``num_messages`` only for a batch."""
        ...

    async def close(self) -> None: ...


class RemoteProducerFactory(Protocol):
    async def create_producer(
        self, cluster: ClusterData, topic: str, producer_name: str, *, queue_size: int
    ) -> RemoteProducer:
        """A connected producer on ``topic`` in ``cluster``; raises (any Exception) while unreachable."""
        ...

    async def ensure_partitioned_topic(self, cluster: ClusterData, topic: str, partitions: int) -> None:
        """Make ``topic`` a partitioned topic with at least ``partitions`` partitions in ``cluster``."""
        ...

    async def close(self) -> None: ...

