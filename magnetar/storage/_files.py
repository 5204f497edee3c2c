"""The embedded store's directory: layout, atomic small-file writes, ledger sidecars, recovery at open.

Layout under the store directory::

    LOCK                      flock'ed by the one process that has the store open
    next_ledger_id            decimal; ids below it may have been used (written before any delete)
    ledgers/<id:020d>.log     the ledger's records (see ``_format``)
    ledgers/<id:020d>.meta    JSON sidecar: format, ledger_id, created_ms, custom_metadata, sealed,
                              sealed_entries; always replaced atomically (tmp + fsync + rename + fsync dir)

A ledger exists when its sidecar does. A ``.log`` without a sidecar is left by a create or a delete that
crashed half-way and is removed at open. The next ledger id is ``max(next_ledger_id, highest id on disk +
1)``: the counter only needs writing when a delete would otherwise let an id be forgotten.

Blocking I/O only: the store calls these functions from worker threads (``recover_ledger``, a scan like a
read, on the loop). This module knows nothing of asyncio, group commit, topics or the broker.
"""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from magnetar.storage import _format
from magnetar.storage._rules import FIRST_LEDGER_ID
from magnetar.storage.api import StorageError

logger = logging.getLogger("magnetar.storage")

FORMAT_VERSION = 1
Fsync = Callable[[int], None]
_DATA_SUFFIX = ".log"
_META_SUFFIX = ".meta"
_TMP_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class Sidecar:
    ledger_id: int
    created_ms: int
    custom_metadata: Mapping[str, str]
    sealed: bool = False
    sealed_entries: int | None = None

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT_VERSION,
            "ledger_id": self.ledger_id,
            "created_ms": self.created_ms,
            "custom_metadata": dict(self.custom_metadata),
            "sealed": self.sealed,
            "sealed_entries": self.sealed_entries,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Sidecar:
        body = json.loads(raw)
        if body.get("format") != FORMAT_VERSION:
            raise ValueError(f"unknown sidecar format {body.get('format')!r}")
        sealed_entries = body["sealed_entries"]
        return cls(
            ledger_id=int(body["ledger_id"]),
            created_ms=int(body["created_ms"]),
            custom_metadata={str(k): str(v) for k, v in body["custom_metadata"].items()},
            sealed=bool(body["sealed"]),
            sealed_entries=None if sealed_entries is None else int(sealed_entries),
        )


@dataclass(slots=True)
class RecoveredLedger:
    sidecar: Sidecar
    fd: int | None  # None for a sealed ledger: its file is opened again when it is read
    scan: _format.ScanResult


class Layout:
    """Paths and blocking file operations of one store directory."""

    def __init__(self, directory: Path, fsync: Fsync) -> None:
        self.directory = directory
        self.ledgers = directory / "ledgers"
        self._fsync = fsync
        self._lock_fd: int | None = None

    def data_path(self, ledger_id: int) -> Path:
        return self.ledgers / f"{ledger_id:020d}{_DATA_SUFFIX}"

    def meta_path(self, ledger_id: int) -> Path:
        return self.ledgers / f"{ledger_id:020d}{_META_SUFFIX}"

    def lock(self) -> None:
        self.ledgers.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"{self.directory} is open in another store") from exc
        self._lock_fd = fd

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing releases the flock

    def fsync_dir(self, directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def write_atomic(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + _TMP_SUFFIX)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:  # bounded: each turn writes at least one byte or raises
                written = os.write(fd, view)
                view = view[written:]
            self._fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self.fsync_dir(path.parent)

    def read_counter(self) -> int:
        try:
            return int((self.directory / "next_ledger_id").read_text().strip())
        except FileNotFoundError:
            return FIRST_LEDGER_ID

    def write_counter(self, next_id: int) -> None:
        self.write_atomic(self.directory / "next_ledger_id", f"{next_id}\n".encode())

    def create_ledger(self, sidecar: Sidecar) -> int:
        """Create the data file and the sidecar (the sidecar last: it is what makes the ledger exist)."""
        data_path = self.data_path(sidecar.ledger_id)
        fd = os.open(data_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.write_atomic(self.meta_path(sidecar.ledger_id), sidecar.to_json())
        except BaseException:
            os.close(fd)
            data_path.unlink(missing_ok=True)
            raise
        return fd

    def remove_ledger(self, ledger_id: int, next_id_to_persist: int | None) -> None:
        if next_id_to_persist is not None:
            self.write_counter(next_id_to_persist)
        self.meta_path(ledger_id).unlink(missing_ok=True)
        self.data_path(ledger_id).unlink(missing_ok=True)
        self.fsync_dir(self.ledgers)

    def recover(self) -> tuple[list[Sidecar], int, int]:
        """Read every sidecar and remove leftovers; the data files are scanned later, one by one, by
        :meth:`recover_ledger` when a ledger is first used (a restart does not read every byte stored).

        Returns the sidecars, the next ledger id and the counter as persisted."""
        highest_id = FIRST_LEDGER_ID - 1
        sidecars: dict[int, Sidecar] = {}
        names = sorted(os.listdir(self.ledgers))  # zero-padded ids: name order is id order
        metas = {n[: -len(_META_SUFFIX)] for n in names if n.endswith(_META_SUFFIX)}
        for name in names:
            highest_id = max(highest_id, _id_of_name(name))
            path = self.ledgers / name
            if name.endswith(_TMP_SUFFIX):
                path.unlink()
            elif name.endswith(_META_SUFFIX):
                sidecar = self._read_sidecar(path)
                if sidecar is not None:
                    sidecars[sidecar.ledger_id] = sidecar
            elif name.endswith(_DATA_SUFFIX) and name[: -len(_DATA_SUFFIX)] not in metas:
                logger.warning("removing %s: a ledger create or delete did not finish", path)
                path.unlink()
        self.fsync_dir(self.ledgers)
        counter = self.read_counter()
        return [sidecar for _, sidecar in sorted(sidecars.items())], max(counter, highest_id + 1), counter

    def _read_sidecar(self, path: Path) -> Sidecar | None:
        try:
            return Sidecar.from_json(path.read_bytes())
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.error("ignoring ledger with an unreadable sidecar %s (files kept)", path)
            return None

    def recover_ledger(self, sidecar: Sidecar) -> RecoveredLedger:
        """Scan one ledger's data file (cutting a torn tail); its file stays open unless it is sealed."""
        sealed_entries = sidecar.sealed_entries if sidecar.sealed else None
        fd = os.open(self.data_path(sidecar.ledger_id), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            result = _scan_file(fd, sealed_entries)
            size = os.fstat(fd).st_size
            if result.end < size:
                logger.warning(
                    "ledger %d: cut a torn tail of %d bytes at offset %d",
                    sidecar.ledger_id, size - result.end, result.end,
                )
                os.ftruncate(fd, result.end)
                self._fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        if result.damaged_entries:
            logger.error("ledger %d: damaged entries %s", sidecar.ledger_id, list(result.damaged_entries))
        if sealed_entries is not None and len(result.offsets) != sealed_entries:
            logger.error(
                "ledger %d: sealed with %d entries, %d found", sidecar.ledger_id, sealed_entries,
                len(result.offsets),
            )
        if sidecar.sealed:  # recovery holds one file at a time, however many ledgers there are
            os.close(fd)
            return RecoveredLedger(sidecar, None, result)
        return RecoveredLedger(sidecar, fd, result)

    def open_data(self, ledger_id: int, *, writable: bool) -> int:
        flags = os.O_RDWR | os.O_APPEND if writable else os.O_RDONLY
        return os.open(self.data_path(ledger_id), flags)


def _id_of_name(name: str) -> int:
    digits = name.split(".", 1)[0]
    return int(digits) if digits.isdigit() else FIRST_LEDGER_ID - 1


def _scan_file(fd: int, sealed_entries: int | None) -> _format.ScanResult:
    if os.fstat(fd).st_size == 0:
        return _format.scan(memoryview(b""), sealed_entries)
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            return _format.scan(view, sealed_entries)
        finally:
            view.release()
