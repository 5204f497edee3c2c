"""The ledger audit: PIP-186's proof that no ledger is orphaned, and a tool users run.

It compares what storage holds with what metadata references and what is pending deletion:

- **orphan**: in storage, listed by no managed-ledger record, in no unhandled deletion message, and (on a
  live broker) not claimed by its owner as being created right now;
- **dangling**: listed by a record but missing from storage (data a reader will not find);
- **object orphan** (a store in an object store only): data objects of a ledger that no longer exists, left by
  a write that landed after its ledger's delete.

Reads only: records through the metadata store, pending messages straight from the deletion topics'
stored ledgers (everything after their cursor's mark-delete position counts as pending: an
over-approximation that can only hide an orphan whose message is handled but not yet trimmed, which the
second phase never leaves behind). ``fix`` queues orphans through the same two-phase path.
Ledgers kept outside the managed-ledger records (compacted ledgers) are named by the ``references`` the
caller passes (compaction's ``referenced_ledgers``): the audit imports no feature.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from magnetar.broker.deletion.messages import InvalidDeletionMessage, decode
from magnetar.broker.deletion.topics import NAMESPACE_PATH, TOPIC
from magnetar.ledger.deletion import (
    COMPONENT_METADATA,
    DeletionQueue,
    LedgerComponent,
    LedgerType,
    PendingDeleteLedger,
    context_of,
)
from magnetar.ledger.factory import list_managed_ledgers
from magnetar.ledger.formats import cursor_key, decode_cursor, decode_ledger, ledger_key
from magnetar.metadata.api import MetadataStore
from magnetar.storage.api import LedgerInfo, LedgerNotFound
from magnetar.storage.objectstore.orphans import ObjectOrphan
from magnetar.storage.offload.api import OffloadContext

#: ``(metadata, managed-ledger names) -> ledger ids referenced outside the records``
References = Callable[[MetadataStore, list[str]], Awaitable[set[int]]]
AUDIT_CURSORS = ("pulsar.ledger-deletion", "pulsar.ledger-deletion-dlq")


class ReadableLedgers(Protocol):
    """What the audit reads of storage: a store, or a stopped store's directory."""

    async def list_ledgers(self) -> Sequence[int]: ...

    async def info(self, ledger_id: int) -> LedgerInfo: ...

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]: ...


@runtime_checkable
class FindsObjectOrphans(Protocol):
    """A store whose ledgers are objects: it can find (and purge) objects of ledgers that no longer exist."""

    async def object_orphans(self) -> list[ObjectOrphan]: ...

    async def purge_object_orphan(self, ledger_id: int) -> None: ...


class Owners(Protocol):
    """The managed ledgers, and (on a live broker) their owners' answer for one copy."""

    async def list_names(self) -> list[str]: ...

    async def ledger_in_use(self, request: PendingDeleteLedger) -> bool: ...


class OffloadCopies(Protocol):
    """What the audit reads of the offload store."""

    async def list_copies(self) -> list[OffloadContext]: ...

    async def copy_owner(self, context: OffloadContext) -> str | None: ...


#: a deletion request must name a managed ledger; an offloaded copy whose index is gone names none
UNKNOWN_OWNER = f"{NAMESPACE_PATH}/__unknown-owner"


class StoppedOwners:
    """Owners of a stopped broker: its records are the whole truth, nobody is creating a ledger."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata

    async def list_names(self) -> list[str]:
        return await list_managed_ledgers(self._metadata)

    async def ledger_in_use(self, request: PendingDeleteLedger) -> bool:
        return False  # never asked: live=False


@dataclass(frozen=True, slots=True)
class Orphan:
    ledger_id: int
    owner: str | None  # the managed ledger its custom metadata names
    component: str | None
    size_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"ledgerId": self.ledger_id, "owner": self.owner, "component": self.component,
                "sizeBytes": self.size_bytes}


@dataclass(frozen=True, slots=True)
class OffloadOrphan:
    ledger_id: int
    uuid: str
    owner: str | None

    def to_json(self) -> dict[str, Any]:
        return {"ledgerId": self.ledger_id, "uuid": self.uuid, "owner": self.owner}


@dataclass(slots=True)
class AuditReport:
    storage_ledgers: int = 0
    referenced_ledgers: int = 0
    pending_deletions: int = 0
    orphans: list[Orphan] = field(default_factory=list)
    dangling: list[tuple[str, int]] = field(default_factory=list)
    offload_orphans: list[OffloadOrphan] = field(default_factory=list)
    object_orphans: list[ObjectOrphan] = field(default_factory=list)
    fixed: int = 0
    elapsed_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "storageLedgers": self.storage_ledgers,
            "referencedLedgers": self.referenced_ledgers,
            "pendingDeletions": self.pending_deletions,
            "orphans": [o.to_json() for o in self.orphans],
            "dangling": [{"managedLedger": name, "ledgerId": lid} for name, lid in self.dangling],
            "offloadOrphans": [o.to_json() for o in self.offload_orphans],
            "objectOrphans": [o.to_json() for o in self.object_orphans],
            "fixedOrphans": self.fixed,
            "elapsedSeconds": round(self.elapsed_s, 3),
        }


async def _references(metadata: MetadataStore, names: Iterable[str]) -> dict[int, str]:
    """Ledger id -> owner, for every local copy a record still uses (not the released ones)."""
    owners: dict[int, str] = {}
    for name in names:
        stored = await metadata.get(ledger_key(name))
        if stored is None:
            continue
        for summary in decode_ledger(stored.value, ledger_key(name)).ledgers:
            if summary.offload is None or not summary.offload.local_deleted:
                owners[summary.ledger_id] = name
    return owners


async def _pending(metadata: MetadataStore, store: ReadableLedgers, family: Iterable[str],
                   offloaded: set[str] | None = None) -> set[int]:
    """Ledger ids (local copies) named by deletion messages after their topic's cursor; the uuids of the
    offloaded copies they name go into ``offloaded``."""
    pending: set[int] = set()
    for name in family:
        stored = await metadata.get(ledger_key(name))
        if stored is None:
            continue
        start = None
        for cursor_name in AUDIT_CURSORS:
            cursor = await metadata.get(cursor_key(name, cursor_name))
            if cursor is not None:
                start = decode_cursor(cursor.value, cursor_key(name, cursor_name)).mark_delete
        for summary in decode_ledger(stored.value, ledger_key(name)).ledgers:
            first = 0
            if start is not None and summary.ledger_id < start.ledger_id:
                continue
            if start is not None and summary.ledger_id == start.ledger_id:
                first = start.entry_id + 1
            try:
                info = await store.info(summary.ledger_id)
            except LedgerNotFound:
                continue
            if first >= info.entries:
                continue
            for data in await store.read(summary.ledger_id, first, info.entries - 1):
                try:
                    request = decode(data).request
                except InvalidDeletionMessage:
                    continue
                if request.ledger_type is LedgerType.LEDGER:
                    pending.add(request.ledger_id)
                elif offloaded is not None and request.offload_context is not None:
                    offloaded.add(request.offload_context.get("uuid", ""))
    return pending


async def _offload_orphans(
    metadata: MetadataStore, store: ReadableLedgers, names: list[str], offload: OffloadCopies
) -> list[OffloadOrphan]:
    """Offloaded copies no record names (complete or being written) and no deletion message names."""
    named: set[str] = set()
    for name in names:
        stored = await metadata.get(ledger_key(name))
        if stored is not None:
            named |= {x.offload.context.uuid for x in decode_ledger(stored.value, ledger_key(name)).ledgers
                      if x.offload is not None}
    family_prefix = f"{NAMESPACE_PATH}/{TOPIC}"
    await _pending(metadata, store, [n for n in names if n.startswith(family_prefix)], named)
    orphans = []
    for context in await offload.list_copies():
        if context.uuid not in named:
            orphans.append(OffloadOrphan(context.ledger_id, context.uuid, await offload.copy_owner(context)))
    return orphans


async def known_ledgers(
    metadata: MetadataStore, store: ReadableLedgers, names: list[str], references: Sequence[References] = ()
) -> tuple[dict[int, str], set[int], set[int]]:
    """What metadata knows: local copies the records use (id -> owner), every referenced id (records and
    ``references``, e.g. compaction's ``referenced_ledgers``), and the ids pending in deletion messages."""
    owners = await _references(metadata, names)
    referenced = set(owners)
    for source in references:
        referenced |= await source(metadata, names)
    family_prefix = f"{NAMESPACE_PATH}/{TOPIC}"
    pending = await _pending(metadata, store, [n for n in names if n.startswith(family_prefix)])
    return owners, referenced, pending


async def audit(
    metadata: MetadataStore,
    store: ReadableLedgers,
    factory: Owners,
    *,
    live: bool,
    fix: DeletionQueue | None = None,
    offload: OffloadCopies | None = None,
    references: Sequence[References] = (),
) -> AuditReport:
    """Audit ``store`` against ``metadata``. ``live``: a broker is running; candidates are confirmed with
    their owner (a ledger being created is not yet listed). ``fix``: queue every orphan for deletion.
    ``references``: the sources of ledgers referenced outside the managed-ledger records (compaction's)."""
    started = time.monotonic()
    report = AuditReport()
    owners, referenced, pending = await known_ledgers(metadata, store, await factory.list_names(), references)
    stored = set(await store.list_ledgers())
    report.storage_ledgers = len(stored)
    report.referenced_ledgers = len(referenced)
    report.pending_deletions = len(pending)
    for ledger_id in sorted(stored - referenced - pending):
        try:
            info = await store.info(ledger_id)
        except LedgerNotFound:
            continue  # deleted while we looked
        owner = info.custom_metadata.get("pulsar/managed-ledger")
        if live and owner is not None and await factory.ledger_in_use(PendingDeleteLedger(owner, ledger_id)):
            continue
        report.orphans.append(Orphan(ledger_id, owner, info.custom_metadata.get("component"), info.size_bytes))
    report.dangling = sorted((owners[i], i) for i in owners if i not in stored)
    if offload is not None:
        report.offload_orphans = await _offload_orphans(metadata, store, await factory.list_names(), offload)
    if isinstance(store, FindsObjectOrphans):
        report.object_orphans = await store.object_orphans()
        for orphan in report.object_orphans if fix is not None else ():
            await store.purge_object_orphan(orphan.ledger_id)  # no owner to ask: the ledger is gone
            report.fixed += 1
    if fix is not None and report.orphans:
        # only managed-ledger ledgers: the second phase checks the same custom metadata before deleting
        requests = [PendingDeleteLedger(o.owner, o.ledger_id) for o in report.orphans
                    if o.owner and o.component == COMPONENT_METADATA[LedgerComponent.MANAGED_LEDGER]]
        report.fixed = len(await fix.enqueue(requests))
    if fix is not None and report.offload_orphans and offload is not None:
        copies = {(c.ledger_id, c.uuid): c for c in await offload.list_copies()}
        offload_requests = [
            PendingDeleteLedger(o.owner or UNKNOWN_OWNER, o.ledger_id, ledger_type=LedgerType.OFFLOAD_LEDGER,
                                offload_context=context_of(copies[(o.ledger_id, o.uuid)]))
            for o in report.offload_orphans if (o.ledger_id, o.uuid) in copies
        ]
        report.fixed += len(await fix.enqueue(offload_requests))
    report.elapsed_s = time.monotonic() - started
    return report
