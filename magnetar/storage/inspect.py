"""Read-only inspection of a stopped embedded store's directory: which ledgers exist, their custom metadata
and sizes, and their entries, without taking the store's lock, recovering or truncating anything.

For audits of a stopped broker (``magnetar admin audit-ledgers --data-dir``) and Spark jobs whose tasks read
sidecars in parallel. Never use it on a directory a running store owns: it sees files, not the store's state.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from collections.abc import Sequence
from pathlib import Path

from magnetar.storage import _format
from magnetar.storage._files import Sidecar
from magnetar.storage.api import EntryCorrupted, LedgerInfo, LedgerNotFound, StorageError

META_SUFFIX = ".meta"
DATA_SUFFIX = ".log"


def ledger_dir(store_directory: Path) -> Path:
    return store_directory / "ledgers"


def ledger_ids(store_directory: Path) -> list[int]:
    """Every ledger with a sidecar, ascending (the store's own definition of "exists")."""
    ids = []
    with os.scandir(ledger_dir(store_directory)) as entries:
        for entry in entries:
            stem, _, suffix = entry.name.partition(".")
            if "." + suffix == META_SUFFIX and stem.isdigit():
                ids.append(int(stem))
    return sorted(ids)


def ledger_info(store_directory: Path, ledger_id: int) -> LedgerInfo:
    """The sidecar's facts and the data file's size (entries counted only for sealed ledgers)."""
    base = ledger_dir(store_directory) / f"{ledger_id:020d}"
    try:
        sidecar = Sidecar.from_json(base.with_suffix(META_SUFFIX).read_bytes())
    except FileNotFoundError:
        raise LedgerNotFound(f"ledger {ledger_id} does not exist", ledger_id=ledger_id) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"ledger {ledger_id}: unreadable sidecar: {exc}", ledger_id=ledger_id) from exc
    try:
        size = base.with_suffix(DATA_SUFFIX).stat().st_size
    except FileNotFoundError:
        size = 0
    info = LedgerInfo(ledger_id, sidecar.sealed_entries or 0, size, sidecar.sealed, sidecar.created_ms,
                      sidecar.custom_metadata)
    return info


def _scan(view: memoryview, sealed_entries: int | None) -> list[tuple[int, int]]:
    scan = _format.scan(view, sealed_entries)
    ends = [*scan.offsets[1:], scan.end]
    return list(zip(scan.offsets, ends, strict=True))


def ledger_entries(store_directory: Path, ledger_id: int) -> list[bytes]:
    """Every intact entry of a ledger, in order (a torn tail is left out, as recovery would cut it)."""
    info = ledger_info(store_directory, ledger_id)
    path = ledger_dir(store_directory) / f"{ledger_id:020d}{DATA_SUFFIX}"
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below; mmap needs the descriptor
    except FileNotFoundError:
        return []
    with file:
        if os.fstat(file.fileno()).st_size == 0:
            return []
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return [_entry(view, start, end, ledger_id, i)
                        for i, (start, end) in enumerate(_scan(view, info.entries if info.sealed else None))]
            finally:
                view.release()


def _entry(view: memoryview, start: int, end: int, ledger_id: int, entry_id: int) -> bytes:
    try:
        return _format.decode(view, start, end, ledger_id, entry_id)
    except EntryCorrupted:
        return b""  # a damaged entry reads as empty here (the store would refuse it)


class DirectoryLedgerReader:
    """The read side of a LedgerStore over a stopped store's directory (``list_ledgers``, ``info``, ``read``)."""

    def __init__(self, store_directory: Path) -> None:
        self._directory = store_directory

    async def list_ledgers(self) -> Sequence[int]:
        return ledger_ids(self._directory)

    async def info(self, ledger_id: int) -> LedgerInfo:
        info = ledger_info(self._directory, ledger_id)
        if not info.sealed:  # the last writer's ledger: its entries are what is intact on disk
            return dataclasses.replace(info, entries=len(ledger_entries(self._directory, ledger_id)))
        return info

    async def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        return ledger_entries(self._directory, ledger_id)[first_entry:last_entry + 1]
