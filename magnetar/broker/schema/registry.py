"""Schema versions per topic in the metadata store, and the namespace policies that govern them.

One record per schema id (``tenant/namespace/topic``: partitions and both domains share their topic's
schemas, as in Pulsar) holds every version in order; a delete appends a marker version, so numbering goes
on and the versions before it are gone for clients (``force`` drops the record and numbering restarts).
Writes are serialised and compare-and-set. Policies come from the namespace's policies record
(``schema_compatibility_strategy``, ``is_allow_auto_update_schema``, ``schema_validation_enforced``), falling
back to the broker's configuration.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from magnetar.broker.errors import IncompatibleSchema, InvalidRequest, MetadataError, NotFound, TopicNotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.schema.compat import InvalidSchema, incompatibility, validate
from magnetar.broker.schema.types import AUTO_CONSUME, SchemaInfo, StoredSchema, Strategy
from magnetar.core.clock import Clock
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources

log = logging.getLogger("magnetar.broker.schema")

VERSIONS_MAX = 10_000
#: namespace policy field -> what it holds (Pulsar's ``Policies`` names)
STRATEGY_POLICY = "schema_compatibility_strategy"
AUTO_UPDATE_POLICY = "is_allow_auto_update_schema"
ENFORCED_POLICY = "schema_validation_enforced"


class SchemaSettings(Protocol):
    """The broker settings a namespace without its own schema policies falls back to."""

    @property
    def schema_compatibility_strategy(self) -> str: ...

    @property
    def is_allow_auto_update_schema_enabled(self) -> bool: ...

    @property
    def schema_validation_enforced(self) -> bool: ...


class SchemaNotFound(TopicNotFound):
    """No schema (or no such version): clients read ``TopicNotFound``, REST a 404."""


def schema_id(topic: TopicName) -> str:
    base = topic.local_name.rsplit("-partition-", 1)[0] if topic.is_partition else topic.local_name
    return f"{topic.tenant}/{topic.namespace}/{base}"


def _parts(topic: TopicName) -> tuple[str, str, str]:
    """(tenant, namespace, local name) of the topic's schema record (partitions share their parent's)."""
    tenant, namespace, local = schema_id(topic).split("/", 2)
    return tenant, namespace, local


def _encode(versions: list[StoredSchema]) -> bytes:
    return json.dumps([
        {"version": v.version, "type": v.info.type, "data": base64.b64encode(v.info.data).decode(),
         "properties": v.info.properties, "timestamp": v.timestamp_ms, "deleted": v.deleted}
        for v in versions
    ]).encode()


def _decode(raw: bytes) -> list[StoredSchema]:
    return [
        StoredSchema(int(v["version"]), SchemaInfo(int(v["type"]), base64.b64decode(v["data"]),
                                                   dict(v["properties"])), int(v["timestamp"]), bool(v["deleted"]))
        for v in json.loads(raw)
    ]


def live(versions: list[StoredSchema]) -> list[StoredSchema]:
    """The versions after the last delete marker."""
    for index in range(len(versions) - 1, -1, -1):
        if versions[index].deleted:
            return versions[index + 1:]
    return versions


class SchemaRegistry:
    def __init__(self, resources: MetadataResources, config: SchemaSettings, clock: Clock) -> None:
        self._resources = resources
        self._config = config
        self._clock = clock
        self._writing = asyncio.Lock()

    # ---- reading ------------------------------------------------------------------------------------

    async def _record(self, topic: TopicName) -> tuple[list[StoredSchema], int | None]:
        try:
            record = await self._resources.schemas.get(*_parts(topic))
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
        return (_decode(record.value), record.version) if record is not None else ([], None)

    async def versions(self, topic: TopicName) -> list[StoredSchema]:
        """The live versions, oldest first."""
        return live((await self._record(topic))[0])

    async def get(self, topic: TopicName, version: int | None = None) -> StoredSchema:
        stored = await self.versions(topic)
        if version is None:
            if not stored:
                raise SchemaNotFound(f"Schema not found for topic {schema_id(topic)}")
            return stored[-1]
        for candidate in stored:
            if candidate.version == version:
                return candidate
        raise SchemaNotFound(f"Schema version {version} not found for topic {schema_id(topic)}")

    # ---- policies -----------------------------------------------------------------------------------

    async def policies(self, ns: NamespaceName) -> Mapping[str, Any]:
        try:
            return await self._resources.namespaces.policies(ns)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    async def strategy(self, ns: NamespaceName) -> Strategy:
        configured = (await self.policies(ns)).get(STRATEGY_POLICY)
        strategy = Strategy.parse(configured) if isinstance(configured, str) else Strategy.UNDEFINED
        if strategy is Strategy.UNDEFINED:
            strategy = Strategy.parse(self._config.schema_compatibility_strategy)
        return Strategy.FULL if strategy is Strategy.UNDEFINED else strategy

    async def auto_update(self, ns: NamespaceName) -> bool:
        value = (await self.policies(ns)).get(AUTO_UPDATE_POLICY)
        return value if isinstance(value, bool) else self._config.is_allow_auto_update_schema_enabled

    async def validation_enforced(self, ns: NamespaceName) -> bool:
        value = (await self.policies(ns)).get(ENFORCED_POLICY)
        return value if isinstance(value, bool) else self._config.schema_validation_enforced

    async def set_policy(self, ns: NamespaceName, field: str, value: str | bool) -> None:
        """Store one schema policy in the namespace's policies record (compare-and-set)."""
        namespaces = self._resources.namespaces
        try:
            record = await namespaces.get(ns)
            if record is None:
                raise NotFound("Namespace does not exist")
            stored = record.value.to_json()
            stored[field] = value
            await namespaces.put(ns, stored, record.version)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc

    # ---- checks -------------------------------------------------------------------------------------

    async def check(self, topic: TopicName, info: SchemaInfo) -> tuple[str | None, Strategy]:
        """Why ``info`` would be refused as the topic's next version (None: it would not), and the strategy."""
        strategy = await self.strategy(topic.namespace_name)
        existing = [v.info for v in await self.versions(topic)]
        if any(e.fingerprint == info.fingerprint for e in existing):
            return None, strategy  # already a version: adding it again answers that version
        return incompatibility(info, existing, strategy), strategy

    async def add(self, topic: TopicName, info: SchemaInfo, *, auto_update_applies: bool = True) -> int:
        """The version of ``info``: an identical live version, else a new one if the strategy allows.
        ``auto_update_applies``: clients obey ``is_allow_auto_update_schema``; an admin upload does not."""
        try:
            validate(info)
        except InvalidSchema as exc:
            raise InvalidRequest(str(exc)) from exc
        async with self._writing:
            versions, record_version = await self._record(topic)
            current = live(versions)
            for stored in current:
                if not stored.deleted and stored.info.fingerprint == info.fingerprint:
                    return stored.version
            if auto_update_applies and not await self.auto_update(topic.namespace_name):
                raise IncompatibleSchema("Schema not found and schema auto updating is disabled.")
            reason = incompatibility(info, [v.info for v in current], await self.strategy(topic.namespace_name))
            if reason is not None:
                raise IncompatibleSchema(reason)
            if len(versions) >= VERSIONS_MAX:
                raise IncompatibleSchema(f"Topic {schema_id(topic)} already has {VERSIONS_MAX} schema versions")
            version = versions[-1].version + 1 if versions else 0
            versions.append(StoredSchema(version, info, self._clock.now_ms()))
            await self._write(topic, versions, record_version)
        log.info("schema %s: version %d (%s)", schema_id(topic), version, info.type)
        return version

    async def for_producer(self, topic: TopicName, info: SchemaInfo | None) -> int | None:
        """The schema version a producer gets (None: it declared none and the topic allows that)."""
        if info is not None:
            return await self.add(topic, info)
        if await self.versions(topic) and await self.validation_enforced(topic.namespace_name):
            raise IncompatibleSchema("Producers cannot connect or send message without a schema to topics with "
                                     "a schema if SchemaValidationEnforced is enabled")
        return None

    async def for_consumer(self, topic: TopicName, info: SchemaInfo | None, *, idle: bool) -> None:
        """A consumer's schema must be readable under the strategy; an idle topic without one adopts it."""
        if info is None or info.type == AUTO_CONSUME:
            return
        current = await self.versions(topic)
        if not current:
            if idle:
                await self.add(topic, info)
            return
        if any(v.info.fingerprint == info.fingerprint for v in current):
            return
        reason = incompatibility(info, [v.info for v in current], await self.strategy(topic.namespace_name))
        if reason is not None:
            raise IncompatibleSchema(reason)

    # ---- deleting -----------------------------------------------------------------------------------

    async def delete(self, topic: TopicName, *, force: bool) -> int:
        """Append a delete marker (its version is returned), or with ``force`` drop every version."""
        async with self._writing:
            versions, record_version = await self._record(topic)
            if record_version is None:
                raise NotFound(f"Schema not found for topic {schema_id(topic)}")
            if force:
                try:
                    await self._resources.schemas.delete(*_parts(topic), record_version)
                except md.MetadataError as exc:
                    raise MetadataError(str(exc)) from exc
                return versions[-1].version if versions else -1
            version = versions[-1].version + 1
            versions.append(StoredSchema(version, SchemaInfo(0, b""), self._clock.now_ms(), deleted=True))
            await self._write(topic, versions, record_version)
            return version

    async def _write(self, topic: TopicName, versions: list[StoredSchema], record_version: int | None) -> None:
        try:
            await self._resources.schemas.put(*_parts(topic), _encode(versions),
                                              md.NEW_KEY if record_version is None else record_version)
        except md.MetadataError as exc:
            raise MetadataError(str(exc)) from exc
