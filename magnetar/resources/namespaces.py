"""Namespaces: ``/admin/policies/<tenant>/<namespace>`` holds the namespace's :class:`Policies` (Pulsar's
Policies JSON object: retention, TTL, replication clusters, permissions, backlog quotas, ...).

The record is kept whole (fields magnetar does not know survive a rewrite); writes are compare-and-set on its
version (``BadVersion`` on a conflict: the caller decides). Reads come from a cache the store's watch keeps
current, since every topic creation reads its namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from magnetar.metadata import api as md
from magnetar.resources._cache import WatchedCache
from magnetar.resources._names import NamespaceRef
from magnetar.resources._records import Versioned, decode_object, encode
from magnetar.resources.tenants import POLICIES_ROOT, tenant_key


class Policies(Mapping[str, Any]):
    """A namespace's policies, read-only, field by Pulsar's name (``policies["message_ttl_in_seconds"]``)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        self._fields = dict(fields or {})

    def __getitem__(self, field: str) -> Any:
        return self._fields[field]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Policies({self._fields!r})"

    def to_json(self) -> dict[str, Any]:
        """A copy of the fields, to change and write back."""
        return dict(self._fields)

    @property
    def replication_clusters(self) -> list[str]:
        clusters = self._fields.get("replication_clusters")
        return [c for c in clusters if isinstance(c, str)] if isinstance(clusters, list) else []

    @property
    def auto_topic_creation_override(self) -> Mapping[str, Any] | None:
        """``autoTopicCreationOverride`` when it is set and well formed (it names allowAutoTopicCreation)."""
        override = self._fields.get("autoTopicCreationOverride")
        if isinstance(override, dict) and isinstance(override.get("allowAutoTopicCreation"), bool):
            return override
        return None


def namespace_key(ns: NamespaceRef) -> str:
    return f"{POLICIES_ROOT}/{ns.tenant}/{ns.namespace}"


def _decode(record: md.Record) -> Versioned[Policies]:
    return Versioned(Policies(decode_object(record.value, record.key)), record.version)


class NamespaceResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store
        self._cache: WatchedCache[Versioned[Policies]] = WatchedCache(store, POLICIES_ROOT)

    key = staticmethod(namespace_key)

    async def get(self, ns: NamespaceRef) -> Versioned[Policies] | None:
        return await self._cache.get(namespace_key(ns), _decode)

    async def policies(self, ns: NamespaceRef) -> Policies:
        """The namespace's policies; empty when it has none or does not exist."""
        stored = await self.get(ns)
        return stored.value if stored is not None else Policies()

    async def exists(self, ns: NamespaceRef) -> bool:
        return await self.get(ns) is not None

    async def names(self, tenant: str) -> list[str]:
        """The names of the tenant's namespaces (children of its record)."""
        return await self._store.children(tenant_key(tenant))

    async def all_names(self) -> list[tuple[str, str]]:
        """(tenant, namespace) of every namespace, tenant by tenant."""
        return [(tenant, namespace) for tenant in await self._store.children(POLICIES_ROOT)
                for namespace in await self._store.children(tenant_key(tenant))]

    async def create(self, ns: NamespaceRef, policies: Mapping[str, Any]) -> None:
        """BadVersion if the namespace exists."""
        await self.put(ns, policies, md.NEW_KEY)

    async def put(self, ns: NamespaceRef, policies: Mapping[str, Any], expected_version: int | None = None) -> None:
        key = namespace_key(ns)
        self._cache.forget(key)
        await self._store.put(key, encode(dict(policies)), expected_version)

    async def delete(self, ns: NamespaceRef) -> None:
        """NotFound if there is no such namespace."""
        key = namespace_key(ns)
        self._cache.forget(key)
        await self._store.delete(key)

    def close(self) -> None:
        self._cache.close()
