"""An in-memory blob store with injected faults, for the simulator and unit tests of the layers above.

Behaves as an object store does: a blob appears whole on commit (an abandoned or crashed writer leaves
nothing) and outlives the broker's process (the simulator keeps one across its crashes). A
:class:`~magnetar.core.faults.FaultPlan` decides which operations fail, as an unreachable endpoint does
(:class:`OffloadUnavailable`); ``ops`` names are ``write``, ``commit``, ``read``, ``size``, ``delete``, ``list``.
"""

from __future__ import annotations

from collections.abc import Sequence

from magnetar.core.faults import FaultPlan
from magnetar.storage.offload.api import OffloadNotFound, OffloadUnavailable

OPS = frozenset({"write", "commit", "read", "size", "delete", "list"})


class MemoryBlobWriter:
    def __init__(self, store: MemoryBlobStore, key: str) -> None:
        self._store = store
        self._key = key
        self._parts: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self._store.fault("write", self._key)
        self._parts.append(bytes(data))

    async def commit(self) -> None:
        self._store.fault("commit", self._key)
        self._store.blobs[self._key] = b"".join(self._parts)

    async def abort(self) -> None:
        self._parts = []


class MemoryBlobStore:
    """Implements :class:`magnetar.storage.offload.api.BlobStore` in memory."""

    def __init__(self, plan: FaultPlan | None = None, *, driver: str = "memory", bucket: str = "memory") -> None:
        self.blobs: dict[str, bytes] = {}
        self._plan = plan
        self._driver = driver
        self._bucket = bucket

    def fault(self, op: str, key: str) -> None:
        if self._plan is not None and self._plan.should_fail(op):
            raise OffloadUnavailable(f"memory offload: {op} {key}: injected fault (endpoint unreachable)")

    @property
    def driver(self) -> str:
        return self._driver

    @property
    def bucket(self) -> str:
        return self._bucket

    async def check(self) -> None:
        return None

    async def writer(self, key: str) -> MemoryBlobWriter:
        return MemoryBlobWriter(self, key)

    async def read(self, key: str, offset: int, length: int) -> bytes:
        self.fault("read", key)
        if key not in self.blobs:
            raise OffloadNotFound(f"memory offload: {key} not found")
        return self.blobs[key][offset : offset + length]

    async def size(self, key: str) -> int:
        self.fault("size", key)
        if key not in self.blobs:
            raise OffloadNotFound(f"memory offload: {key} not found")
        return len(self.blobs[key])

    async def delete(self, keys: Sequence[str]) -> None:
        self.fault("delete", ",".join(keys))
        for key in keys:
            self.blobs.pop(key, None)

    async def list(self, prefix: str) -> list[str]:
        self.fault("list", prefix)
        return sorted(k for k in self.blobs if k.startswith(prefix))

    async def close(self) -> None:
        return None
