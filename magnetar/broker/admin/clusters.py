"""Admin operations of geo-replication: clusters (create, update, delete) and topic-level replication
clusters, as Pulsar's ``Clusters`` and ``PersistentTopics`` resources do them. Listing and reading clusters
and the namespace's ``replication_clusters`` live in :mod:`magnetar.broker.admin.broker_admin`. Knows no HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed
from magnetar.broker.names import TopicName, valid_segment
from magnetar.metadata import api as md

log = logging.getLogger("magnetar.broker.replication")

#: ClusterData's fields (Pulsar's JSON names) with the URL schemes each accepts (None: any string)
CLUSTER_FIELDS: dict[str, tuple[str, ...] | None] = {
    "serviceUrl": ("http://", "https://"),
    "serviceUrlTls": ("https://",),
    "brokerServiceUrl": ("pulsar://", "pulsar+ssl://"),
    "brokerServiceUrlTls": ("pulsar+ssl://",),
    "proxyServiceUrl": None,
    "proxyProtocol": None,
    "authenticationPlugin": None,
    "authenticationParameters": None,
    "brokerClientTrustCertsFilePath": None,
    "listenerName": None,
}
CLUSTER_FLAGS = ("brokerClientTlsEnabled", "tlsAllowInsecureConnection")


def cluster_data(body: Mapping[str, Any]) -> dict[str, Any]:
    """The ClusterData to store: known fields only, URLs with the schemes Pulsar accepts."""
    data: dict[str, Any] = {}
    for key, schemes in CLUSTER_FIELDS.items():
        value = body.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or len(value) > 4096:
            raise InvalidRequest(f"{key} must be a string")
        if schemes is not None and not value.strip().startswith(schemes):
            raise InvalidRequest(f"{key} must start with one of {', '.join(schemes)}: {value!r}")
        data[key] = value
    for key in CLUSTER_FLAGS:
        if isinstance(body.get(key), bool):
            data[key] = body[key]
    return data


class ReplicationAdmin:
    def __init__(self, admin: BrokerAdmin) -> None:
        self.admin = admin
        self.broker = admin.broker

    # ---- clusters ------------------------------------------------------------------------------------

    async def create_cluster(self, name: str, body: Mapping[str, Any]) -> None:
        _check_cluster_name(name)
        data = cluster_data(body)
        try:
            await self.broker.resources.clusters.create(name, data)
        except md.BadVersion as exc:
            raise Conflict("Cluster already exists") from exc
        log.info("created cluster %s: %s", name, data)
        await self.broker.replication.reconcile_all()

    async def update_cluster(self, name: str, body: Mapping[str, Any]) -> None:
        _check_cluster_name(name)
        data = cluster_data(body)
        record = await self.broker.resources.clusters.get(name)
        if record is None:
            raise NotFound("Cluster does not exist")
        try:
            await self.broker.resources.clusters.put(name, data, record.version)
        except md.BadVersion as exc:
            raise Conflict(f"Concurrent modification of cluster {name}") from exc
        log.info("updated cluster %s: %s", name, data)
        await self.broker.replication.reconcile_all()  # replicators to it reconnect to the new URLs

    async def delete_cluster(self, name: str) -> None:
        _check_cluster_name(name)
        await self.admin.cluster(name)  # 404 if unknown
        if name == self.broker.config.cluster_name:
            raise PreconditionFailed("Cannot delete the local cluster")
        for tenant in await self.admin.tenants():
            record = await self.broker.resources.tenants.get(tenant)
            allowed = record.value.allowed_clusters if record is not None else ()
            if name in allowed:
                raise PreconditionFailed(f"Cluster not empty: tenant {tenant} still allows it")
        try:
            await self.broker.resources.clusters.delete(name)
        except md.NotFound:
            return
        log.info("deleted cluster %s", name)

    # ---- topic-level replication clusters ------------------------------------------------------------

    async def topic_clusters(self, topic: TopicName) -> list[str] | None:
        await self.admin.targets(topic)  # 404 for an unknown namespace
        record = await self.broker.resources.topic_policies.get_replication(topic.partitioned_topic_name)
        clusters = record.value.get("replication_clusters") if record is not None else None
        return clusters if isinstance(clusters, list) else None

    async def set_topic_clusters(self, topic: TopicName, clusters: Any) -> None:
        await self.admin.targets(topic)
        if clusters is not None:
            if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters) or not clusters:
                raise InvalidRequest("replication clusters must be a non-empty list of cluster names")
            clusters = list(dict.fromkeys(clusters))
            await self.admin.check_replication_clusters(topic.tenant, clusters)
        policies = self.broker.resources.topic_policies
        parent = topic.partitioned_topic_name  # kept per partitioned (parent) topic, as Pulsar does
        record = await policies.get_replication(parent)
        stored = dict(record.value) if record is not None else {}
        if clusters is None:
            stored.pop("replication_clusters", None)
        else:
            stored["replication_clusters"] = clusters
        try:
            await policies.put_replication(parent, stored, record.version if record is not None else md.NEW_KEY)
        except md.BadVersion as exc:
            raise Conflict(f"Concurrent modification of the policies of {topic}") from exc
        await self.broker.replication.reconcile_topic(topic)


def _check_cluster_name(name: str) -> None:
    if not valid_segment(name):  # Pulsar's NamedEntity rule, bounded, not . or ..
        raise PreconditionFailed("Cluster name is not valid")  # Pulsar's NamedEntity check
