"""How a compacted ledger leaves storage: the one path every deletion of compaction takes.

Without PIP-186 (two-phase deletion off) :class:`DirectDeleter` deletes from storage at once. With it,
:class:`TwoPhaseDeleter` queues a ``COMPACTED_LEDGER`` request on the ``__ledger_deletion`` system topic; the
deletion service later asks :func:`compacted_ledger_in_use` (registered as the owner of that component)
and deletes only a ledger the topic's ``__compaction`` cursor no longer names as its view or as the one
being written. A ledger that was not queued stays recorded (``retired``/``pending``) and is queued again
when the topic loads next.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from magnetar.broker.compaction.state import COMPACTION_CURSOR, LEDGER_PROPERTY, NONE, PENDING_PROPERTY
from magnetar.ledger.deletion import DeletionQueue, LedgerComponent, PendingDeleteLedger
from magnetar.ledger.formats import cursor_key, decode_cursor
from magnetar.metadata.api import MetadataStore
from magnetar.storage.api import LedgerNotFound, LedgerStore


class CompactedLedgerDeleter(Protocol):
    async def delete(self, topic: str, ledger_id: int) -> bool:
        """Delete (or durably queue the deletion of) ``topic``'s compacted ledger; False if neither happened."""
        ...


class DirectDeleter:
    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    async def delete(self, topic: str, ledger_id: int) -> bool:
        with contextlib.suppress(LedgerNotFound):  # recovery retries deletions: already gone is fine
            await self._store.delete(ledger_id)
        return True


class TwoPhaseDeleter:
    def __init__(self, queue: DeletionQueue) -> None:
        self._queue = queue

    async def delete(self, topic: str, ledger_id: int) -> bool:
        request = PendingDeleteLedger(topic, ledger_id, LedgerComponent.COMPACTED_LEDGER,
                                      cursor_name=COMPACTION_CURSOR)
        return ledger_id in await self._queue.enqueue([request])


async def compacted_ledger_in_use(metadata: MetadataStore, request: PendingDeleteLedger) -> bool:
    """PIP-186's owner check for compacted ledgers: is it the topic's view or the one a compaction writes?"""
    key = cursor_key(request.topic, COMPACTION_CURSOR)
    stored = await metadata.get(key)
    if stored is None:
        return False  # no compaction cursor (the topic was deleted): nothing uses it
    properties = decode_cursor(stored.value, key).properties
    return request.ledger_id in {properties.get(LEDGER_PROPERTY, NONE), properties.get(PENDING_PROPERTY, NONE)}
