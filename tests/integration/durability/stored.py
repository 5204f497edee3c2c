"""What the durability tests share: seed a topic, read back what a broker stored, and check it against the
receipts (every receipted value stored exactly once, each sender's values in send order), and read a durable
cursor's record from the broker's metadata store while the broker runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import pulsar
from kazoo.client import KazooClient

from magnetar.ledger.api import Position
from magnetar.ledger.formats import CursorRecord, cursor_key, decode_cursor
from magnetar.metadata.settings import EMBEDDED_FILE
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

RECEIVE_MS = 10_000
METADATA_URL = "metadataStoreUrl="


def seed_topic(broker: BrokerProcess, topic: str, count: int, prefix: str) -> None:
    """Subscription ``sub`` from the earliest position, then ``count`` messages ``<prefix>0``.. sent one by one."""
    client = make_client(broker.url)
    try:
        client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            producer.send(f"{prefix}{i}".encode())
    finally:
        client.close()


def read_all(broker: BrokerProcess, topic: str) -> list[str]:
    """Every value stored on ``topic``, from the earliest, with any '.' padding removed."""
    client = make_client(broker.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        values = []
        while reader.has_message_available():  # bounded by what is stored
            values.append(reader.read_next(timeout_millis=RECEIVE_MS).data().rstrip(b".").decode())
        return values
    finally:
        client.close()


def assert_stored_once_in_order(stored: list[str], receipted: Iterable[str]) -> None:
    """Values are ``<one-letter prefix><number>``: none stored twice, each prefix in order, none receipted lost."""
    assert len(stored) == len(set(stored)), "an entry is stored twice"
    for prefix in {v[0] for v in stored}:
        numbers = [int(v[1:]) for v in stored if v[0] == prefix]
        assert numbers == sorted(numbers), f"{prefix}: stored out of send order"
    missing = set(receipted) - set(stored)
    assert not missing, f"receipted but lost: {sorted(missing)[:10]}"


class StoredCursor:
    """Reads one durable cursor's record the way a restarted broker will: straight from the broker's metadata
    store (its SQLite file, read-only, or its ZooKeeper chroot), while the broker runs. What it returns is a
    lower bound of what the store holds at any later moment: cursor records only move forward."""

    def __init__(self, broker: BrokerProcess, managed_ledger: str, cursor: str) -> None:
        self._key = cursor_key(managed_ledger, cursor)
        url = next((a.removeprefix(METADATA_URL) for a in broker.extra_args if a.startswith(METADATA_URL)), "")
        self._zk: KazooClient | None = None
        self._db: sqlite3.Connection | None = None
        if url.startswith("zk:"):
            self._zk = KazooClient(hosts=url.removeprefix("zk:"))
            self._zk.start(timeout=30)
        else:
            assert url in ("", "sqlite:"), f"metadata store {url!r}: not read here"
            path = broker.data_dir / EMBEDDED_FILE
            self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)

    def read(self) -> CursorRecord | None:
        """The stored record now (None while the cursor has none)."""
        data: bytes | None
        if self._zk is not None:
            data = self._zk.get(self._key)[0] if self._zk.exists(self._key) else None
        else:
            assert self._db is not None
            row = self._db.execute("SELECT value FROM records WHERE key = ?", (self._key,)).fetchone()
            data = None if row is None else bytes(row[0])
        return None if data is None else decode_cursor(data, self._key)

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        if self._db is not None:
            self._db.close()


def covers(record: CursorRecord | None, position: Position) -> bool:
    """Whether ``record`` holds ``position`` as acknowledged (at or below its mark-delete, or in a range)."""
    if record is None:
        return False
    return position <= record.mark_delete or any(first <= position <= last for first, last in record.ranges)
