"""Schemas: ``/schemas/<tenant>/<namespace>/<local>`` holds every version of a topic's schema (one record per
partitioned or plain topic). The record's format belongs to the schema registry (``broker/schema``), which
reads and writes it whole through here, compare-and-set on its version."""

from __future__ import annotations

from magnetar.metadata import api as md
from magnetar.resources._names import quoted

SCHEMAS_ROOT = "/schemas"


def schema_key(tenant: str, namespace: str, local_name: str) -> str:
    return f"{SCHEMAS_ROOT}/{tenant}/{namespace}/{quoted(local_name)}"


class SchemaResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store

    key = staticmethod(schema_key)

    async def get(self, tenant: str, namespace: str, local_name: str) -> md.Record | None:
        return await self._store.get(schema_key(tenant, namespace, local_name))

    async def put(self, tenant: str, namespace: str, local_name: str, value: bytes,
                  expected_version: int | None = None) -> None:
        await self._store.put(schema_key(tenant, namespace, local_name), value, expected_version)

    async def delete(self, tenant: str, namespace: str, local_name: str, expected_version: int | None = None) -> None:
        await self._store.delete(schema_key(tenant, namespace, local_name), expected_version)
