"""The managed-ledger factory: opens each managed ledger once, lists and closes them.

Owns the table of open managed ledgers of one process (``open`` of an open name returns the same object,
concurrent opens of one name share one recovery) and the walk of ``/managed-ledgers`` that lists names.
Knows nothing of the broker; the recovery itself lives in :mod:`recovery`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from magnetar.core.clock import Clock, SystemClock
from magnetar.ledger.api import (
    Cursor,
    LedgerSummary,
    ManagedLedger,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactory,
)
from magnetar.ledger.cursor import ManagedCursor, SleepMs, asyncio_sleep_ms
from magnetar.ledger.deletion import DeletionQueue, LedgerComponent, PendingDeleteLedger, copy_listed
from magnetar.ledger.formats import CURSORS_SEGMENT, ROOT_KEY, decode_ledger, ledger_key
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.ledger.recovery import open_managed_ledger
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.storage.api import LedgerStore
from magnetar.storage.offload.api import OffloadStore

ComponentOwner = Callable[[PendingDeleteLedger], Awaitable[bool]]
log = logging.getLogger("magnetar.ledger")

#: Most metadata nodes ``list_names`` visits (a bound on the walk, far above any real namespace tree).
LIST_NODES_MAX = 1_000_000
#: Nodes visited between two yields to the event loop (the embedded store answers without awaiting: a walk
#: over many topics must not stall the connections being served meanwhile).
LIST_NODES_PER_YIELD = 256


async def list_managed_ledgers(metadata: MetadataStore) -> list[str]:
    """Every managed ledger with a record in ``metadata``, walking the key tree under /managed-ledgers."""
    names: list[str] = []
    stack: list[tuple[str, bool]] = [("", False)]  # (relative path, is a managed ledger)
    for visited in range(LIST_NODES_MAX):
        if not stack:
            break
        if visited % LIST_NODES_PER_YIELD == LIST_NODES_PER_YIELD - 1:
            await asyncio.sleep(0)
        path, is_ledger = stack.pop()
        try:
            children = await metadata.children(f"{ROOT_KEY}/{path}" if path else ROOT_KEY)
            for child in children:
                if is_ledger and child == CURSORS_SEGMENT:
                    continue
                sub = f"{path}/{child}" if path else child
                child_is_ledger = await metadata.exists(f"{ROOT_KEY}/{sub}")
                if child_is_ledger:
                    names.append(sub)
                stack.append((sub, child_is_ledger))
        except MetadataError as exc:
            raise ManagedLedgerError(f"listing managed ledgers failed: {exc}") from exc
    return sorted(names)


class LedgerFactory:
    """Implements :class:`magnetar.ledger.api.ManagedLedgerFactory`.

    ``sleep_ms`` is the delay used by cursor persistence debouncing (tests inject a controllable one).
    ``offload_store`` is tiered storage's store (None: offload is off).
    """

    def __init__(
        self,
        store: LedgerStore,
        metadata: MetadataStore,
        *,
        config: ManagedLedgerConfig = ManagedLedgerConfig(),  # noqa: B008 - frozen value object
        clock: Clock = SystemClock(),  # noqa: B008 - stateless
        sleep_ms: SleepMs = asyncio_sleep_ms,
        offload_store: OffloadStore | None = None,
    ) -> None:
        self._store = store
        self._offload_store = offload_store
        self._metadata = metadata
        self._config = config
        self._clock = clock
        self._sleep_ms = sleep_ms
        self._open: dict[str, ManagedLedgerImpl] = {}
        self._opening: dict[str, asyncio.Task[ManagedLedgerImpl]] = {}
        self._closed = False
        self._deletion_queue: Callable[[str], DeletionQueue | None] = lambda _: None
        self._component_owners: dict[LedgerComponent, ComponentOwner] = {}

    # ---- PIP-186 two-phase deletion ------------------------------------------------------------------------

    def set_deletion_queue(self, queue_for: Callable[[str], DeletionQueue | None]) -> None:
        """Drop ledgers through ``queue_for(name)`` (two phases; None = one phase) from now on, also in
        managed ledgers already open."""
        self._deletion_queue = queue_for
        for ledger in self._open.values():
            ledger.deletion_queue = queue_for(ledger.name)

    def cancel_background(self) -> None:
        """A simulated crash: stop the background work of every open managed ledger."""
        for ledger in self._open.values():
            ledger.cancel_background()

    def set_component_owner(self, component: LedgerComponent, in_use: ComponentOwner) -> None:
        """Ledgers of ``component`` kept outside the managed-ledger records (compacted ledgers) are answered
        for by ``in_use``, which the service keeping them supplies."""
        self._component_owners[component] = in_use

    async def ledger_in_use(self, request: PendingDeleteLedger) -> bool:
        """The owner's answer for PIP-186's second phase: does ``request.topic`` still use that copy?
        Asks the open managed ledger (after an open in progress finishes), else reads its record."""
        owner = self._component_owners.get(request.component)
        if owner is not None:
            return await owner(request)
        name = request.topic
        task = self._opening.get(name)
        if task is not None:
            await asyncio.wait([task])
        ledger = self._open.get(name)
        if ledger is not None:
            return await ledger.ledger_in_use(request)
        record = await self.stored_record(name)
        if record is None:
            return False
        summaries, _ = record
        return copy_listed(next((x for x in summaries if x.ledger_id == request.ledger_id), None), request)

    def _require_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosed("the managed-ledger factory is closed")

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedgerImpl:
        """``config`` applies when the ledger is not open yet; an open one keeps its own."""
        self._require_open()
        ledger_key(name)  # validates the name
        existing = self._open.get(name)
        if existing is not None:
            return existing
        task = self._opening.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._open_new(name, config or self._config))
            self._opening[name] = task
        return await asyncio.shield(task)

    async def _open_new(self, name: str, config: ManagedLedgerConfig) -> ManagedLedgerImpl:
        try:
            ledger = await open_managed_ledger(
                name, self._store, self._metadata, config=config, clock=self._clock,
                sleep_ms=self._sleep_ms, on_closed=self._forget, offload_store=self._offload_store,
                deletion_queue=self._deletion_queue(name),
            )
            self._open[name] = ledger
            return ledger
        finally:
            self._opening.pop(name, None)

    def _forget(self, ledger: ManagedLedgerImpl) -> None:
        if self._open.get(ledger.name) is ledger:
            del self._open[ledger.name]

    async def exists(self, name: str) -> bool:
        try:
            return await self._metadata.exists(ledger_key(name))
        except MetadataError as exc:
            raise ManagedLedgerError(f"checking {name} failed: {exc}") from exc

    async def stored_record(self, name: str) -> tuple[Sequence[LedgerSummary], Mapping[str, str]] | None:
        """The ledger list and properties of ``name`` without opening it (the open managed ledger's own when
        it is open); None when it has no record."""
        ledger = self._open.get(name)
        if ledger is not None:
            return ledger.ledgers(), dict(ledger.properties)
        try:
            stored = await self._metadata.get(ledger_key(name))
        except MetadataError as exc:
            raise ManagedLedgerError(f"reading the record of {name} failed: {exc}") from exc
        if stored is None:
            return None
        record = decode_ledger(stored.value, ledger_key(name))
        return record.ledgers, record.properties

    async def list_names(self) -> list[str]:
        """Every managed ledger with a record, found by walking the key tree under /managed-ledgers."""
        return await list_managed_ledgers(self._metadata)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in list(self._opening.values()):
            await asyncio.wait([task])
        for ledger in list(self._open.values()):
            try:
                await ledger.close()
            except ManagedLedgerError as exc:
                log.warning("closing %s: %s", ledger.name, exc)
        self._open.clear()


if TYPE_CHECKING:

    def _conforms(
        factory: LedgerFactory, ledger: ManagedLedgerImpl, cursor: ManagedCursor
    ) -> tuple[ManagedLedgerFactory, ManagedLedger, Cursor]:
        return factory, ledger, cursor  # mypy checks the three implement the API protocols
