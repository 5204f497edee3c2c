"""The ``filesystem`` offload driver: blobs are files in a directory (``fileSystemURI``).

A writer fills ``<key>.partial`` and commits by fsync + rename, so a key is either absent or whole; a crash
leaves at most a ``.partial`` file, which no read ever opens (the offload that wrote it is retried under a
fresh uuid and its leftovers are deleted by context). Keys may hold ``/``: they become sub-directories.
File I/O runs in the default executor so the event loop never blocks on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import urlparse

from magnetar.storage.offload.api import OffloadBucketMissing, OffloadError, OffloadNotFound

T = TypeVar("T")
PARTIAL = ".partial"
#: Keys returned by one list call, at most.
LIST_KEYS_MAX = 100_000


def directory_of(uri: str) -> Path:
    """``fileSystemURI`` as a directory: a plain path or a ``file://`` URI."""
    if uri.startswith("file:"):
        return Path(urlparse(uri).path)
    if "://" in uri:
        raise OffloadError(f"fileSystemURI {uri!r}: only local paths and file:// URIs are supported")
    return Path(uri)


async def _io(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


class FilesystemWriter:
    def __init__(self, final: Path) -> None:
        self._final = final
        self._partial = final.with_name(final.name + PARTIAL)
        self._file: BinaryIO | None = None

    async def open(self) -> None:
        def run() -> BinaryIO:
            self._final.parent.mkdir(parents=True, exist_ok=True)
            return open(self._partial, "wb")  # closed by commit or abort

        self._file = await _io(run)

    async def write(self, data: bytes) -> None:
        assert self._file is not None, "writer not open"
        file = self._file
        await _io(lambda: file.write(data))

    async def commit(self) -> None:
        assert self._file is not None, "writer not open"
        file, self._file = self._file, None

        def run() -> None:
            file.flush()
            os.fsync(file.fileno())
            file.close()
            os.replace(self._partial, self._final)
            fd = os.open(self._final.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        await _io(run)

    async def abort(self) -> None:
        file, self._file = self._file, None

        def run() -> None:
            if file is not None:
                file.close()
            with contextlib.suppress(FileNotFoundError):
                self._partial.unlink()

        await _io(run)


class FilesystemBlobStore:
    """Implements :class:`magnetar.storage.offload.api.BlobStore` over a local directory."""

    def __init__(self, directory: Path) -> None:
        self._root = directory

    @property
    def driver(self) -> str:
        return "filesystem"

    @property
    def bucket(self) -> str:
        return str(self._root)

    def _path(self, key: str) -> Path:
        parts = [p for p in key.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise OffloadError(f"bad offload key {key!r}")
        return self._root.joinpath(*parts)

    async def check(self) -> None:
        if not await _io(self._root.is_dir):
            raise OffloadBucketMissing(f"filesystem offload: directory {self._root} does not exist")

    async def writer(self, key: str) -> FilesystemWriter:
        await self.check()
        writer = FilesystemWriter(self._path(key))
        try:
            await writer.open()
        except OSError as exc:
            raise OffloadError(f"filesystem offload: cannot write {key}: {exc}") from exc
        return writer

    async def read(self, key: str, offset: int, length: int) -> bytes:
        path = self._path(key)

        def run() -> bytes:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(length)

        try:
            return await _io(run)
        except FileNotFoundError as exc:
            raise OffloadNotFound(f"filesystem offload: {key} not found in {self._root}") from exc
        except OSError as exc:
            raise OffloadError(f"filesystem offload: reading {key}: {exc}") from exc

    async def size(self, key: str) -> int:
        path = self._path(key)
        try:
            return (await _io(path.stat)).st_size
        except FileNotFoundError as exc:
            raise OffloadNotFound(f"filesystem offload: {key} not found in {self._root}") from exc
        except OSError as exc:
            raise OffloadError(f"filesystem offload: {key}: {exc}") from exc

    async def delete(self, keys: Sequence[str]) -> None:
        paths = [self._path(k) for k in keys]

        def run() -> None:
            for path in paths:
                for victim in (path, path.with_name(path.name + PARTIAL)):
                    with contextlib.suppress(FileNotFoundError):
                        victim.unlink()

        try:
            await _io(run)
        except OSError as exc:
            raise OffloadError(f"filesystem offload: deleting: {exc}") from exc

    async def list(self, prefix: str) -> list[str]:
        def run() -> list[str]:
            found: list[str] = []
            for path in sorted(self._root.rglob("*")):
                if len(found) >= LIST_KEYS_MAX:
                    break
                key = path.relative_to(self._root).as_posix()
                if path.is_file() and key.startswith(prefix):
                    found.append(key)
            return found

        return await _io(run)

    async def close(self) -> None:
        return None
