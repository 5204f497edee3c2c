"""What only a replicator may send: the ``pulsar.repl`` producer names, ``replicated_from`` and markers.

A replicator's producer on this cluster is named ``pulsar.repl.{source}-->{here}``; what it sends carries
``replicated_from`` = ``{source}`` and is deduplicated by the original producer's sequence ids, and the
replicated-subscription markers it copies (PIP-33) move this cluster's subscriptions. A client that could
take such a name, set ``replicated_from`` or write a marker could therefore poison geo deduplication or
acknowledge other clients' subscriptions, so:

* the name prefix is reserved: a producer may take it only when the name is well formed, names this
  cluster as its target and a registered other cluster as its source, and (with authorization on) the
  connection's role is a super-user (the role brokers replicate with, Pulsar's ``brokerClient`` credentials);
* a SEND carrying ``marker_type`` or ``replicated_from`` is refused unless it comes from such a producer,
  with ``replicated_from`` its source cluster and a marker only of the replicated-subscription kinds.

Pure rules over names and metadata; the server asks them at PRODUCER and SEND.
"""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.replication.api import PRODUCER_NAME_DELIMITER, source_of_producer
from magnetar.broker.topic.dedup import REPLICATOR_PREFIX, is_replicator_producer

__all__ = ["REPLICATED_MARKERS", "REPLICATOR_PREFIX", "reserved_name_refusal", "send_refusal"]

#: the marker kinds a replicator copies (PIP-33's four); transaction markers never cross clusters
REPLICATED_MARKERS = frozenset({
    proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST,
    proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE,
    proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT,
    proto.markers.REPLICATED_SUBSCRIPTION_UPDATE,
})


def reserved_name_refusal(name: str, local_cluster: str) -> str | None:
    """Why ``name`` may not be a replicator producer's here (None when it is well formed, or not reserved);
    whether the source cluster is registered is the caller's question."""
    if not is_replicator_producer(name):
        return None
    source = source_of_producer(name)
    target = name.partition(PRODUCER_NAME_DELIMITER)[2]
    if source is None or target != local_cluster or source == local_cluster:
        return (f"Producer name prefix {REPLICATOR_PREFIX!r} is reserved for replicators "
                f"({REPLICATOR_PREFIX}.<source cluster>{PRODUCER_NAME_DELIMITER}{local_cluster})")
    return None


def send_refusal(producer_name: str, metadata: proto.pb.MessageMetadata) -> str | None:
    """Why this SEND carries what only a replicator may send (None when it may be stored)."""
    marker = metadata.HasField("marker_type")
    if not marker and not metadata.replicated_from:
        return None
    source = source_of_producer(producer_name)
    if source is None:
        what = "marker_type" if marker else "replicated_from"
        return f"Only replicators may send messages with {what}"
    if metadata.replicated_from != source:
        return f"A replicator from {source} sent a message replicated from {metadata.replicated_from!r}"
    if marker and metadata.marker_type not in REPLICATED_MARKERS:
        return f"Replicators copy no markers of type {metadata.marker_type}"
    return None
