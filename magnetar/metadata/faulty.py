"""Fault injection for metadata stores: a wrapper that fails operations and can die with its process.

:class:`FaultyMetadataStore` wraps any :class:`~magnetar.metadata.api.MetadataStore`. Before each
operation it yields to the event loop once (so concurrent writers interleave, as they do over a real
store) and then, as its :class:`MetadataFaultPlan` decides (fail after N operations, at random), raises
:class:`~magnetar.metadata.api.MetadataError` *instead of* performing it. :meth:`FaultyMetadataStore.kill`
models the process dying: the wrapped store keeps every completed write (SQLite commits survive SIGKILL),
while the dead wrapper refuses everything, so no late write of the dead process can land after a restart.

Deterministic for a given seed and operation order. Knows nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from magnetar.core.faults import FaultPlan
from magnetar.metadata.api import MetadataError, MetadataStore, MetadataStoreClosed, Record, WatchCallback

METADATA_OPS = frozenset({"get", "put", "delete", "children", "exists"})


class MetadataFaultPlan(FaultPlan):
    """A :class:`magnetar.core.faults.FaultPlan` counting the metadata store's operations by default."""

    def __init__(
        self,
        rng: random.Random,
        *,
        fail_after_ops: int | None = None,
        fail_probability: float = 0.0,
        ops: frozenset[str] = METADATA_OPS,
    ) -> None:
        super().__init__(rng, fail_after_ops=fail_after_ops, fail_probability=fail_probability, ops=ops)

class FaultyMetadataStore:
    """A :class:`~magnetar.metadata.api.MetadataStore` that fails operations as its plan says."""

    def __init__(self, inner: MetadataStore, plan: MetadataFaultPlan) -> None:
        self.inner = inner
        self.plan = plan
        self._dead = False
        self._unwatches: list[Callable[[], None]] = []

    def kill(self) -> None:
        """The process died: refuse every later call and drop the watches it registered."""
        self._dead = True
        for unwatch in self._unwatches:
            unwatch()
        self._unwatches.clear()

    async def _enter(self, op: str, key: str) -> None:
        await asyncio.sleep(0)
        if self._dead:
            raise MetadataStoreClosed("metadata store is closed (its process died)", key)
        if self.plan.should_fail(op):
            raise MetadataError(f"injected fault: {op} {key} failed", key)

    async def get(self, key: str) -> Record | None:
        await self._enter("get", key)
        return await self.inner.get(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None) -> Record:
        await self._enter("put", key)
        return await self.inner.put(key, value, expected_version)

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        await self._enter("delete", key)
        await self.inner.delete(key, expected_version)

    async def children(self, key: str) -> list[str]:
        await self._enter("children", key)
        return await self.inner.children(key)

    async def exists(self, key: str) -> bool:
        await self._enter("exists", key)
        return await self.inner.exists(key)

    def watch(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        if self._dead:
            raise MetadataStoreClosed("metadata store is closed (its process died)", prefix)
        unwatch = self.inner.watch(prefix, callback)
        self._unwatches.append(unwatch)
        return unwatch

    async def close(self) -> None:
        """Closing the wrapper ends this process's use; the wrapped store lives on for the next one."""
        self.kill()


if TYPE_CHECKING:
    from magnetar.metadata.memory import MemoryMetadataStore

    _conforms: MetadataStore = FaultyMetadataStore(MemoryMetadataStore(), MetadataFaultPlan(random.Random(0)))
