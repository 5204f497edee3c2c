"""Broker behaviour at the wire that the official client cannot show: markers, dedup, receipt order."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from magnetar.broker.names import TopicName
from tests.component.wire import T, WirePeer


def entry(seq: int, body: bytes, *, producer: str = "p") -> bytes:
    meta = proto.pb.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1000 + seq)
    return proto.make_entry(meta, body)


async def create_producer(peer: WirePeer, topic: str, producer_id: int = 1, name: str | None = None) -> str:
    peer.send(proto.commands.producer(topic, producer_id, 1, producer_name=name))
    frame = await peer.expect(T.PRODUCER_SUCCESS)
    return frame.command.producer_success.producer_name


async def subscribe(peer: WirePeer, topic: str, consumer_id: int = 7) -> None:
    peer.send(proto.commands.subscribe(topic, "sub", 0, consumer_id, 2, initial_position=1))
    await peer.expect(T.SUCCESS)
    peer.send(proto.commands.flow(consumer_id, 1000))


async def test_markers_are_never_delivered_and_are_acked(standalone: Standalone) -> None:
    topic = "persistent://public/default/markers"
    loaded = await standalone.broker.registry.get(TopicName.parse(topic), create=True)
    await loaded.ledger.add_entry(entry(0, b"before"))
    marker = proto.make_marker_entry(proto.markers.TXN_COMMIT, b"", publish_time_ms=1)
    marker_position = await loaded.ledger.add_entry(marker)
    await loaded.ledger.add_entry(entry(1, b"after"))
    peer = await WirePeer.connect(standalone.broker_port)
    await subscribe(peer, topic)
    first = await peer.expect(T.MESSAGE)
    second = await peer.expect(T.MESSAGE)
    bodies = [bytes(proto.entry_payload(bytes(f.payload or b""))) for f in (first, second)]
    assert bodies == [b"before", b"after"]
    assert loaded.subscriptions["sub"].cursor.is_acknowledged(marker_position)
    await peer.close()


async def test_resent_sequence_ids_are_stored_once(standalone: Standalone) -> None:
    topic = "persistent://public/default/dedup"
    peer = await WirePeer.connect(standalone.broker_port)
    name = await create_producer(peer, topic)
    for seq in (0, 1, 2):
        peer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer=name))
    receipts = [(await peer.expect(T.SEND_RECEIPT)).command.send_receipt for _ in range(3)]
    assert [r.sequence_id for r in receipts] == [0, 1, 2]
    # a reconnecting producer resends 1 and 2, then a new one
    await peer.close()
    peer = await WirePeer.connect(standalone.broker_port)
    peer.send(proto.commands.producer(topic, 1, 1, producer_name=name, epoch=1))
    success = (await peer.expect(T.PRODUCER_SUCCESS)).command.producer_success
    assert success.last_sequence_id == 2
    for seq in (1, 2, 3):
        peer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer=name))
    again = [(await peer.expect(T.SEND_RECEIPT)).command.send_receipt for _ in range(3)]
    assert [r.sequence_id for r in again] == [1, 2, 3]
    assert [proto.ids.signed(r.message_id.entryId) for r in again[:2]] == [-1, -1]
    loaded = standalone.broker.registry.loaded[topic]
    assert loaded.ledger.number_of_entries() == 4
    await peer.close()


async def test_dedup_cursor_comes_with_the_first_producer(standalone: Standalone) -> None:
    """A topic only subscribed to has no ``pulsar.dedup`` cursor (a metadata write per topic saved); the
    first producer creates it before anything lands, and the state is recovered on the next load."""
    topic = "persistent://public/default/dedup-lazy"
    consumer = await WirePeer.connect(standalone.broker_port)
    await subscribe(consumer, topic)
    loaded = standalone.broker.registry.loaded[topic]
    assert sorted(loaded.ledger.cursors) == ["sub"]
    peer = await WirePeer.connect(standalone.broker_port)
    name = await create_producer(peer, topic, producer_id=1, name="lazy")
    assert "pulsar.dedup" in loaded.ledger.cursors
    for seq in (0, 1):
        peer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer=name))
    for _ in range(2):
        await peer.expect(T.SEND_RECEIPT)
    await peer.close()
    await consumer.close()
    await standalone.broker.registry.unload(TopicName.parse(topic))
    reloaded = await standalone.broker.registry.get(TopicName.parse(topic), create=False)
    assert reloaded is not loaded and reloaded.last_sequence_id("lazy") == 1


async def test_receipts_follow_send_order_under_pipelining(standalone: Standalone) -> None:
    topic = "persistent://public/default/ordered"
    peer = await WirePeer.connect(standalone.broker_port)
    name = await create_producer(peer, topic)
    for seq in range(200):
        peer.send(proto.commands.send(1, seq), entry(seq, b"x" * (seq % 7), producer=name))
    receipts = [(await peer.expect(T.SEND_RECEIPT)).command.send_receipt for _ in range(200)]
    assert [r.sequence_id for r in receipts] == list(range(200))
    positions = [(r.message_id.ledgerId, r.message_id.entryId) for r in receipts]
    assert positions == sorted(positions)
    await peer.close()


async def test_checksum_error_fails_only_that_message(standalone: Standalone) -> None:
    topic = "persistent://public/default/checksum"
    peer = await WirePeer.connect(standalone.broker_port)
    name = await create_producer(peer, topic)
    good = entry(0, b"good", producer=name)
    bad = bytearray(entry(1, b"bad!", producer=name))
    bad[-1] ^= 0xFF
    peer.send(proto.commands.send(1, 0), good)
    peer.send(proto.commands.send(1, 1), bytes(bad))
    peer.send(proto.commands.send(1, 2), entry(2, b"next", producer=name))
    replies = [(await peer.expect(T.SEND_RECEIPT, T.SEND_ERROR)).command for _ in range(3)]
    assert [r.type for r in replies] == [T.SEND_RECEIPT, T.SEND_ERROR, T.SEND_RECEIPT]
    assert replies[1].send_error.error == proto.pb.ChecksumError
    await peer.close()


async def test_dedup_state_is_rebuilt_after_an_unclean_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The broker dies without closing anything; a resend after restart is still recognised."""
    from magnetar.app.standalone import StandaloneSettings
    from magnetar.metadata.memory import MemoryMetadataStore
    from magnetar.storage.memory import MemoryLedgerStore

    metadata, store = MemoryMetadataStore(), MemoryLedgerStore()
    settings = StandaloneSettings(data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0)
    first = Standalone(settings, metadata=metadata, store=store)
    await first.start()
    topic = "persistent://public/default/dedup-crash"
    peer = await WirePeer.connect(first.broker_port)
    name = await create_producer(peer, topic, name="crashy")
    for seq in range(5):
        peer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer="crashy"))
    for _ in range(5):
        await peer.expect(T.SEND_RECEIPT)
    await peer.close()
    first.binary.servers[0].close()  # "crash": the stores keep what was written, nothing closed or flushed

    second = Standalone(settings, metadata=metadata, store=store)
    await second.start()
    try:
        peer = await WirePeer.connect(second.broker_port)
        peer.send(proto.commands.producer(topic, 1, 1, producer_name=name, epoch=1))
        success = (await peer.expect(T.PRODUCER_SUCCESS)).command.producer_success
        assert success.last_sequence_id == 4
        peer.send(proto.commands.send(1, 3), entry(3, b"m3", producer=name))
        receipt = (await peer.expect(T.SEND_RECEIPT)).command.send_receipt
        assert proto.ids.signed(receipt.message_id.entryId) == -1
        assert second.broker.registry.loaded[topic].ledger.number_of_entries() == 5
        await peer.close()
    finally:
        await second.stop()


async def test_absurd_flow_permits_and_unknown_acks_are_harmless(standalone: Standalone) -> None:
    topic = "persistent://public/default/absurd"
    peer = await WirePeer.connect(standalone.broker_port)
    peer.send(proto.commands.subscribe(topic, "sub", 0, 7, 2, initial_position=1))
    await peer.expect(T.SUCCESS)
    peer.send(proto.commands.flow(7, 2**32 - 1))
    peer.send(proto.commands.ack(7, [proto.ids.message_id(123456, 99)]))
    peer.send(proto.commands.ack(7, [proto.ids.message_id(-1, -1)], proto.pb.CommandAck.Cumulative))
    peer.send(proto.commands.redeliver(7, [proto.ids.message_id(5, 5)]))
    peer.send(proto.commands.flow(99, 10))  # a consumer id this connection never created
    name = await create_producer(peer, topic)
    peer.send(proto.commands.send(1, 0), entry(0, b"still-works", producer=name))
    frame = await peer.expect(T.SEND_RECEIPT, T.MESSAGE)
    frames = [frame, await peer.expect(T.SEND_RECEIPT, T.MESSAGE)]
    message = next(f for f in frames if f.command.type == T.MESSAGE)
    assert bytes(proto.entry_payload(bytes(message.payload or b""))) == b"still-works"
    consumer = standalone.broker.registry.loaded[topic].subscriptions["sub"].consumers[0]
    assert consumer.permits <= standalone.broker.config.max_consumer_permits
    await peer.close()


async def test_failover_announces_the_active_consumer_and_hands_over(standalone: Standalone) -> None:
    topic = "persistent://public/default/failover-wire"
    peer = await WirePeer.connect(standalone.broker_port)
    for consumer_id, name in ((1, "b"), (2, "a")):
        peer.send(proto.commands.subscribe(topic, "sub", 2, consumer_id, 10 + consumer_id, consumer_name=name))
        await peer.expect(T.SUCCESS, T.ACTIVE_CONSUMER_CHANGE)
    changes: dict[int, bool] = {}
    for _ in range(10):  # the SUCCESS replies and the changes interleave; collect until settled (bounded)
        frame = await peer.expect(T.ACTIVE_CONSUMER_CHANGE, T.SUCCESS)
        if frame.command.type == T.ACTIVE_CONSUMER_CHANGE:
            changes[frame.command.active_consumer_change.consumer_id] = frame.command.active_consumer_change.is_active
        if changes.get(2) is True and changes.get(1) is False:
            break
    assert changes == {1: False, 2: True}, "consumer 'a' sorts first and becomes active"
    peer.send(proto.commands.close_consumer(2, 20))
    frames = [await peer.expect(T.SUCCESS, T.ACTIVE_CONSUMER_CHANGE) for _ in range(2)]
    handed_over = [f.command.active_consumer_change for f in frames if f.command.type == T.ACTIVE_CONSUMER_CHANGE]
    assert [(c.consumer_id, c.is_active) for c in handed_over] == [(1, True)]
    sub = standalone.broker.registry.loaded[topic].subscriptions["sub"]
    assert sub.dispatcher is not None and sub.dispatcher.active_consumer is not None
    assert sub.dispatcher.active_consumer.name == "b"
    await peer.close()


async def test_failover_spreads_partitions_over_consumers(standalone: Standalone) -> None:
    base = "persistent://public/default/failover-parts"
    peer = await WirePeer.connect(standalone.broker_port)
    consumer_id = 0
    for partition in range(4):
        for name in ("a", "b"):
            consumer_id += 1
            topic = f"{base}-partition-{partition}"
            peer.send(proto.commands.subscribe(topic, "sub", 2, consumer_id, 100 + consumer_id, consumer_name=name))
    active = {}
    for partition in range(4):
        topic = standalone.broker.registry.loaded.get(f"{base}-partition-{partition}")
        for _ in range(200):  # wait (bounded) until both consumers of the partition are attached
            if topic is not None and len(topic.subscriptions["sub"].consumers) == 2:
                break
            await peer.expect(T.SUCCESS, T.ACTIVE_CONSUMER_CHANGE)
            topic = standalone.broker.registry.loaded.get(f"{base}-partition-{partition}")
        assert topic is not None
        dispatcher = topic.subscriptions["sub"].dispatcher
        assert dispatcher is not None and dispatcher.active_consumer is not None
        active[partition] = dispatcher.active_consumer.name
    assert active == {0: "a", 1: "b", 2: "a", 3: "b"}
    await peer.close()
