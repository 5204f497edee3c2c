"""The cluster's dynamic configuration: ``/admin/configuration`` holds one JSON object of Pulsar's key names
and string values (what ``brokers update-dynamic-config`` writes; PIP-160's batching switch keeps its
``transaction*BatchedWrite*`` keys there).

Unlike the other records, an unreadable one is an error here (``ValueError``), not an empty object: the
caller reports it and keeps ``broker.conf``'s values, and must not overwrite what it could not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from magnetar.metadata import api as md
from magnetar.resources._records import Versioned

DYNAMIC_CONFIG_KEY = "/admin/configuration"


def decode_values(data: bytes) -> dict[str, str]:
    """The stored key -> value object; ValueError if it is not a JSON object."""
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return {str(k): str(v) for k, v in doc.items()}


class DynamicConfigResources:
    def __init__(self, store: md.MetadataStore) -> None:
        self._store = store

    key = DYNAMIC_CONFIG_KEY

    async def get(self) -> Versioned[dict[str, str]] | None:
        """The stored values with their version, None when nothing was ever stored; ValueError if unreadable."""
        record = await self._store.get(DYNAMIC_CONFIG_KEY)
        return None if record is None else Versioned(decode_values(record.value), record.version)

    async def put(self, values: Mapping[str, str], expected_version: int | None) -> None:
        """Compare-and-set (``NEW_KEY`` when nothing is stored yet); BadVersion on a concurrent change."""
        await self._store.put(DYNAMIC_CONFIG_KEY, json.dumps(dict(values), sort_keys=True).encode(), expected_version)
