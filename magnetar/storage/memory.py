"""The in-memory ledger store: ledgers as lists of bytes, for tests and the reference twin.

It has the same semantics as the embedded store (shared ``_rules``: ids from 1 never reused, lifecycle,
limits, range checks); the sync policy is irrelevant here, an append is "durable" when it returns.
It knows nothing of files, topics, cursors or the broker, and keeps nothing across processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.storage import _rules
from magnetar.storage._rules import LedgerState
from magnetar.storage.api import LedgerInfo, LedgerNotFound, LedgerStore, StoreClosed


@dataclass(slots=True)
class _Ledger:
    ledger_id: int
    created_ms: int
    custom_metadata: dict[str, str]
    state: LedgerState = LedgerState.OPEN
    entries: list[bytes] = field(default_factory=list)
    size_bytes: int = 0

    def transition_to(self, target: LedgerState) -> None:
        _rules.check_transition(self.ledger_id, self.state, target)
        self.state = target

    def info(self) -> LedgerInfo:
        return LedgerInfo(
            ledger_id=self.ledger_id,
            entries=len(self.entries),
            size_bytes=self.size_bytes,
            sealed=self.state is LedgerState.SEALED,
            created_ms=self.created_ms,
            custom_metadata=dict(self.custom_metadata),
        )


class MemoryLedgerStore:
    """A :class:`~magnetar.storage.api.LedgerStore` held in memory."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ledgers: dict[int, _Ledger] = {}
        self._next_id = _rules.FIRST_LEDGER_ID
        self._closed = False

    def _ledger(self, ledger_id: int) -> _Ledger:
        if self._closed:
            raise StoreClosed("ledger store is closed", ledger_id=ledger_id)
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            raise LedgerNotFound(f"no ledger {ledger_id}", ledger_id=ledger_id)
        return ledger

    async def create_ledger(self, custom_metadata: Mapping[str, str]) -> LedgerInfo:
        if self._closed:
            raise StoreClosed("ledger store is closed")
        metadata = _rules.copy_metadata(custom_metadata)
        ledger = _Ledger(self._next_id, self._clock.now_ms(), metadata)
        self._next_id += 1
        self._ledgers[ledger.ledger_id] = ledger
        return ledger.info()

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        ledger = self._ledger(ledger_id)
        _rules.check_appendable(ledger_id, ledger.state)
        payload = bytes(data)
        _rules.check_entry_size(ledger_id, len(payload))
        ledger.entries.append(payload)
        ledger.size_bytes += len(payload)
        return len(ledger.entries) - 1

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        ledger = self._ledger(ledger_id)
        _rules.check_range(ledger_id, first_entry, last_entry, len(ledger.entries))
        return ledger.entries[first_entry : last_entry + 1]

    async def info(self, ledger_id: int) -> LedgerInfo:
        return self._ledger(ledger_id).info()

    async def seal(self, ledger_id: int) -> LedgerInfo:
        ledger = self._ledger(ledger_id)
        if ledger.state is not LedgerState.SEALED:
            ledger.transition_to(LedgerState.SEALED)
        return ledger.info()

    async def delete(self, ledger_id: int) -> None:
        ledger = self._ledger(ledger_id)
        ledger.transition_to(LedgerState.DELETED)
        del self._ledgers[ledger_id]

    async def list_ledgers(self) -> Sequence[int]:
        if self._closed:
            raise StoreClosed("ledger store is closed")
        return sorted(self._ledgers)

    async def close(self) -> None:
        self._closed = True


if TYPE_CHECKING:
    _conforms: LedgerStore = MemoryLedgerStore()
