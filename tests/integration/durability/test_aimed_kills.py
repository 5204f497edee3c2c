"""Kills aimed at the moments between two writes: ledger rollover, retention trimming, cursor persistence,
and consumer-side acks in flight.

The broker kills itself at a named crash point (``magnetarTestingCrashPoints``, see magnetar/core/crashpoints.py),
so each kill lands exactly between the two steps it names, with no sleep and no race. One broker process
per module, restarted in place (with or without a crash point armed) on the same data directory. After each
restart: every receipted message is stored exactly once, in send order; every message not durably acked is
delivered again; an ack the broker answered with an ACK_RESPONSE (ack receipt) is never undone.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pulsar
import pytest

from magnetar import protocol as proto
from tests.component.wire import WirePeer
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.durability.stored import RECEIVE_MS, assert_stored_once_in_order, read_all, seed_topic

pytestmark = pytest.mark.integration

DIED_TIMEOUT_S = 60.0
SMALL_LEDGERS = ("--set", "managedLedgerMaxEntriesPerLedger=5", "--set", "managedLedgerMinLedgerRolloverTimeMinutes=0")
TRIMMING = ("--set", "defaultRetentionTimeInMinutes=0", "--set", "defaultRetentionSizeInMB=0",
            "--set", "retentionCheckIntervalInSeconds=1", "--set", "brokerDeduplicationSnapshotIntervalSeconds=1")
T = proto.pb.BaseCommand


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("aimed")) / "data", extra_args=SMALL_LEDGERS).start()
    try:
        yield proc
    finally:
        proc.kill()


def restart(broker: BrokerProcess, *args: str, crash_point: str = "", topic: str = "") -> None:
    """SIGKILL the broker if it runs, then start it again with ``args`` (and a crash point armed for
    ``topic``)."""
    broker.kill()
    armed = ("--set", f"magnetarTestingCrashPoints={crash_point}~{local_name(topic)}") if crash_point else ()
    broker.extra_args = (*SMALL_LEDGERS, *args, *armed)
    broker.start()


def wait_killed_at(broker: BrokerProcess, crash_point: str) -> None:
    assert broker.proc is not None
    died = broker.wait_until(lambda: broker.proc is not None and broker.proc.poll() is not None, DIED_TIMEOUT_S)
    assert died, f"the broker did not kill itself at {crash_point}:\n{broker.log_text()[-4000:]}"
    assert broker.proc.returncode == -9
    assert f"crash point {crash_point.split('@')[0]} reached" in broker.log_text()


def local_name(topic: str) -> str:
    return topic.rsplit("/", 1)[-1]


def new_topic() -> str:
    return f"persistent://public/default/aimed-{uuid.uuid4().hex[:8]}"


def publish_until_killed(broker: BrokerProcess, topic: str, count: int, crash_point: str) -> set[str]:
    """Publish ``count`` messages asynchronously (many in flight) while the broker kills itself; the
    values the broker receipted."""
    receipted: set[str] = set()
    lock = threading.Lock()
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)

        def receipt(value: str) -> object:
            def callback(result: pulsar.Result, _msg_id: object) -> None:
                if result == pulsar.Result.Ok:
                    with lock:
                        receipted.add(value)
            return callback

        for i in range(count):
            try:
                producer.send_async(f"m{i}".encode(), receipt(f"m{i}"))
            except pulsar.PulsarException:
                break  # the broker is gone: the rest were never sent
        wait_killed_at(broker, crash_point)
    finally:
        client.close()
    with lock:
        return set(receipted)


def internal_stats(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    status, body = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{local_name(topic)}/internalStats")
    assert status == 200, body
    return cast(dict[str, Any], body)


def ledger_files_of(broker: BrokerProcess, topic: str) -> set[int]:
    """The ids of the ledgers on disk that belong to ``topic`` (their sidecar names the owner). The broker may
    delete a ledger (a trim) between the listing and the read: a sidecar gone by then is not on disk."""
    owner = f"public/default/persistent/{local_name(topic)}"
    found = set()
    for sidecar in (broker.data_dir / "ledgers" / "ledgers").glob("*.meta"):
        try:
            text = sidecar.read_text()  # sidecars are replaced atomically: whole, or absent
        except FileNotFoundError:
            continue
        body = json.loads(text)
        if body["custom_metadata"].get("pulsar/managed-ledger") == owner:
            found.add(int(body["ledger_id"]))
    return found


@pytest.mark.parametrize("crash_point", ["rollover.created@2", "rollover.recorded@2"])
def test_kill_mid_rollover_loses_no_receipted_message(broker: BrokerProcess, crash_point: str) -> None:
    topic = new_topic()
    restart(broker, crash_point=crash_point, topic=topic)
    receipted = publish_until_killed(broker, topic, 60, crash_point)
    restart(broker)
    stored = read_all(broker, topic)
    assert_stored_once_in_order(stored, receipted)
    assert len(receipted) >= 5  # the kill came at the second rollover: a ledger's worth was receipted
    client = make_client(broker.url)
    try:  # the recovered topic keeps rolling over and storing
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(100, 112):
            producer.send(f"m{i}".encode())
    finally:
        client.close()
    assert read_all(broker, topic) == [*stored, *(f"m{i}" for i in range(100, 112))]


def _fill_and_consume(broker: BrokerProcess, topic: str, sent: int, acked: int) -> None:
    """Publish ``sent`` messages (5 per ledger) and ack the first ``acked`` on subscription ``sub``."""
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(sent):
            producer.send(f"m{i}".encode())
        received = [consumer.receive(RECEIVE_MS) for _ in range(acked)]
        consumer.acknowledge_cumulative(received[-1])  # one ACK: the trim sees all of it at once
        consumer.close()  # a graceful close writes the cursor
    finally:
        client.close()


def _received(broker: BrokerProcess, topic: str, count: int) -> list[str]:
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        return [consumer.receive(RECEIVE_MS).data().decode() for _ in range(count)]
    finally:
        client.close()


@pytest.mark.parametrize(("crash_point", "two_phase"), [
    ("trim.queued", True), ("trim.recorded", True), ("trim.deleting", False),
])
def test_kill_mid_trim_keeps_every_unconsumed_message(broker: BrokerProcess, crash_point: str, two_phase: bool) -> None:
    topic = new_topic()
    phases = ("--set", f"topicTwoPhaseDeletionEnabled={str(two_phase).lower()}")
    restart(broker, *TRIMMING, *phases, crash_point=crash_point, topic=topic)
    _fill_and_consume(broker, topic, 23, 16)  # three consumed ledgers to trim, one partly consumed
    wait_killed_at(broker, crash_point)
    restart(broker, *TRIMMING, *phases)
    assert _received(broker, topic, 7) == [f"m{i}" for i in range(16, 23)]
    stored = read_all(broker, topic)
    assert_stored_once_in_order(stored, {f"m{i}" for i in range(15, 23)})  # the unconsumed ledgers stay

    def settled() -> bool:  # the cut trim was finished: only the unconsumed ledgers are listed (and on disk)
        ledgers = internal_stats(broker, topic)["ledgers"]
        listed, files = {x["ledgerId"] for x in ledgers}, ledger_files_of(broker, topic)
        if not two_phase:  # one phase: the ledgers the kill kept from deleting stay, orphans for the audit
            files = {i for i in files if i >= min(listed)}
        return sum(x["entries"] for x in ledgers) == 8 and files == listed


    assert broker.wait_until(settled, 30), (internal_stats(broker, topic), ledger_files_of(broker, topic))


@pytest.mark.parametrize(("crash_point", "first_after_restart"), [
    ("cursor.persisting", "m0"),  # the acks were only in memory: all of them are delivered again
    ("cursor.persisted", "m10"),  # the record holding them was written: none is
])
def test_kill_at_cursor_persistence(broker: BrokerProcess, crash_point: str, first_after_restart: str) -> None:
    topic = new_topic()
    restart(broker)
    seed_topic(broker, topic, 20, "m")
    restart(broker, crash_point=crash_point, topic=topic)  # armed once the subscription and its record exist
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "sub")
        received = [consumer.receive(RECEIVE_MS) for _ in range(10)]
        consumer.acknowledge_cumulative(received[-1])  # one ACK: the next cursor write holds all ten
        wait_killed_at(broker, crash_point)
    finally:
        client.close()
    restart(broker)
    first = int(first_after_restart[1:])
    assert _received(broker, topic, 20 - first) == [f"m{i}" for i in range(first, 20)]


async def _ack_then_kill(broker: BrokerProcess, topic: str, acks: int, *, receipts: bool) -> None:
    """Receive 10 messages on subscription ``sub``, ack the first ``acks`` individually (with ``receipts``,
    each ACK carries a request id and its ACK_RESPONSE is awaited), then SIGKILL the broker while the
    connection is still open (a disconnect would write the cursor)."""
    peer = await WirePeer.connect(broker.port)
    try:
        peer.send(proto.commands.subscribe(topic, "sub", proto.pb.CommandSubscribe.Exclusive, 1, 1,
                                           initial_position=proto.pb.CommandSubscribe.Earliest))
        await peer.expect(T.SUCCESS)
        peer.send(proto.commands.flow(1, 10))
        ids = [(await peer.expect(T.MESSAGE)).command.message.message_id for _ in range(10)]
        for request_id, mid in enumerate(ids[:acks], start=100):
            peer.send(proto.commands.ack(1, [mid], request_id=request_id if receipts else None))
            if receipts:
                answer = (await peer.expect(T.ACK_RESPONSE)).command.ackResponse
                assert answer.request_id == request_id and not answer.HasField("error")
        broker.kill()
    finally:
        await peer.close()


@pytest.mark.parametrize("receipts", [True, False], ids=["ack-receipts", "no-receipts"])
def test_consumer_acks_and_a_kill(broker: BrokerProcess, receipts: bool) -> None:
    """Acks in flight when the broker dies: a receipted ack holds; an unreceipted one may be lost, and then
    its message is delivered again, never lost. Cursor writes every minute: only a receipt makes one now."""
    topic = new_topic()
    restart(broker, "--set", "managedLedgerCursorPersistIntervalMs=60000")
    seed_topic(broker, topic, 10, "m")
    asyncio.run(_ack_then_kill(broker, topic, 5, receipts=receipts))
    restart(broker)
    first = 5 if receipts else 0
    assert _received(broker, topic, 10 - first) == [f"m{i}" for i in range(first, 10)]
