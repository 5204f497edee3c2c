"""Durability faults over the embedded stores, each with what the user sees: a torn tail, a corrupted
record in the middle of a ledger, a storage error (disk full), and the retention trim with TTL."""

from __future__ import annotations

import errno
import json
import logging
import os
import random
from pathlib import Path

import pytest

from magnetar import protocol as proto
from magnetar.app.broker import build_broker, start_broker, stop_broker
from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import TopicName
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import (
    EntryCorruptedError,
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerError,
    Position,
    RetentionPolicy,
)
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.embedded import EmbeddedLedgerStore
from magnetar.storage.faulty import FaultPlan, FaultyLedgerStore
from magnetar.storage.memory import MemoryLedgerStore

NAME = "public/default/persistent/durable"


async def _open(tmp_path: Path, **store_args: object) -> tuple[EmbeddedLedgerStore, SqliteMetadataStore, LedgerFactory]:
    store = await EmbeddedLedgerStore.open(tmp_path / "ledgers", **store_args)  # type: ignore[arg-type]
    metadata = SqliteMetadataStore(tmp_path / "metadata.db")
    return store, metadata, LedgerFactory(store, metadata)


def _ledger_file(tmp_path: Path, ledger_id: int) -> Path:
    return tmp_path / "ledgers" / "ledgers" / f"{ledger_id:020d}.log"


async def test_torn_tail_is_cut_and_every_receipted_entry_survives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, metadata, factory = await _open(tmp_path)
    ledger = await factory.open(NAME)
    receipted = [await ledger.add_entry(f"m{i}".encode()) for i in range(5)]
    ledger_id = receipted[-1].ledger_id
    with _ledger_file(tmp_path, ledger_id).open("ab") as f:  # a write the crash cut in the middle
        f.write(b"\x40\x00\x00\x00\x01\x02\x03")
    store._layout.unlock()  # the process "died" without closing anything
    await metadata.close()

    with caplog.at_level(logging.WARNING, logger="magnetar.storage"):
        store, metadata, factory = await _open(tmp_path)
        ledger = await factory.open(NAME)  # the ledger's file is scanned when the topic first uses it
    assert "cut a torn tail of 7 bytes" in caplog.text  # what the operator sees
    cursor = ledger.new_non_durable_cursor(ledger.first_position(), "check")
    entries = await cursor.read_entries(100)
    assert [(e.position, e.data) for e in entries] == [(p, f"m{i}".encode()) for i, p in enumerate(receipted)]
    assert ledger.corrupted_entries == 0
    await factory.close()
    await store.close()
    await metadata.close()


async def test_corrupted_record_is_reported_never_served_and_other_topics_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, metadata, factory = await _open(tmp_path)
    damaged, healthy = await factory.open(NAME), await factory.open(NAME + "-other")
    positions = [await damaged.add_entry(f"entry-{i:03d}".encode()) for i in range(5)]
    await factory.close()
    await store.close()
    path = _ledger_file(tmp_path, positions[2].ledger_id)
    data = bytearray(path.read_bytes())
    record_bytes = len(data) // 5
    data[2 * record_bytes + 14] ^= 0xFF  # one flipped bit pattern in the data of entry 2
    path.write_bytes(bytes(data))

    store = await EmbeddedLedgerStore.open(tmp_path / "ledgers")
    factory = LedgerFactory(store, metadata)
    damaged, healthy = await factory.open(NAME), await factory.open(NAME + "-other")
    cursor = await damaged.open_cursor("sub", InitialPosition.EARLIEST)
    with caplog.at_level(logging.ERROR, logger="magnetar.ledger"):
        first = await cursor.read_entries(10)  # the good entries before the damage are served
        with pytest.raises(EntryCorruptedError) as raised:
            await cursor.read_entries(10)  # the reader is told, with the position
    assert [e.data for e in first] == [b"entry-000", b"entry-001"]
    assert raised.value.position == positions[2]
    assert f"entry {positions[2]} is corrupted" in caplog.text
    assert damaged.corrupted_entries == 1
    cursor.acknowledge([positions[2]])  # skipping it is the caller's decision (autoSkipNonRecoverableData)
    rest = await cursor.read_entries(10)
    assert [e.data for e in rest] == [b"entry-003", b"entry-004"]
    assert (await healthy.add_entry(b"still fine")).entry_id == 0  # other topics keep working
    await factory.close()
    await store.close()
    await metadata.close()


async def test_disk_full_fails_the_send_keeps_acknowledged_data_and_resumes(tmp_path: Path) -> None:
    full = {"now": False}

    def write(fd: int, data: memoryview) -> int:
        if full["now"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)

    store, metadata, factory = await _open(tmp_path, write=write)
    ledger = await factory.open(NAME)
    before = [await ledger.add_entry(f"ok-{i}".encode()) for i in range(3)]
    full["now"] = True
    with pytest.raises(ManagedLedgerError, match="No space left on device"):  # the broker: PersistenceError
        await ledger.add_entry(b"lost-send")
    full["now"] = False  # space returns; the owner (the topic) resumes once its failed adds settled
    assert ledger.writes_paused and ledger.resume_writes()
    retried = await ledger.add_entry(b"lost-send")
    assert retried > before[-1]
    cursor = ledger.new_non_durable_cursor(ledger.first_position(), "check")
    assert [e.data for e in await cursor.read_entries(10)] == [b"ok-0", b"ok-1", b"ok-2", b"lost-send"]
    await factory.close()
    await store.close()
    await metadata.close()


async def test_injected_storage_faults_fail_adds_and_nothing_failed_is_stored(tmp_path: Path) -> None:
    inner = await EmbeddedLedgerStore.open(tmp_path / "ledgers")
    plan = FaultPlan(random.Random(4), fail_probability=0.3, ops=frozenset({"append"}))
    metadata = SqliteMetadataStore(tmp_path / "metadata.db")
    factory = LedgerFactory(FaultyLedgerStore(inner, plan), metadata)
    ledger = await factory.open(NAME)
    stored, failed = [], []
    for i in range(60):
        try:
            await ledger.add_entry(f"{i}".encode())
            stored.append(f"{i}".encode())
        except ManagedLedgerError:
            failed.append(i)
            assert ledger.resume_writes()  # as the topic does once nothing is in flight
    assert failed and plan.injected == len(failed)
    cursor = ledger.new_non_durable_cursor(ledger.first_position(), "check")
    assert [e.data for e in await cursor.read_entries(100)] == stored
    await factory.close()
    await inner.close()
    await metadata.close()


def _entry(publish_time_ms: int, sequence_id: int) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=publish_time_ms)
    return proto.make_entry(meta, b"x" * 100)


async def test_retention_trims_consumed_ledgers_and_ttl_expires_old_backlog() -> None:
    clock = ManualClock()
    metadata = MemoryMetadataStore(clock=clock)
    store = MemoryLedgerStore(clock=clock)
    ml_config = ManagedLedgerConfig(max_entries_per_ledger=2)
    factory = LedgerFactory(store, metadata, config=ml_config, clock=clock)
    config = BrokerConfig(managed_ledger=ml_config, broker_deduplication_enabled=False,
                          retention_check_interval_seconds=0)
    broker = build_broker(config, metadata, factory, clock)
    await start_broker(broker)
    topic_name = TopicName.parse("persistent://public/default/retained")
    topic = await broker.registry.get(topic_name, create=True)
    fast = await topic.ledger.open_cursor("fast", InitialPosition.EARLIEST)
    slow = await topic.ledger.open_cursor("slow", InitialPosition.EARLIEST)
    positions = []
    for i in range(6):
        positions.append(await topic.ledger.add_entry(_entry(clock.now_ms(), i)))
        clock.advance(60_000)
    fast.acknowledge_cumulative(positions[-1])
    ledgers_before = len(topic.ledger.ledgers())

    await broker.retention.run_once()  # "slow" has read nothing: nothing may go
    assert len(topic.ledger.ledgers()) == ledgers_before

    policies = {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
                "message_ttl_in_seconds": 150}
    await metadata.put("/admin/policies/public/default", json.dumps(policies).encode())
    results = await broker.retention.run_once()  # TTL expires "slow" up to 150 s ago, then the trim runs
    assert slow.mark_delete_position == positions[3]  # published 180 s ago or earlier
    assert sum(len(r.trimmed) for r in results) == 2
    assert topic.ledger.first_position() == Position(positions[4].ledger_id, -1)
    assert topic.ledger.ledgers()[0].ledger_id == positions[4].ledger_id
    assert sorted(await store.list_ledgers())[0] == positions[4].ledger_id  # deleted from storage too
    reader = topic.ledger.new_non_durable_cursor(Position(0, 0), "after-trim")
    assert [e.position for e in await reader.read_entries(10)] == positions[4:]
    keep = await topic.ledger.trim(RetentionPolicy(time_ms=-1, size_bytes=-1))  # infinite retention
    assert keep.trimmed == ()
    await stop_broker(broker)
    await factory.close()
