"""An S3 bucket in memory, for unit tests and the seeded simulator: conditional creates, ranges, faults.

:class:`MemoryBucket` holds the objects and outlives every client (as S3 outlives a broker process); it
keeps every successful create (numbered, with its body, deleted or not), so a test can check that each key
was won exactly once and that an acknowledged append's object was created, and when.
:class:`MemoryObjectClient` is one process's connection to it, with its own faults as its plan decides
(``magnetar.core.faults.FaultPlan`` over the ops ``put``, ``get``, ``list``, ``delete``):

* ``unavailable``: the request fails before it reaches the bucket (a 5xx, a refused connection);
* ``lost answer`` (a share of put faults, ``lost_answer_probability``): the request fails as a timeout
  does, yet the create reaches the bucket, at once or a few turns later (a request delayed in the
  network, racing whatever the writer does next); the writer cannot tell this from ``unavailable``;
* latency: each request waits a random number of event-loop turns (``latency_turns_max``), so concurrent
  writers interleave as the seed says.

``conditional_writes=False`` makes creates overwrite, as a store that ignores ``If-None-Match`` does (the
ledger store must refuse to start on it). Deterministic for a seed: no threads, no real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from magnetar.core.faults import FaultPlan
from magnetar.storage.objectstore.api import (
    LIST_KEYS_MAX,
    ListedObject,
    ObjectClient,
    ObjectExists,
    ObjectMissing,
    ObjectUnavailable,
)

OPS = frozenset({"put", "get", "list", "delete"})


class MemoryBucket:
    def __init__(self, *, conditional_writes: bool = True) -> None:
        self.objects: dict[str, bytes] = {}
        self.creates: Counter[str] = Counter()  # successful creates per key
        self.history: dict[str, list[tuple[int, bytes]]] = {}  # every create per key: (its number, its body)
        self.conditional_writes = conditional_writes
        self.puts = 0
        self.deletes = 0

    def create(self, key: str, body: bytes) -> None:
        if self.conditional_writes and key in self.objects:
            raise ObjectExists(f"{key} exists (412 Precondition Failed)")
        self.objects[key] = bytes(body)
        self.creates[key] += 1
        self.puts += 1
        self.history.setdefault(key, []).append((self.puts, self.objects[key]))


class MemoryObjectClient:
    """Implements :class:`~magnetar.storage.objectstore.api.ObjectClient` on a :class:`MemoryBucket`."""

    def __init__(
        self,
        bucket: MemoryBucket,
        *,
        plan: FaultPlan | None = None,
        rng: random.Random | None = None,
        latency_turns_max: int = 0,
        lost_answer_probability: float = 0.5,
    ) -> None:
        self.bucket = bucket
        self.plan = plan
        self.rng = rng if rng is not None else random.Random(0)
        self.latency_turns_max = latency_turns_max
        self.lost_answer_probability = lost_answer_probability
        self.requests: Counter[str] = Counter()
        self.lost_answers = 0
        self.delayed: set[asyncio.Task[None]] = set()  # creates still travelling after a lost answer
        self.closed = False

    async def _request(self, op: str, key: str) -> None:
        """Network latency, then maybe a failure before the bucket sees the request."""
        self.requests[op] += 1
        for _ in range(self.rng.randint(0, self.latency_turns_max)):  # bounded by latency_turns_max
            await asyncio.sleep(0)
        if self.closed:
            raise ObjectUnavailable(f"{op} {key}: client closed")
        if self.plan is not None and self.plan.should_fail(op):
            if op == "put" and self.rng.random() < self.lost_answer_probability:
                return  # decided by the caller after the write: see put_if_absent
            raise ObjectUnavailable(f"injected fault: {op} {key}: 503 Service Unavailable")

    async def put_if_absent(self, key: str, body: bytes) -> None:
        before = self.plan.injected if self.plan is not None else 0
        await self._request("put", key)
        if self.plan is None or self.plan.injected == before:
            self.bucket.create(key, body)
            return
        self.lost_answers += 1
        delay_turns = self.rng.randint(0, 2 * self.latency_turns_max)
        if delay_turns == 0:
            with contextlib.suppress(ObjectExists):
                self.bucket.create(key, body)
        else:
            task = asyncio.get_running_loop().create_task(self._create_later(key, bytes(body), delay_turns))
            self.delayed.add(task)
            task.add_done_callback(self.delayed.discard)
        raise ObjectUnavailable(f"injected fault: put {key}: timed out (the create still lands)")

    async def _create_later(self, key: str, body: bytes, turns: int) -> None:
        for _ in range(turns):  # bounded by the drawn delay
            await asyncio.sleep(0)
        with contextlib.suppress(ObjectExists):
            self.bucket.create(key, body)

    async def get(self, key: str, first_byte: int = 0, last_byte: int | None = None) -> bytes:
        await self._request("get", key)
        data = self.bucket.objects.get(key)
        if data is None:
            raise ObjectMissing(f"{key}: no such key")
        return data[first_byte : None if last_byte is None else last_byte + 1]

    async def list(self, prefix: str, *, keys_max: int = LIST_KEYS_MAX) -> list[ListedObject]:
        await self._request("list", prefix)
        keys = sorted(k for k in self.bucket.objects if k.startswith(prefix))[:keys_max]
        return [ListedObject(k, len(self.bucket.objects[k])) for k in keys]

    async def delete(self, keys: Sequence[str]) -> None:
        await self._request("delete", keys[0] if keys else "")
        for key in keys:
            if self.bucket.objects.pop(key, None) is not None:
                self.bucket.deletes += 1

    async def close(self) -> None:
        self.closed = True


if TYPE_CHECKING:
    _conforms: ObjectClient = MemoryObjectClient(MemoryBucket())
