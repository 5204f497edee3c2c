"""Forging what only replicators send (issue 36 items 1-2).

A client with produce permission must not write replicated-subscription markers (an UPDATE acknowledged
another client's subscription, or moved ``pulsar.dedup``), set ``replicated_from``, or take a
``pulsar.repl.`` producer name (which switches the topic to the replicated-copy dedup key, so one forged
high sequence id made the topic drop genuine replicated messages).
"""

from __future__ import annotations

import pytest

from magnetar import protocol as proto
from magnetar.broker.replication.subscriptions import codec
from magnetar.ledger.api import Position
from tests.abuse.conftest import create_producer, http, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

BACKLOG = 20
FAR = Position(2**40, 0)  # past any entry: an applied UPDATE would acknowledge everything


def marker(seq: int, marker_type: int, payload: bytes, *, producer: str, replicated_from: str = "") -> bytes:
    meta = proto.pb.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1000 + seq,
                                    marker_type=marker_type)
    if replicated_from:
        meta.replicated_from = replicated_from
    return proto.make_entry(meta, payload)


def backlog(broker: BrokerProcess, topic: str) -> dict[str, int]:
    status, stats = http(broker, "GET", f"/admin/v2/persistent/public/default/{topic}/stats")
    assert status == 200, stats
    return {name: sub["msgBacklog"] for name, sub in stats["subscriptions"].items()}


async def test_client_markers_and_replicated_from_are_refused(broker: BrokerProcess) -> None:
    name = unique("forged-marker")
    topic = f"persistent://public/default/{name}"
    client = make_client(broker.url)
    try:
        client.subscribe(topic, "victim").close()
        producer = client.create_producer(topic)
        for i in range(BACKLOG):
            producer.send(f"m{i}".encode())
        producer.close()
    finally:
        client.close()

    update = codec.update("victim", {"standalone": FAR})
    dedup = codec.update("pulsar.dedup", {"standalone": FAR})
    forgeries = [
        marker(0, codec.UPDATE, update, producer="evil", replicated_from="other"),
        marker(1, codec.UPDATE, update, producer="evil"),
        marker(2, codec.UPDATE, dedup, producer="evil", replicated_from="other"),
        marker(3, proto.markers.TXN_COMMIT, b"", producer="evil"),
        proto.make_entry(proto.pb.MessageMetadata(producer_name="evil", sequence_id=4, publish_time=1,
                                                  replicated_from="other"), b"copied?"),
    ]
    peer = await WirePeer.connect(broker.port)
    try:
        assert (await create_producer(peer, topic, producer_name="evil")).command.type == T.PRODUCER_SUCCESS
        for seq, forged in enumerate(forgeries):
            peer.send(proto.commands.send(1, seq), forged)
            refused = (await peer.expect(T.SEND_ERROR)).command.send_error
            assert refused.sequence_id == seq and refused.error == proto.pb.NotAllowedError, refused
            assert "replicators" in refused.message
        # the producer stays usable for ordinary messages
        peer.send(proto.commands.send(1, 10), proto.make_entry(
            proto.pb.MessageMetadata(producer_name="evil", sequence_id=10, publish_time=1), b"plain"))
        assert (await peer.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id == 10
    finally:
        await peer.close()

    assert backlog(broker, name) == {"victim": BACKLOG + 1}
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "victim")
        bodies = [consumer.receive(10_000).data() for _ in range(BACKLOG + 1)]
        assert bodies == [f"m{i}".encode() for i in range(BACKLOG)] + [b"plain"]
    finally:
        client.close()


@pytest.mark.parametrize("producer_name", [
    "pulsar.repl.other-->standalone",  # a cluster that is not registered
    "pulsar.repl.standalone-->standalone",  # from itself
    "pulsar.repl.registered-->elsewhere",  # not to this cluster
    "pulsar.replica",  # the prefix without the form
])
async def test_replicator_producer_names_are_reserved(broker: BrokerProcess, producer_name: str) -> None:
    status, body = http(broker, "PUT", "/admin/v2/clusters/registered", {"serviceUrl": "http://127.0.0.1:1"})
    assert status in (204, 409), body
    topic = f"persistent://public/default/{unique('repl-name')}"
    peer = await WirePeer.connect(broker.port)
    try:
        reply = await create_producer(peer, topic, producer_name=producer_name)
        assert reply.command.type == T.ERROR, reply.command
        assert reply.command.error.error == proto.pb.NotAllowedError
        assert "reserved for replicators" in reply.command.error.message or "not registered" in \
            reply.command.error.message
    finally:
        await peer.close()


async def test_a_registered_clusters_replicator_dedups_by_the_original_producer(broker: BrokerProcess) -> None:
    """Without authorization the well-formed name of a registered cluster is a replicator: accepted, and its
    copies must name that cluster in ``replicated_from``."""
    status, body = http(broker, "PUT", "/admin/v2/clusters/registered", {"serviceUrl": "http://127.0.0.1:1"})
    assert status in (204, 409), body
    topic = f"persistent://public/default/{unique('repl-ok')}"
    peer = await WirePeer.connect(broker.port)
    try:
        name = "pulsar.repl.registered-->standalone"
        assert (await create_producer(peer, topic, producer_name=name)).command.type == T.PRODUCER_SUCCESS
        copy = proto.make_entry(proto.pb.MessageMetadata(
            producer_name="orig", sequence_id=7, publish_time=1, replicated_from="registered"), b"copy")
        peer.send(proto.commands.send(1, 0), copy)
        assert (await peer.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id == 0
        wrong = proto.make_entry(proto.pb.MessageMetadata(
            producer_name="orig", sequence_id=8, publish_time=1, replicated_from="third"), b"lie")
        peer.send(proto.commands.send(1, 1), wrong)
        refused = (await peer.expect(T.SEND_ERROR)).command.send_error
        assert refused.error == proto.pb.NotAllowedError and "replicated from 'third'" in refused.message
    finally:
        await peer.close()
