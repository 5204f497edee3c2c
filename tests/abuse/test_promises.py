"""Promises the broker made and a careless or hostile client could break (issue items 1-3).

PIP-68: a queued WaitForExclusive producer publishes nothing. A topic name is one decision: a producer
auto-creating it and an admin PUT of partitions never both succeed. Reserved cursors (``pulsar.dedup``)
are not subscriptions, neither for the admin API nor for SUBSCRIBE.
"""

from __future__ import annotations

import asyncio

import pulsar

from magnetar import protocol as proto
from tests.abuse.conftest import create_producer, entry, http, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

RACE_TRIES = 12


async def test_queued_wait_for_exclusive_producer_publishes_nothing(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('pip68')}"
    owner, waiter = await WirePeer.connect(broker.port), await WirePeer.connect(broker.port)
    granted = await create_producer(owner, topic, producer_name="owner", access_mode=proto.pb.Exclusive)
    assert granted.command.type == T.PRODUCER_SUCCESS
    queued = await create_producer(waiter, topic, producer_name="waiter", access_mode=proto.pb.WaitForExclusive)
    assert queued.command.producer_success.producer_ready is False

    owner.send(proto.commands.send(1, 0), entry(0, b"owner-0", producer="owner"))
    waiter.send(proto.commands.send(1, 0), entry(0, b"sneaked", producer="waiter"))
    owner.send(proto.commands.send(1, 1), entry(1, b"owner-1", producer="owner"))
    refused = (await waiter.expect(T.SEND_ERROR)).command.send_error
    assert refused.sequence_id == 0 and "waiting for exclusive access" in refused.message
    assert [(await owner.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id for _ in range(2)] == [0, 1]

    await owner.close()  # the waiter is promoted and may publish now
    promoted = (await waiter.expect(T.PRODUCER_SUCCESS)).command.producer_success
    assert promoted.producer_ready and promoted.HasField("topic_epoch")
    waiter.send(proto.commands.send(1, 1), entry(1, b"waiter-1", producer="waiter"))
    assert (await waiter.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id == 1
    await waiter.close()

    client = make_client(broker.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        bodies = [reader.read_next(10_000).data() for _ in range(3)]
        assert bodies == [b"owner-0", b"owner-1", b"waiter-1"]
        assert not reader.has_message_available()
    finally:
        client.close()


async def _race_once(broker: BrokerProcess, name: str) -> tuple[bool, int]:
    """A PRODUCER auto-creating ``name`` against ``PUT .../name/partitions``: (producer ok, PUT status)."""
    peer = await WirePeer.connect(broker.port)
    try:
        put = asyncio.create_task(asyncio.to_thread(
            http, broker, "PUT", f"/admin/v2/persistent/public/default/{name}/partitions", 3))
        reply = await create_producer(peer, f"persistent://public/default/{name}")
        status, _ = await put
        return reply.command.type == T.PRODUCER_SUCCESS, status
    finally:
        await peer.close()


async def test_auto_creation_and_partitioned_creation_never_both_win(broker: BrokerProcess) -> None:
    for _ in range(RACE_TRIES):
        name = unique("twin")
        produced, status = await _race_once(broker, name)
        assert status in (204, 409), status
        assert produced != (status == 204), f"{name}: producer {produced}, PUT {status}"
        partitions = http(broker, "GET", f"/admin/v2/persistent/public/default/{name}/partitions")[1]
        plain = http(broker, "GET", f"/admin/v2/persistent/public/default/{name}/stats")[0]
        if status == 204:
            assert partitions["partitions"] == 3 and plain in (404, 405, 409, 412)
        else:
            assert partitions["partitions"] == 0 and plain == 200


async def test_reserved_dedup_cursor_is_not_a_subscription(broker: BrokerProcess) -> None:
    topic = unique("reserved")
    client = make_client(broker.url)
    try:
        producer = client.create_producer(topic, producer_name="dedup-owner")
        for i in range(3):
            producer.send(b"m%d" % i)
        base = f"/admin/v2/persistent/public/default/{topic}/subscription/pulsar.dedup"
        for method, path, body in (
            ("PUT", f"/admin/v2/persistent/public/default/{topic}/subscription/pulsar.dedup", None),
            ("PUT", f"/admin/v2/persistent/public/default/{topic}/subscription/pulsar.repl.other", None),
            ("POST", f"{base}/skip_all", None),
            ("POST", f"{base}/skip/2", None),
            ("POST", f"{base}/resetcursor/0", None),
            ("POST", f"{base}/resetcursor", {"ledgerId": -1, "entryId": -1}),
            ("DELETE", f"/admin/v2/persistent/public/default/{topic}/subscription/pulsar.dedup", None),
        ):
            status, reply = http(broker, method, path, body)
            assert status == 405, (method, path, status, reply)
            assert "reserved" in reply["reason"]
        assert http(broker, "GET", f"/admin/v2/persistent/public/default/{topic}/subscriptions")[1] == []
        try:
            client.subscribe(topic, "pulsar.dedup")
            raise AssertionError("subscribing to the reserved dedup cursor was accepted")
        except pulsar.PulsarException:
            pass
        # the dedup state still works: a resend of a stored sequence id is not stored again
        producer.close()
        again = client.create_producer(topic, producer_name="dedup-owner")
        assert again.last_sequence_id() == 2
    finally:
        client.close()
