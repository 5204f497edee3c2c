"""Clusters: ``/admin/clusters/<name>`` holds how to reach a cluster (Pulsar's ClusterData JSON:
``serviceUrl``, ``serviceUrlTls``, ``brokerServiceUrl``, ``brokerServiceUrlTls`` and a few flags).

The record is kept as written (the admin API shows it whole); :class:`ClusterData` is the typed view the
replicators use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.metadata import api as md
from magnetar.resources._records import Versioned, decode_object, encode

CLUSTERS_ROOT = "/admin/clusters"


@dataclass(frozen=True, slots=True)
class ClusterData:
    """A registered cluster (Pulsar's ClusterData): how to reach its brokers and its admin API."""

    name: str
    service_url: str = ""
    service_url_tls: str = ""
    broker_service_url: str = ""
    broker_service_url_tls: str = ""

    @classmethod
    def from_json(cls, name: str, value: Mapping[str, Any]) -> ClusterData:
        def text(key: str) -> str:
            item = value.get(key)
            return item if isinstance(item, str) else ""

        return cls(name, text("serviceUrl"), text("serviceUrlTls"), text("brokerServiceUrl"),
                   text("brokerServiceUrlTls"))


def cluster_key(name: str) -> str:
    return f"{CLUSTERS_ROOT}/{name}"


class ClusterResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store

    key = staticmethod(cluster_key)

    async def names(self) -> list[str]:
        return await self._store.children(CLUSTERS_ROOT)

    async def get(self, name: str) -> Versioned[dict[str, Any]] | None:
        """The cluster's record as a JSON object, or None."""
        record = await self._store.get(cluster_key(name))
        return None if record is None else Versioned(decode_object(record.value, record.key), record.version)

    async def data(self, name: str) -> ClusterData:
        """The typed view (every URL empty when the cluster is not registered)."""
        stored = await self.get(name)
        return ClusterData.from_json(name, stored.value if stored is not None else {})

    async def exists(self, name: str) -> bool:
        return await self._store.exists(cluster_key(name))

    async def create(self, name: str, fields: Mapping[str, Any]) -> None:
        """BadVersion if the cluster exists."""
        await self.put(name, fields, md.NEW_KEY)

    async def put(self, name: str, fields: Mapping[str, Any], expected_version: int | None = None) -> None:
        await self._store.put(cluster_key(name), encode(dict(fields)), expected_version)

    async def delete(self, name: str) -> None:
        """NotFound if there is no such cluster."""
        await self._store.delete(cluster_key(name))
