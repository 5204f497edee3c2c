"""The four replicated-subscription marker payloads (types 10-13) to and from values."""

from __future__ import annotations

from collections.abc import Mapping

from magnetar import protocol as proto
from magnetar.ledger.api import Position
from magnetar.protocol.proto import PulsarMarkers_pb2 as mpb

REQUEST = proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST
RESPONSE = proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE
SNAPSHOT = proto.markers.REPLICATED_SUBSCRIPTION_SNAPSHOT
UPDATE = proto.markers.REPLICATED_SUBSCRIPTION_UPDATE


def _mid(position: Position) -> mpb.MarkersMessageIdData:
    return mpb.MarkersMessageIdData(ledger_id=max(0, position.ledger_id), entry_id=max(0, position.entry_id))


def _pos(mid: mpb.MarkersMessageIdData) -> Position:
    return Position(int(mid.ledger_id), int(mid.entry_id))


def _clusters(positions: Mapping[str, Position]) -> list[mpb.ClusterMessageId]:
    return [mpb.ClusterMessageId(cluster=c, message_id=_mid(p)) for c, p in sorted(positions.items())]


def request(snapshot_id: str, source_cluster: str) -> bytes:
    msg = mpb.ReplicatedSubscriptionsSnapshotRequest(snapshot_id=snapshot_id, source_cluster=source_cluster)
    return bytes(msg.SerializeToString())


def response(snapshot_id: str, cluster: str, position: Position) -> bytes:
    cmid = mpb.ClusterMessageId(cluster=cluster, message_id=_mid(position))
    return bytes(mpb.ReplicatedSubscriptionsSnapshotResponse(snapshot_id=snapshot_id, cluster=cmid).SerializeToString())


def snapshot(snapshot_id: str, local: Position, clusters: Mapping[str, Position]) -> bytes:
    msg = mpb.ReplicatedSubscriptionsSnapshot(
        snapshot_id=snapshot_id, local_message_id=_mid(local), clusters=_clusters(clusters))
    return bytes(msg.SerializeToString())


def update(subscription: str, clusters: Mapping[str, Position]) -> bytes:
    msg = mpb.ReplicatedSubscriptionsUpdate(subscription_name=subscription, clusters=_clusters(clusters))
    return bytes(msg.SerializeToString())


def parse_request(payload: bytes) -> tuple[str, str]:
    msg = mpb.ReplicatedSubscriptionsSnapshotRequest.FromString(payload)
    return msg.snapshot_id, msg.source_cluster


def parse_response(payload: bytes) -> tuple[str, str, Position]:
    msg = mpb.ReplicatedSubscriptionsSnapshotResponse.FromString(payload)
    return msg.snapshot_id, msg.cluster.cluster, _pos(msg.cluster.message_id)


def parse_update(payload: bytes) -> tuple[str, dict[str, Position]]:
    msg = mpb.ReplicatedSubscriptionsUpdate.FromString(payload)
    return msg.subscription_name, {c.cluster: _pos(c.message_id) for c in msg.clusters}


def parse_snapshot(payload: bytes) -> tuple[str, Position, dict[str, Position]]:
    msg = mpb.ReplicatedSubscriptionsSnapshot.FromString(payload)
    return msg.snapshot_id, _pos(msg.local_message_id), {c.cluster: _pos(c.message_id) for c in msg.clusters}
