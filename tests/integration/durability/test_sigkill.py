"""SIGKILL the real ``magnetar standalone`` while the official client publishes and acks at full speed.

Over several kill points, with default settings and with a configuration that makes ledger rollovers,
retention trims and cursor writes constant (so kills land among them): every message the client got a
receipt for is stored exactly once after the restarts (or was consumed, acked and trimmed), and the only
acknowledged messages delivered again are those acknowledged just before a kill (the cursor-persistence
window of 100 ms, plus the client's own ack grouping of 100 ms): no consumer-side ack is lost.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

TOPIC = "persistent://public/default/sigkill"
SUBSCRIPTION = "durable-sub"
KILL_AFTER_RECEIPTS = (300, 1500, 800)  # the kill points: receipts seen in the round before SIGKILL
RECEIPTS_TIMEOUT_S = 60.0
RECEIVE_TIMEOUT_MS = 300
#: Acked messages may come back only if acked this close to the kill: 100 ms of cursor persistence,
#: 100 ms of client-side ack grouping, and scheduling slack for a loaded CI machine.
REDELIVERY_WINDOW_S = 2.0


@dataclass
class Round:
    """What one client session saw before its broker was killed."""

    receipted: set[str] = field(default_factory=set)
    acked_at: dict[str, float] = field(default_factory=dict)  # value -> monotonic time of the ack call
    redelivered_acked: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    progress: threading.Condition = field(default_factory=threading.Condition)


#: The second configuration aims the kills at the busy moments: a ledger rollover every 40 entries, consumed
#: ledgers trimmed every second (retention 0) and cursor positions persisted every 10 ms.
CHURN = ("--set", "managedLedgerMaxEntriesPerLedger=40", "--set", "managedLedgerMinLedgerRolloverTimeMinutes=0",
         "--set", "retentionCheckIntervalInSeconds=1", "--set", "managedLedgerCursorPersistIntervalMs=10")


@pytest.fixture(params=[(), CHURN], ids=["defaults", "rollover-trim-cursor-churn"])
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", extra_args=request.param).start()
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


def _consume(consumer: pulsar.Consumer, state: Round, acked_before: dict[str, float]) -> None:
    while not state.stop.is_set():  # bounded by the stop event
        try:
            msg = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
        except Exception:
            continue
        value = msg.data().decode()
        if value in acked_before or value in state.acked_at:
            state.redelivered_acked.append(value)
        try:
            consumer.acknowledge(msg)
        except Exception:
            continue
        state.acked_at.setdefault(value, time.monotonic())


def _round(broker: BrokerProcess, index: int, kill_after: int, acked_before: dict[str, float]) -> tuple[Round, float]:
    client = make_client(broker.url)
    state = Round()
    consumer = client.subscribe(TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True,
                                      max_pending_messages=500, send_timeout_millis=0)
    threads = [
        threading.Thread(target=_publish, args=(producer, f"r{index}", state), daemon=True),
        threading.Thread(target=_consume, args=(consumer, state, acked_before), daemon=True),
    ]
    for t in threads:
        t.start()
    with state.progress:
        reached = state.progress.wait_for(lambda: len(state.receipted) >= kill_after, RECEIPTS_TIMEOUT_S)
    assert reached, f"round {index}: only {len(state.receipted)} receipts"
    broker.kill()  # SIGKILL while sends and acks are in full flight
    killed_at = time.monotonic()
    state.stop.set()
    # its broker is dead: closing may find a producer's connection gone mid-close (NotConnected)
    with contextlib.suppress(pulsar.PulsarException):
        client.close()
    for t in threads:
        t.join(timeout=30)
    return state, killed_at


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


def test_sigkill_loses_no_receipted_message_and_redelivers_only_the_ack_window(broker: BrokerProcess) -> None:
    receipted: set[str] = set()
    acked: dict[str, float] = {}
    late_acks: list[tuple[str, float]] = []
    previous_kill = 0.0
    for index, kill_after in enumerate(KILL_AFTER_RECEIPTS):
        state, killed_at = _round(broker, index, kill_after, acked)
        broker.start()  # same ports, same data: recovery
        assert broker.wait_for_log("recovery done", 30)
        for value in state.redelivered_acked:
            if value in acked:  # acked in an earlier round, delivered again after that round's kill
                late_acks.append((value, previous_kill - acked[value]))
        receipted |= state.receipted
        acked.update({v: t for v, t in state.acked_at.items() if v not in acked})
        previous_kill = killed_at
    stored = _read_all(broker)
    assert len(stored) == len(set(stored)), "an entry is stored twice"
    for index in range(len(KILL_AFTER_RECEIPTS)):
        sequence = [int(v.split("-")[1]) for v in stored if v.startswith(f"r{index}-")]
        assert sequence == sorted(sequence), f"round {index}: messages stored out of send order"
    missing = receipted - set(stored)
    if broker.extra_args == CHURN:  # retention 0 trims what the subscription consumed and acknowledged
        missing -= set(acked)
    assert not missing, f"{len(missing)} receipted messages lost, e.g. {sorted(missing)[:5]}"
    outside_window = [(v, age) for v, age in late_acks if age > REDELIVERY_WINDOW_S]
    assert not outside_window, f"acked messages redelivered from long before the kill: {outside_window[:5]}"
    assert len(receipted) >= sum(KILL_AFTER_RECEIPTS)
    if broker.extra_args == CHURN:  # the kills did land among rollovers (trims run every second besides)
        assert "rolled over from ledger" in broker.log_text()
