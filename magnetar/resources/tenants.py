"""Tenants: ``/admin/policies/<tenant>`` holds a :class:`TenantInfo` (Pulsar's TenantInfo JSON).

The tenant's namespaces are its children (``namespaces.py``); both live below :data:`POLICIES_ROOT`, read on
every topic creation and authorization decision, so reads come from a cache the store's watch keeps current.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.metadata import api as md
from magnetar.resources._cache import WatchedCache
from magnetar.resources._records import Versioned, decode_object, encode

#: tenants at /admin/policies/<tenant>, their namespaces at /admin/policies/<tenant>/<namespace>
POLICIES_ROOT = "/admin/policies"


def _strings(value: object) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


@dataclass(frozen=True, slots=True)
class TenantInfo:
    """Who administers a tenant and which clusters its namespaces may use."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TenantInfo:
        return cls(_strings(value.get("adminRoles")), _strings(value.get("allowedClusters")))

    def to_json(self) -> dict[str, list[str]]:
        return {"adminRoles": list(self.admin_roles), "allowedClusters": list(self.allowed_clusters)}


def tenant_key(tenant: str) -> str:
    return f"{POLICIES_ROOT}/{tenant}"


def _decode(record: md.Record) -> Versioned[TenantInfo]:
    return Versioned(TenantInfo.from_json(decode_object(record.value, record.key)), record.version)


class TenantResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store
        self._cache: WatchedCache[Versioned[TenantInfo]] = WatchedCache(store, POLICIES_ROOT)

    key = staticmethod(tenant_key)

    async def get(self, tenant: str) -> Versioned[TenantInfo] | None:
        return await self._cache.get(tenant_key(tenant), _decode)

    async def exists(self, tenant: str) -> bool:
        return await self.get(tenant) is not None

    async def names(self) -> list[str]:
        """Every tenant with a record (a key below the root without one is not a tenant)."""
        return [t for t in await self._store.children(POLICIES_ROOT) if await self.exists(t)]

    async def create(self, tenant: str, info: TenantInfo) -> None:
        """BadVersion if the tenant exists."""
        await self.put(tenant, info, md.NEW_KEY)

    async def put(self, tenant: str, info: TenantInfo, expected_version: int | None = None) -> None:
        key = tenant_key(tenant)
        self._cache.forget(key)
        await self._store.put(key, encode(info.to_json()), expected_version)

    async def delete(self, tenant: str) -> None:
        """NotFound if there is no such tenant."""
        key = tenant_key(tenant)
        self._cache.forget(key)
        await self._store.delete(key)

    def watch(self, changed: Callable[[str], None]) -> Callable[[], None]:
        """Call ``changed(tenant)`` after every write to a tenant's record or to one of its namespaces'
        (by any writer of the store). Returns the unwatch function."""
        root = POLICIES_ROOT + "/"

        def on_write(event: md.WatchEvent) -> None:
            tenant = event.key[len(root):].split("/", 1)[0] if event.key.startswith(root) else ""
            if tenant:
                changed(tenant)

        return self._store.watch(POLICIES_ROOT, on_write)

    def close(self) -> None:
        self._cache.close()
