"""Direct tests of the embedded ledger store: recovery, checksums, group commit, disk errors."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
from pathlib import Path

import pytest

from magnetar.storage import (
    EmbeddedLedgerStore,
    EntryCorrupted,
    LedgerNotFound,
    LedgerSealed,
    StorageError,
    StorageIOError,
)
from magnetar.storage._format import HEADER_BYTES, encode


class CountingFsync:
    """An fsync hook that counts calls and can be told to fail."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail_with: int | None = None
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        with self._lock:
            self.calls += 1
        if self.fail_with is not None:
            raise OSError(self.fail_with, os.strerror(self.fail_with))
        os.fsync(fd)


class FailingWrite:
    """A write hook that fails with ``error`` once armed, optionally after writing ``partial`` bytes."""

    def __init__(self) -> None:
        self.error: int | None = None
        self.partial = 0

    def __call__(self, fd: int, data: memoryview) -> int:
        if self.error is None:
            return os.write(fd, data)
        if self.partial:
            written = os.write(fd, data[: self.partial])
            self.partial = 0
            return written
        raise OSError(self.error, os.strerror(self.error))


async def _filled(directory: Path, payloads: list[bytes]) -> int:
    store = await EmbeddedLedgerStore.open(directory)
    ledger_id = (await store.create_ledger({"component": "test"})).ledger_id
    for payload in payloads:
        await store.append(ledger_id, payload)
    await store.close()
    return ledger_id


def _data_file(directory: Path, ledger_id: int) -> Path:
    return directory / "ledgers" / f"{ledger_id:020d}.log"


def _flip_byte(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


async def test_entries_metadata_and_seal_survive_reopen(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path)
    ledger_id = (await store.create_ledger({"application": "magnetar"})).ledger_id
    assert [await store.append(ledger_id, p) for p in (b"a", b"", b"ccc")] == [0, 1, 2]
    sealed = await store.seal(ledger_id)
    await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path)
    assert await reopened.info(ledger_id) == sealed
    assert sealed.size_bytes == 4 and sealed.custom_metadata == {"application": "magnetar"}
    assert await reopened.read(ledger_id, 0, 2) == [b"a", b"", b"ccc"]
    with pytest.raises(LedgerSealed):
        await reopened.append(ledger_id, b"d")
    await reopened.close()


@pytest.mark.parametrize("tail", [encode(b"torn entry")[:5], encode(b"torn entry")[:-3]])
async def test_torn_tail_is_cut_on_reopen(tmp_path: Path, tail: bytes, caplog: pytest.LogCaptureFixture) -> None:
    """At the ledger's first use after open: open itself reads sidecars only (a restart stays fast)."""
    ledger_id = await _filled(tmp_path, [b"one", b"two"])
    path = _data_file(tmp_path, ledger_id)
    good_size = path.stat().st_size
    with path.open("ab") as f:
        f.write(tail)
    with caplog.at_level(logging.WARNING, logger="magnetar.storage"):
        store = await EmbeddedLedgerStore.open(tmp_path)
        assert path.stat().st_size == good_size + len(tail) and "torn tail" not in caplog.text
        assert await store.list_ledgers() == [ledger_id]
        assert (await store.info(ledger_id)).entries == 2
    assert "torn tail" in caplog.text
    assert path.stat().st_size == good_size
    assert await store.append(ledger_id, b"three") == 2
    assert await store.read(ledger_id, 0, 2) == [b"one", b"two", b"three"]
    await store.close()


async def test_last_record_failing_its_checksum_is_a_torn_tail(tmp_path: Path) -> None:
    ledger_id = await _filled(tmp_path, [b"one", b"two"])
    path = _data_file(tmp_path, ledger_id)
    _flip_byte(path, path.stat().st_size - 1)
    store = await EmbeddedLedgerStore.open(tmp_path)
    assert (await store.info(ledger_id)).entries == 1
    await store.close()


@pytest.mark.parametrize("where", ["data", "header"])
async def test_corrupted_middle_record_is_kept_and_reported(tmp_path: Path, where: str) -> None:
    payloads = [b"first", b"second", b"third"]
    ledger_id = await _filled(tmp_path, payloads)
    middle = HEADER_BYTES + len(payloads[0])
    _flip_byte(_data_file(tmp_path, ledger_id), middle + (HEADER_BYTES + 2 if where == "data" else 1))
    store = await EmbeddedLedgerStore.open(tmp_path)
    assert (await store.info(ledger_id)).entries == 3
    assert await store.read(ledger_id, 0, 0) == [b"first"]
    assert await store.read(ledger_id, 2, 2) == [b"third"]
    for first, last in [(1, 1), (0, 2)]:
        with pytest.raises(EntryCorrupted) as caught:
            await store.read(ledger_id, first, last)
        assert (caught.value.ledger_id, caught.value.entry_id) == (ledger_id, 1)
    await store.close()


async def test_group_commit_shares_fsyncs(tmp_path: Path) -> None:
    fsync = CountingFsync()
    store = await EmbeddedLedgerStore.open(tmp_path, fsync=fsync)
    ledger_id = (await store.create_ledger({})).ledger_id
    before = fsync.calls
    ids = await asyncio.gather(*(store.append(ledger_id, b"%d" % i) for i in range(300)))
    assert ids == list(range(300))
    assert fsync.calls - before <= 10
    assert await store.read(ledger_id, 0, 299) == [b"%d" % i for i in range(300)]
    await store.close()


async def test_no_fsync_when_journal_sync_data_is_off(tmp_path: Path) -> None:
    fsync = CountingFsync()
    store = await EmbeddedLedgerStore.open(tmp_path, fsync=fsync, journal_sync_data=False)
    ledger_id = (await store.create_ledger({})).ledger_id
    before = fsync.calls
    await asyncio.gather(*(store.append(ledger_id, b"x") for _ in range(50)))
    assert fsync.calls == before
    assert (await store.info(ledger_id)).entries == 50
    await store.close()


async def test_back_pressure_keeps_order(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path, pending_appends_max=2)
    ledger_id = (await store.create_ledger({})).ledger_id
    ids = await asyncio.gather(*(store.append(ledger_id, bytes([i])) for i in range(40)))
    assert ids == list(range(40))
    assert await store.read(ledger_id, 0, 39) == [bytes([i]) for i in range(40)]
    await store.close()


async def test_appends_queued_for_room_keep_call_order_and_a_cancelled_one_is_never_written(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path, pending_appends_max=2)
    ledger_id = (await store.create_ledger({})).ledger_id
    futures = [store.start_append(ledger_id, bytes([i])) for i in range(6)]  # two take their place, four queue
    futures[3].cancel()  # a queued append cancelled before it had room is never written
    done = await asyncio.gather(*futures, return_exceptions=True)
    assert done[:3] + done[4:] == [0, 1, 2, 3, 4]
    assert await store.read(ledger_id, 0, 4) == [bytes([i]) for i in (0, 1, 2, 4, 5)]
    await store.close()


async def test_a_round_writes_each_file_once(tmp_path: Path) -> None:
    writes: list[int] = []

    def counting_write(fd: int, data: memoryview) -> int:
        writes.append(len(data))
        return os.write(fd, data)

    fsync = CountingFsync()
    store = await EmbeddedLedgerStore.open(tmp_path, fsync=fsync, write=counting_write)
    ledger_id = (await store.create_ledger({})).ledger_id
    before = fsync.calls
    assert await asyncio.gather(*(store.append(ledger_id, b"%03d" % i) for i in range(100))) == list(range(100))
    assert len(writes) == fsync.calls - before <= 10  # one write per file per round, not one per append
    assert sum(writes) == 100 * (HEADER_BYTES + 3)
    await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path)
    assert await reopened.read(ledger_id, 0, 99) == [b"%03d" % i for i in range(100)]
    await reopened.close()


async def test_a_lone_append_waits_for_one_fsync(tmp_path: Path) -> None:
    fsync = CountingFsync()
    store = await EmbeddedLedgerStore.open(tmp_path, fsync=fsync)
    ledger_id = (await store.create_ledger({})).ledger_id
    for i in range(3):
        before = fsync.calls
        assert await store.append(ledger_id, b"x") == i
        assert fsync.calls - before == 1
    await store.close()


async def test_appends_queued_for_room_fail_when_the_store_closes(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path, pending_appends_max=1)
    ledger_id = (await store.create_ledger({})).ledger_id
    first, queued = store.start_append(ledger_id, b"a"), store.start_append(ledger_id, b"b")
    await store.close()
    assert await first == 0
    with pytest.raises(StorageError):
        await queued


async def test_a_crashing_fsync_fails_the_appends_instead_of_hanging_them(tmp_path: Path) -> None:
    armed = False

    def broken(fd: int) -> None:
        if armed:
            raise ValueError("bug in the sync hook")
        os.fsync(fd)

    store = await EmbeddedLedgerStore.open(tmp_path, fsync=broken)
    ledger_id = (await store.create_ledger({})).ledger_id
    armed = True
    with pytest.raises(StorageIOError):
        await asyncio.wait_for(store.append(ledger_id, b"x"), timeout=30)
    await store.close()


@pytest.mark.parametrize("partial", [0, 7])
async def test_enospc_on_write_fails_that_append_and_the_ledger_takes_no_more(tmp_path: Path, partial: int) -> None:
    write = FailingWrite()
    store = await EmbeddedLedgerStore.open(tmp_path, write=write)
    ledger_id = (await store.create_ledger({})).ledger_id
    await store.append(ledger_id, b"before")
    size = _data_file(tmp_path, ledger_id).stat().st_size
    write.error, write.partial = errno.ENOSPC, partial
    with pytest.raises(StorageIOError):
        await store.append(ledger_id, b"lost entry")
    assert _data_file(tmp_path, ledger_id).stat().st_size == size
    write.error = None
    with pytest.raises(StorageIOError):  # nothing may land after the failed entry
        await store.append(ledger_id, b"after")
    assert (await store.seal(ledger_id)).entries == 1
    other = (await store.create_ledger({})).ledger_id  # the store itself keeps working
    assert await store.append(other, b"after") == 0
    await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path)
    assert await reopened.read(ledger_id, 0, 0) == [b"before"]
    assert await reopened.read(other, 0, 0) == [b"after"]
    await reopened.close()


async def test_failed_fsync_cuts_back_and_the_store_keeps_working(tmp_path: Path) -> None:
    fsync = CountingFsync()
    store = await EmbeddedLedgerStore.open(tmp_path, fsync=fsync)
    ledger_id = (await store.create_ledger({})).ledger_id
    await store.append(ledger_id, b"durable")
    fsync.fail_with = errno.EIO
    results = await asyncio.gather(*(store.append(ledger_id, b"x") for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, StorageIOError) for r in results)
    fsync.fail_with = None
    assert (await store.info(ledger_id)).entries == 1
    with pytest.raises(StorageIOError):  # nothing may land after the lost entries
        await store.append(ledger_id, b"next")
    other = (await store.create_ledger({})).ledger_id
    assert await store.append(other, b"next") == 0
    await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path)
    assert await reopened.read(ledger_id, 0, 0) == [b"durable"]
    assert (await reopened.info(ledger_id)).entries == 1
    assert await reopened.read(other, 0, 0) == [b"next"]
    await reopened.close()


async def test_ids_are_not_reused_after_delete_and_reopen(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path)
    first = (await store.create_ledger({})).ledger_id
    second = (await store.create_ledger({})).ledger_id
    await store.delete(second)
    assert not _data_file(tmp_path, second).exists()
    with pytest.raises(LedgerNotFound):
        await store.read(second, 0, 0)
    await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path)
    assert await reopened.list_ledgers() == [first]
    assert (await reopened.create_ledger({})).ledger_id == second + 1
    await reopened.close()


async def test_one_store_per_directory(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path)
    with pytest.raises(StorageError):
        await EmbeddedLedgerStore.open(tmp_path)
    await store.close()


async def test_orphan_data_file_is_removed(tmp_path: Path) -> None:
    await _filled(tmp_path, [])
    orphan = _data_file(tmp_path, 7)
    orphan.write_bytes(encode(b"half-created"))
    store = await EmbeddedLedgerStore.open(tmp_path)
    assert not orphan.exists()
    assert (await store.create_ledger({})).ledger_id == 8
    await store.close()


