"""SIGKILL the real ``magnetar standalone`` while the official client publishes and acks at full speed.

Over several kill points, with default settings, with a configuration that makes ledger rollovers, retention
trims and cursor writes constant (so kills land among them), and with the metadata in ZooKeeper (where a
cursor is written at most once a second): every message the client got a receipt for is stored exactly once
after the restarts (or was consumed, acked and trimmed), and no consumer-side ack is lost.

The ack check does not lean on the clock (a loaded machine stretches any window measured from the client):
before each kill the test waits, bounded, until the cursor record in the broker's metadata store (what a
restart reads) holds every ack the client had made by then, and kills right after, with sends and acks still
in full flight. A broker that drops acks, or never persists them, fails that wait; every message the store held
as acked before a kill must never be delivered again. Acks newer than the stored record may come back: that
is the persistence window, whose length (``managedLedgerCursorPersistIntervalMs``, 1 s on ZooKeeper) the
cursor's component tests check on an injected clock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pulsar
import pytest

from magnetar.ledger.api import Position
from magnetar.ledger.formats import CursorRecord
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client, metadata_args
from tests.integration.durability.stored import StoredCursor, covers

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/sigkill"
MANAGED_LEDGER = "public/default/persistent/sigkill"  # the topic's managed ledger (TopicName.managed_ledger_name)
SUBSCRIPTION = "durable-sub"
KILL_AFTER_RECEIPTS = (300, 1500, 800)  # the kill points: receipts seen in the round before SIGKILL
RECEIPTS_TIMEOUT_S = 60.0
PERSISTED_TIMEOUT_S = 60.0  # bounds the wait for the store to hold the acks made so far (a broken broker's)
STORE_RECHECK_S = 0.05
RECEIVE_TIMEOUT_MS = 300


@dataclass
class Round:
    """What one client session saw before its broker was killed."""

    persisted_before: frozenset[str]  # values whose ack the store held before an earlier kill
    receipted: set[str] = field(default_factory=set)
    acked: dict[str, Position] = field(default_factory=dict)  # value -> its entry, once acknowledge() returned
    delivered: dict[str, Position] = field(default_factory=dict)
    lost_acks: list[str] = field(default_factory=list)  # delivered although acked and stored before a kill
    stop: threading.Event = field(default_factory=threading.Event)
    progress: threading.Condition = field(default_factory=threading.Condition)


#: The second configuration aims the kills at the busy moments: a ledger rollover every 40 entries, consumed
#: ledgers trimmed every second (retention 0) and cursor positions persisted every 10 ms.
CHURN = ("--set", "managedLedgerMaxEntriesPerLedger=40", "--set", "managedLedgerMinLedgerRolloverTimeMinutes=0",
         "--set", "retentionCheckIntervalInSeconds=1", "--set", "managedLedgerCursorPersistIntervalMs=10")
ZOOKEEPER = ("zookeeper",)  # the defaults, with the metadata in ZooKeeper (tests/integration/conftest.py)


@pytest.fixture(params=[(), CHURN, ZOOKEEPER], ids=["defaults", "rollover-trim-cursor-churn", "zookeeper"])
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    args = metadata_args("zookeeper", request) if request.param == ZOOKEEPER else request.param
    proc = BrokerProcess(tmp_path / "data", extra_args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


def _publish(producer: pulsar.Producer, prefix: str, state: Round) -> None:
    def receipted(value: str) -> object:
        def callback(result: pulsar.Result, _msg_id: object) -> None:
            if result == pulsar.Result.Ok:
                with state.progress:
                    state.receipted.add(value)
                    state.progress.notify_all()

        return callback

    i = 0
    while not state.stop.is_set():  # bounded by the stop event, set right after the kill
        value = f"{prefix}-{i}"
        try:
            producer.send_async(value.encode(), receipted(value))
        except Exception:  # the broker is gone: this send was never receipted
            return
        i += 1


def _consume(consumer: pulsar.Consumer, state: Round) -> None:
    while not state.stop.is_set():  # bounded by the stop event
        try:
            msg = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
        except Exception:
            continue
        value = msg.data().decode()
        msg_id = msg.message_id()
        position = Position(msg_id.ledger_id(), msg_id.entry_id())
        with state.progress:
            state.delivered[value] = position
            if value in state.persisted_before:
                state.lost_acks.append(value)
        try:
            consumer.acknowledge(msg)
        except Exception:
            continue
        with state.progress:
            state.acked[value] = position


def _wait_until_stored(broker: BrokerProcess, cursor: StoredCursor, acked: dict[str, Position],
                       index: int) -> CursorRecord | None:
    """The stored cursor record, once it holds every position in ``acked`` (bounded)."""
    latest: list[CursorRecord | None] = [None]

    def stored() -> bool:
        latest[0] = cursor.read()
        return all(covers(latest[0], p) for p in acked.values())

    held = broker.wait_until(stored, PERSISTED_TIMEOUT_S, recheck_s=STORE_RECHECK_S)
    missing = sorted(v for v, p in acked.items() if not covers(latest[0], p))
    assert held, f"round {index}: {len(missing)} acks never reached the store, e.g. {missing[:5]}; {latest[0]}"
    return latest[0]


def _round(
    broker: BrokerProcess, index: int, kill_after: int, persisted: frozenset[str]
) -> tuple[Round, CursorRecord | None]:
    """One session up to its SIGKILL: what it saw, and the cursor record the store held just before the kill."""
    client = make_client(broker.url)
    cursor = StoredCursor(broker, MANAGED_LEDGER, SUBSCRIPTION)
    state = Round(persisted)
    consumer = client.subscribe(TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True,
                                      max_pending_messages=500, send_timeout_millis=0)
    threads = [
        threading.Thread(target=_publish, args=(producer, f"r{index}", state), daemon=True),
        threading.Thread(target=_consume, args=(consumer, state), daemon=True),
    ]
    try:
        for t in threads:
            t.start()
        with state.progress:
            reached = state.progress.wait_for(lambda: len(state.receipted) >= kill_after, RECEIPTS_TIMEOUT_S)
            assert reached, f"round {index}: only {len(state.receipted)} receipts"
            acked = dict(state.acked)
        record = _wait_until_stored(broker, cursor, acked, index)
        broker.kill()  # SIGKILL while sends and acks are in full flight
    finally:
        state.stop.set()
        cursor.close()
        # its broker is dead: closing may find a producer's connection gone mid-close (NotConnected)
        with contextlib.suppress(pulsar.PulsarException):
            client.close()
        for t in threads:
            t.join(timeout=30)
    return state, record


def _read_all(broker: BrokerProcess) -> list[str]:
    client = make_client(broker.url)
    try:
        reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
        values = []
        while reader.has_message_available():  # bounded by what is stored
            values.append(reader.read_next(timeout_millis=10_000).data().decode())
        return values
    finally:
        client.close()


def test_sigkill_loses_no_receipted_message_and_no_stored_ack(broker: BrokerProcess) -> None:
    receipted: set[str] = set()
    acked: set[str] = set()
    positions: dict[str, Position] = {}  # every value delivered so far -> its entry
    persisted: frozenset[str] = frozenset()
    lost_acks: list[str] = []
    for index, kill_after in enumerate(KILL_AFTER_RECEIPTS):
        state, record = _round(broker, index, kill_after, persisted)
        broker.start()  # same ports, same data: recovery
        assert broker.wait_for_log("recovery done", 30)
        lost_acks += state.lost_acks
        receipted |= state.receipted
        acked |= set(state.acked)
        positions.update(state.delivered)
        persisted = frozenset(v for v, p in positions.items() if covers(record, p))
    stored_values = _read_all(broker)
    assert len(stored_values) == len(set(stored_values)), "an entry is stored twice"
    for index in range(len(KILL_AFTER_RECEIPTS)):
        sequence = [int(v.split("-")[1]) for v in stored_values if v.startswith(f"r{index}-")]
        assert sequence == sorted(sequence), f"round {index}: messages stored out of send order"
    missing = receipted - set(stored_values)
    if broker.extra_args == CHURN:  # retention 0 trims what the subscription consumed and acknowledged
        missing -= acked
    assert not missing, f"{len(missing)} receipted messages lost, e.g. {sorted(missing)[:5]}"
    assert not lost_acks, f"acks the store held before a kill were lost: {lost_acks[:5]}"
    assert len(receipted) >= sum(KILL_AFTER_RECEIPTS)
    if broker.extra_args == CHURN:  # the kills did land among rollovers (trims run every second besides)
        assert "rolled over from ledger" in broker.log_text()
    if any(a.startswith("metadataStoreUrl=zk:") for a in broker.extra_args):
        assert "cursor positions persisted at most every 1000 ms" in broker.log_text()
