"""The ledger store's calls to the object client: each retried a bounded number of times, then translated.

A request the service did not answer (:class:`ObjectUnavailable`: a 5xx, a timeout, a refused connection)
is sent again after a back-off (``backoff_ms``, doubling to ``backoff_ms_max``), at most ``attempts_max``
times in all; then it fails as :class:`~magnetar.storage.api.StorageIOError` (a write as its subclass
:class:`~magnetar.storage.api.WriteOutcomeUnknown`: the object may exist after all). A create that finds
its key taken (412) cannot tell "someone else's" from "ours, from an attempt whose answer was lost", so
:meth:`Requests.create` reads the object back and compares: the body holds the writer's token and position,
so equal bytes mean ours. Failures are logged loudly once (``WriteErrorLog``), not once per request. Knows
nothing of ledgers beyond the id it names in messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from magnetar.storage._write_errors import WriteErrorLog
from magnetar.storage.api import StorageIOError, WriteOutcomeUnknown
from magnetar.storage.objectstore.api import ListedObject, ObjectClient, ObjectExists, ObjectMissing, ObjectUnavailable

T = TypeVar("T")
SleepMs = Callable[[float], Awaitable[None]]
#: Keys one DeleteObjects request names at most (S3's limit).
DELETE_KEYS_MAX = 1000


async def real_sleep_ms(delay_ms: float) -> None:
    await asyncio.sleep(delay_ms / 1000)


class Requests:
    def __init__(
        self,
        client: ObjectClient,
        *,
        attempts_max: int,
        backoff_ms: int,
        backoff_ms_max: int,
        sleep_ms: SleepMs,
        errors: WriteErrorLog,
    ) -> None:
        if attempts_max < 1:
            raise ValueError("attempts_max must be at least 1")
        self.client = client
        self._attempts_max = attempts_max
        self._backoff_ms = backoff_ms
        self._backoff_ms_max = backoff_ms_max
        self._sleep_ms = sleep_ms
        self.errors = errors
        self.retries = 0

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str, ledger_id: int | None, *,
                        write: bool = False) -> T:
        for attempt in range(1, self._attempts_max + 1):  # bounded by attempts_max
            try:
                result = await call()
            except ObjectUnavailable as exc:
                if attempt == self._attempts_max:
                    self.errors.failed(ledger_id, what, exc)
                    kind = WriteOutcomeUnknown if write else StorageIOError
                    raise kind(
                        f"ledger {ledger_id}: {what} failed after {attempt} attempts: {exc}", ledger_id=ledger_id
                    ) from exc
                self.retries += 1
                await self._sleep_ms(min(self._backoff_ms * 2 ** (attempt - 1), self._backoff_ms_max))
                continue
            if self.errors.failing:
                self.errors.succeeded()
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def create(self, key: str, body: bytes, what: str, ledger_id: int | None) -> bool:
        """Create ``key`` holding ``body`` unless it exists. True if it now holds ``body`` (this call's
        create, or an earlier attempt's whose answer was lost); False if it holds something else."""

        async def attempt() -> bool:
            try:
                await self.client.put_if_absent(key, body)
                return True
            except ObjectExists:
                pass
            try:
                return await self.client.get(key) == body
            except ObjectMissing:  # deleted since: not ours to claim now
                return False

        return await self._retrying(attempt, what, ledger_id, write=True)

    async def create_new(self, key: str, body: bytes, what: str, ledger_id: int | None) -> bool:
        """Create ``key`` unless it exists: True if this call's create (or an earlier attempt's) stored it,
        False if the key was taken, possibly by an earlier attempt of this call whose answer was lost (for
        objects where a second copy one key higher is harmless: fences)."""

        async def attempt() -> bool:
            try:
                await self.client.put_if_absent(key, body)
                return True
            except ObjectExists:
                return False

        return await self._retrying(attempt, what, ledger_id, write=True)

    async def get(self, key: str, what: str, ledger_id: int | None, first_byte: int = 0,
                  last_byte: int | None = None) -> bytes:
        """The bytes (ObjectMissing if there is no such key)."""
        return await self._retrying(lambda: self.client.get(key, first_byte, last_byte), what, ledger_id)

    async def list_keys(self, prefix: str, what: str, ledger_id: int | None = None) -> list[ListedObject]:
        return await self._retrying(lambda: self.client.list(prefix), what, ledger_id)

    async def delete(self, keys: Sequence[str], what: str, ledger_id: int | None) -> None:
        for start in range(0, len(keys), DELETE_KEYS_MAX):  # bounded by the keys given
            await self._retrying(self._deleting(list(keys[start : start + DELETE_KEYS_MAX])), what, ledger_id)

    def _deleting(self, batch: list[str]) -> Callable[[], Awaitable[None]]:
        return lambda: self.client.delete(batch)
