"""A full disk and failing fsyncs under the real ``magnetar standalone``, driven by the official client.

Disk full without root: ``RLIMIT_FSIZE`` set on the running broker (``prlimit``): a write past the limit
fails with EFBIG (Python ignores SIGXFSZ), in the ledger files and in SQLite's write-ahead log alike
("database or disk is full"), and lifting the limit is "space comes back". Fsync failures: the test-only
``magnetarTestingFsyncFailureProbability``. What must hold: a failed write is never receipted, the producer
gets an error and resends, the broker keeps running and serving reads, logs the cause once (not per send),
recovers by itself when writes succeed again, and after a SIGKILL (also while full) every receipted message
is stored exactly once, in send order, and every receipted ack holds.
"""

from __future__ import annotations

import asyncio
import resource
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar import protocol as proto
from tests.component.wire import WirePeer
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client
from tests.integration.durability.stored import RECEIVE_MS, assert_stored_once_in_order, read_all, seed_topic

pytestmark = pytest.mark.integration

FULL_BYTES = 96 * 1024  # per file: a few ledger files' worth, less than SQLite's write-ahead log after start
PAYLOAD = 4096
WAIT_S = 60.0
CAUSE_LOGGED = "failures since writes last succeeded"
T = proto.pb.BaseCommand


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("disk")) / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


def restart(broker: BrokerProcess, *args: str) -> None:
    broker.kill()
    broker.extra_args = args
    broker.start()


def limit_file_size(broker: BrokerProcess, limit: int | None) -> None:
    """The broker's RLIMIT_FSIZE: ``limit`` bytes per file, or none (space comes back)."""
    assert broker.proc is not None
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.prlimit(broker.proc.pid, resource.RLIMIT_FSIZE, (hard if limit is None else limit, hard))


def alive(broker: BrokerProcess) -> bool:
    return broker.proc is not None and broker.proc.poll() is None


class Publisher:
    """Sends asynchronously (the client resends after errors, never times out); records the receipts."""

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0,
                                               max_pending_messages=1000, block_if_queue_full=True)
        self.receipted: list[str] = []
        self.errors = 0
        self._changed = threading.Condition()

    def send(self, values: list[str], size: int = 0) -> None:
        for value in values:
            self.producer.send_async(value.encode().ljust(size, b"."), self._callback(value))

    def _callback(self, value: str) -> object:
        def done(result: pulsar.Result, _msg_id: object) -> None:
            with self._changed:
                if result == pulsar.Result.Ok:
                    self.receipted.append(value)
                else:
                    self.errors += 1
                self._changed.notify_all()
        return done

    def wait_receipts(self, count: int, timeout_s: float = WAIT_S) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.receipted) >= count, timeout_s)


def new_topic_with_baseline(broker: BrokerProcess) -> str:
    """A topic with subscription ``sub`` and ten small messages b0..b9, made while there is space."""
    topic = f"persistent://public/default/disk-{uuid.uuid4().hex[:8]}"
    seed_topic(broker, topic, 10, "b")
    return topic


def test_disk_full_fails_sends_keeps_reads_and_recovers_by_itself(broker: BrokerProcess) -> None:
    restart(broker)
    topic = new_topic_with_baseline(broker)
    client = make_client(broker.url)
    try:
        limit_file_size(broker, FULL_BYTES)
        publisher = Publisher(client, topic)
        publisher.send([f"m{i}" for i in range(60)], PAYLOAD)  # 240 KB: more than fits
        assert broker.wait_for_log(CAUSE_LOGGED, WAIT_S), broker.log_text()[-3000:]
        assert "File too large" in broker.log_text()
        consumer = client.subscribe(topic, "sub")  # reads need no space: served while full
        received = {consumer.receive(RECEIVE_MS).data().rstrip(b".").decode() for _ in range(10)}
        assert {f"b{i}" for i in range(10)} <= received | set(publisher.receipted)
        assert alive(broker)
        limit_file_size(broker, None)  # space comes back: the client's resends get through
        assert publisher.wait_receipts(60), f"{len(publisher.receipted)} of 60 receipted after space came back"
        assert broker.wait_for_log("writes succeed again", WAIT_S)
    finally:
        client.close()
    assert alive(broker)
    errors_logged = broker.log_text().count(CAUSE_LOGGED)
    assert errors_logged <= broker.log_text().count("writes succeed again") + 1, "the cause is logged per send"
    stored = read_all(broker, topic)
    assert_stored_once_in_order(stored, publisher.receipted)
    assert stored == [f"b{i}" for i in range(10)] + [f"m{i}" for i in range(60)]


async def _ack_with_receipts(port: int, topic: str, acks: int) -> list[bool]:
    """Take the first ten messages of subscription ``sub`` and ack the first ``acks`` with receipts:
    True for each ack the broker answered without an error."""
    peer = await WirePeer.connect(port)
    try:
        peer.send(proto.commands.subscribe(topic, "sub", proto.pb.CommandSubscribe.Exclusive, 1, 1,
                                           initial_position=proto.pb.CommandSubscribe.Earliest))
        await peer.expect(T.SUCCESS)
        peer.send(proto.commands.flow(1, 10))
        ids = [(await peer.expect(T.MESSAGE)).command.message.message_id for _ in range(10)]
        answers = []
        for request_id, mid in enumerate(ids[:acks], start=100):
            peer.send(proto.commands.ack(1, [mid], request_id=request_id))
            answer = (await peer.expect(T.ACK_RESPONSE)).command.ackResponse
            assert answer.request_id == request_id
            assert not answer.HasField("error") or "disk" in answer.message, answer.message  # a clear cause
            answers.append(not answer.HasField("error"))
        return answers
    finally:
        await peer.close()


def test_sigkill_while_the_disk_is_full_keeps_every_receipt_and_receipted_ack(broker: BrokerProcess) -> None:
    restart(broker)
    topic = new_topic_with_baseline(broker)
    limit_file_size(broker, FULL_BYTES)
    client = make_client(broker.url)
    try:
        publisher = Publisher(client, topic)
        publisher.send([f"m{i}" for i in range(60)], PAYLOAD)
        assert broker.wait_for_log(CAUSE_LOGGED, WAIT_S)
        acked = asyncio.run(_ack_with_receipts(broker.port, topic, 5))  # cursor writes: SQLite is full too
        assert alive(broker)
        broker.kill()  # SIGKILL while full
    finally:
        client.close()
    receipted = list(publisher.receipted)
    restart(broker)  # a new process: no limit
    stored = read_all(broker, topic)
    assert_stored_once_in_order(stored, receipted)
    assert stored[:10] == [f"b{i}" for i in range(10)]
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "sub")
        first = consumer.receive(RECEIVE_MS).data().rstrip(b".").decode()
    finally:
        client.close()
    durable_acks = next((i for i, ok in enumerate(acked) if not ok), len(acked))  # acks receipted in a row
    assert int(first[1:]) >= durable_acks, f"a receipted ack was lost: {first} delivered again, acks {acked}"
    assert int(first[1:]) <= 5, f"an unacked message was skipped: first delivered is {first}"


def test_fsync_failures_never_lose_a_receipted_message(broker: BrokerProcess) -> None:
    name = f"fsync-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{name}"
    # a durable subscription holds every entry: with the default retention (0) ledgers nobody subscribes to may be
    # trimmed at any time, and Pulsar promises nothing about them. It is made before fsyncs fail: a SUBSCRIBE that
    # fails with a retriable error (the topic's first ledger not created) leaves pulsar-client 3.13's consumer
    # waiting for its operation timeout instead of subscribing again
    restart(broker)
    seed_client = make_client(broker.url)
    try:
        seed_client.subscribe(topic, "held", initial_position=pulsar.InitialPosition.Earliest).close()
    finally:
        seed_client.close()
    restart(broker, "--set", "magnetarTestingFsyncFailureProbability=0.2",
            "--set", "managedLedgerMaxEntriesPerLedger=20")
    client = make_client(broker.url)
    try:
        publisher = Publisher(client, topic)
        publisher.send([f"m{i}" for i in range(200)])
        assert publisher.wait_receipts(100), f"only {len(publisher.receipted)} receipted"
        assert "injected fault: fsync failed" in broker.log_text()
        assert alive(broker)
        broker.kill()  # SIGKILL with sends and failing fsyncs in flight
    finally:
        client.close()
    receipted = list(publisher.receipted)
    restart(broker)
    stored = read_all(broker, topic)
    assert len(stored) >= len(receipted), (len(stored), broker.log_text()[-3000:])
    assert_stored_once_in_order(stored, receipted)
    # the broker's own account agrees: one entry per stored message, all of them the subscription's backlog
    path = f"/admin/v2/persistent/public/default/{name}"
    status, internal = call(broker.web_url, "GET", f"{path}/internalStats")
    assert status == 200, internal
    assert internal["numberOfEntries"] == len(stored), internal
    status, stats = call(broker.web_url, "GET", f"{path}/stats")
    assert status == 200, stats
    assert stats["subscriptions"]["held"]["msgBacklog"] == len(stored), stats["subscriptions"]
