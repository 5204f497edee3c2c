"""The lock on a broker's data directory when its ledgers are not in it.

The embedded ledger store locks its directory itself (``storage/_files.py``). A broker whose ledgers live in an
object store (``ledgerStoreUrl=s3://...``) still keeps things in its data directory (the SQLite metadata of a
standalone, the offload and transaction state a broker writes locally), so a second process started on the same
directory by mistake must be refused there too: this module takes the same ``flock`` on ``<data dir>/LOCK``,
held from start until the broker closes (a SIGKILL releases it with the process).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "LOCK"


class DataDirInUse(Exception):
    """Another process holds the directory's lock."""


class DataDirLock:
    """``LOCKED`` between :meth:`acquire` and :meth:`release`; ``release`` is idempotent."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise DataDirInUse(f"{self.directory} is in use by another magnetar process") from exc
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
