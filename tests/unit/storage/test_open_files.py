"""The embedded store's open files are bounded: sealed ledgers are opened on demand, a few kept."""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

import pytest

from magnetar.core.descriptors import capped_open_files
from magnetar.storage import EmbeddedLedgerStore

LEDGERS = 40
CACHE = 3


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _fill(store: EmbeddedLedgerStore) -> list[int]:
    ids = []
    for i in range(LEDGERS):
        info = await store.create_ledger({"n": str(i)})
        await store.append(info.ledger_id, b"entry-%d" % i)
        await store.seal(info.ledger_id)
        ids.append(info.ledger_id)
    return ids


async def test_sealed_ledgers_hold_no_file_beyond_the_cache(tmp_path: Path) -> None:
    before = _open_files()
    store = await EmbeddedLedgerStore.open(tmp_path, open_files_max=CACHE)
    try:
        ids = await _fill(store)
        assert _open_files() - before <= CACHE + 2  # the lock file and a spare
        for _ in range(2):
            for i, ledger_id in enumerate(ids):
                assert await store.read(ledger_id, 0, 0) == [b"entry-%d" % i]
        assert _open_files() - before <= CACHE + 2
    finally:
        await store.close()
    assert _open_files() == before


async def test_more_ledgers_on_disk_than_the_descriptor_limit_still_open(tmp_path: Path) -> None:
    store = await EmbeddedLedgerStore.open(tmp_path, open_files_max=CACHE)
    ids = await _fill(store)
    await store.close()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (_open_files() + 12, hard))  # fewer than the 40 ledgers
    try:
        reopened = await EmbeddedLedgerStore.open(tmp_path, open_files_max=CACHE)
        try:
            assert [await reopened.read(i, 0, 0) for i in ids] == [[b"entry-%d" % n] for n in range(LEDGERS)]
        finally:
            await reopened.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_idle_open_ledgers_are_closed_and_reopened_for_appends(tmp_path: Path) -> None:
    before = _open_files()
    store = await EmbeddedLedgerStore.open(tmp_path, open_files_max=CACHE)
    try:
        ids = [(await store.create_ledger({})).ledger_id for _ in range(LEDGERS)]
        for round_ in range(2):
            for ledger_id in ids:
                assert await store.append(ledger_id, b"r%d" % round_) == round_
        assert _open_files() - before <= CACHE + 2
        assert [await store.read(i, 0, 1) for i in ids] == [[b"r0", b"r1"]] * LEDGERS
    finally:
        await store.close()
    reopened = await EmbeddedLedgerStore.open(tmp_path, open_files_max=CACHE)
    try:
        assert [await reopened.read(i, 0, 1) for i in ids] == [[b"r0", b"r1"]] * LEDGERS
    finally:
        await reopened.close()


def test_open_file_limit_is_capped_below_the_descriptor_limit(caplog: pytest.LogCaptureFixture) -> None:
    assert capped_open_files(1024, soft_limit=1 << 20) == 1024  # room enough: as configured
    with caplog.at_level(logging.WARNING, logger="magnetar.descriptors"):
        assert capped_open_files(1024, soft_limit=256) == 192  # a quarter kept for sockets and the rest
    assert "openFileLimit=1024 lowered to 192" in caplog.text
    assert capped_open_files(1024, soft_limit=64) == 16  # never below the minimum
