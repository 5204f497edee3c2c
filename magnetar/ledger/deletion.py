"""Two-phase ledger deletion (PIP-186), the ledger layer's half: what is queued, and who is asked.

Deleting a ledger touches metadata (the managed-ledger record) and storage, which share no transaction.
One phase (record first, storage second) leaks an orphan whenever the storage delete fails or the process
dies in between. Two phases never do: a managed ledger first *queues* each ledger it drops
(:class:`DeletionQueue`, durably: the broker's ``__ledger_deletion`` system topic), removes from its record
only the ledgers whose queuing succeeded, in one compare-and-set; a deletion service later deletes from
storage, asking the owner first whether the ledger is still listed (:meth:`ManagedLedgerImpl.ledger_in_use`).

A queued ledger may still be listed (the record write failed or the process died after queuing): the owner
then answers "in use", the request is dropped, and the next trim queues it again. The owner answers only
once no trim or delete of that ledger is between its two steps (:class:`DropsInFlight`), so "in use" is
never answered for a ledger a moment before the record stops listing it.

This module knows nothing of topics or messages; the broker supplies the queue.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from magnetar.ledger.api import LedgerSummary
from magnetar.storage.offload.api import OffloadContext

T = TypeVar("T")


class LedgerComponent(enum.Enum):
    """What a ledger holds (PIP-186's ``ledgerComponent``), matched against its storage custom metadata."""

    MANAGED_LEDGER = "MANAGED_LEDGER"
    MANAGED_CURSOR = "MANAGED_CURSOR"
    SCHEMA_STORAGE = "SCHEMA_STORAGE"
    COMPACTED_LEDGER = "COMPACTED_LEDGER"


class LedgerType(enum.Enum):
    """Where the copy to delete lives: local storage, or the offload store."""

    LEDGER = "LEDGER"
    OFFLOAD_LEDGER = "OFFLOAD_LEDGER"


#: the storage custom-metadata value of ``component`` for each component
COMPONENT_METADATA = {
    LedgerComponent.MANAGED_LEDGER: "managed-ledger",
    LedgerComponent.MANAGED_CURSOR: "managed-cursor",
    LedgerComponent.SCHEMA_STORAGE: "schema",
    LedgerComponent.COMPACTED_LEDGER: "compacted-ledger",
}


@dataclass(frozen=True, slots=True)
class PendingDeleteLedger:
    """PIP-186's ``PendingDeleteLedgerInfo``: one copy of one ledger to delete, and whose it was."""

    topic: str  # the managed-ledger name
    ledger_id: int
    component: LedgerComponent = LedgerComponent.MANAGED_LEDGER
    ledger_type: LedgerType = LedgerType.LEDGER
    cursor_name: str | None = None
    schema_id: str | None = None
    offload_context: Mapping[str, str] | None = field(default=None, compare=False)


class DeletionQueue(Protocol):
    async def enqueue(self, requests: Sequence[PendingDeleteLedger]) -> set[int]:
        """Queue ``requests`` durably; the ids of the ledgers all of whose requests were queued.
        Never raises for a failed queuing: those ledgers are simply not in the answer."""
        ...


class DropsInFlight:
    """Ledgers a managed ledger has queued for deletion but not yet removed from its record."""

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def __contains__(self, ledger_id: int) -> bool:
        return ledger_id in self._ids

    @contextmanager
    def holding(self, ledger_ids: Sequence[int]) -> Iterator[None]:
        self._ids.update(ledger_ids)
        self._idle.clear()
        try:
            yield
        finally:
            self._ids.difference_update(ledger_ids)
            if not self._ids:
                self._idle.set()

    async def run_holding(self, ledger_ids: Sequence[int], work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` (queue, then unlist) holding ``ledger_ids`` until it has finished, even when the
        caller is cancelled: a drop cut between its record write and its in-memory update would let the
        owner answer "in use" for a ledger the record no longer lists, and the ledger would be orphaned."""

        async def held() -> T:
            with self.holding(ledger_ids):
                return await work

        task = asyncio.ensure_future(held())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if nobody waits
        return await asyncio.shield(task)

    async def settled(self, ledger_id: int) -> None:
        """Return once ``ledger_id`` is between no two steps (bounded by the trim or delete holding it)."""
        while ledger_id in self._ids:  # each pass waits for a drop in flight to finish
            await self._idle.wait()


def context_of(context: OffloadContext) -> dict[str, str]:
    """An offload context as the string map a deletion message carries."""
    return {"driver": context.driver, "bucket": context.bucket, "prefix": context.prefix, "uuid": context.uuid,
            "ledgerId": str(context.ledger_id)}


def context_from(ledger_id: int, fields: Mapping[str, str]) -> OffloadContext:
    """The offload context a deletion message names (KeyError when a field is missing)."""
    return OffloadContext(fields["driver"], fields["bucket"], fields["prefix"], fields["uuid"], ledger_id)


def drop_requests(name: str, summary: LedgerSummary) -> list[PendingDeleteLedger]:
    """Every copy of a ledger leaving the record: the local one (unless already released) and the
    offloaded one (a ledger in both places gets two requests, as PIP-186 says)."""
    requests: list[PendingDeleteLedger] = []
    offload = summary.offload
    if offload is None or not offload.local_deleted:
        requests.append(PendingDeleteLedger(name, summary.ledger_id))
    if offload is not None:
        requests.append(PendingDeleteLedger(name, summary.ledger_id, ledger_type=LedgerType.OFFLOAD_LEDGER,
                                            offload_context=context_of(offload.context)))
    return requests


def copy_listed(summary: LedgerSummary | None, request: PendingDeleteLedger) -> bool:
    """Does the record entry ``summary`` still use the copy ``request`` would delete?"""
    if summary is None:
        return False
    offload = summary.offload
    if request.ledger_type is LedgerType.LEDGER:
        return offload is None or not offload.local_deleted  # a released local copy is no longer used
    uuid = (request.offload_context or {}).get("uuid")
    # only the complete copy the record names is used; a failed or superseded attempt's objects are not
    return offload is not None and offload.complete and offload.context.uuid == uuid
