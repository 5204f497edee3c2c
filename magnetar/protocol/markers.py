"""Marker entries: internal messages (replication snapshots, transaction commit/abort) flagged by
``MessageMetadata.marker_type``. They are stored inline and must never be dispatched to consumers.

Owns recognising markers and building their entries; the replication and transaction services
decide when to write them. Knows nothing of topics or dispatch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from magnetar.protocol.entry import make_entry
from magnetar.protocol.proto import PulsarApi_pb2 as pb
from magnetar.protocol.proto import PulsarMarkers_pb2 as markers_pb

__all__ = [
    "REPLICATED_SUBSCRIPTION_SNAPSHOT",
    "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
    "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE",
    "REPLICATED_SUBSCRIPTION_UPDATE",
    "REPLICATION_MARKER_PRODUCER",
    "TXN_ABORT",
    "TXN_COMMIT",
    "TXN_COMMITTING",
    "TXN_MARKER_PRODUCER",
    "is_marker",
    "make_marker_entry",
    "make_txn_marker_entry",
]

REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: Final = markers_pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST
REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: Final = markers_pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE
REPLICATED_SUBSCRIPTION_SNAPSHOT: Final = markers_pb.REPLICATED_SUBSCRIPTION_SNAPSHOT
REPLICATED_SUBSCRIPTION_UPDATE: Final = markers_pb.REPLICATED_SUBSCRIPTION_UPDATE
TXN_COMMITTING: Final = markers_pb.TXN_COMMITTING
TXN_COMMIT: Final = markers_pb.TXN_COMMIT
TXN_ABORT: Final = markers_pb.TXN_ABORT

REPLICATION_MARKER_PRODUCER: Final = "pulsar.marker"
TXN_MARKER_PRODUCER: Final = "pulsar.txn.marker"


def is_marker(metadata: pb.MessageMetadata) -> bool:
    """True for server-only entries; presence of ``marker_type`` is what counts, not its value."""
    return metadata.HasField("marker_type")


def make_marker_entry(
    marker_type: int,
    payload: bytes,
    *,
    producer_name: str = REPLICATION_MARKER_PRODUCER,
    publish_time_ms: int,
    sequence_id: int = 0,
    txnid: tuple[int, int] | None = None,
    replicate_to: Iterable[str] = (),
) -> bytes:
    """Build a marker entry; ``txnid`` is ``(most_bits, least_bits)``."""
    metadata = pb.MessageMetadata(
        producer_name=producer_name,
        sequence_id=sequence_id,
        publish_time=publish_time_ms,
        marker_type=marker_type,
        replicate_to=list(replicate_to),
    )
    if txnid is not None:
        metadata.txnid_most_bits, metadata.txnid_least_bits = txnid
    return make_entry(metadata, payload)


def make_txn_marker_entry(
    marker_type: int, txnid: tuple[int, int], *, publish_time_ms: int, sequence_id: int = 0
) -> bytes:
    """A TXN_COMMIT / TXN_ABORT marker: empty payload, Pulsar's txn marker producer name."""
    return make_marker_entry(
        marker_type,
        b"",
        producer_name=TXN_MARKER_PRODUCER,
        publish_time_ms=publish_time_ms,
        sequence_id=sequence_id,
        txnid=txnid,
    )
