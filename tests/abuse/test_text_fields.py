"""Text fields that are not UTF-8 (issue 36 item 6).

The protobuf runtime hands a ``string`` field holding invalid UTF-8 back as bytes. A partition key like
that stalled a Key_Shared subscription for ever (its dispatcher failed hashing the key on every retry) and
made ``examinemessage`` answer 500. A SEND whose text fields are not UTF-8 is refused before it is stored.
"""

from __future__ import annotations

import pulsar

from magnetar import protocol as proto
from tests.abuse.conftest import create_producer, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

NOT_UTF8 = b"\xff\xfe"


def with_bad_text(seq: int, field_number: int) -> bytes:
    """An entry whose MessageMetadata carries ``NOT_UTF8`` in the string field ``field_number``."""
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1000 + seq)
    raw = meta.SerializeToString() + bytes([field_number << 3 | 2, len(NOT_UTF8)]) + NOT_UTF8
    bad = proto.pb.MessageMetadata()
    bad.ParseFromString(raw)
    return proto.make_entry(bad, b"bad")


def keyed(seq: int, key: str) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1000 + seq, partition_key=key)
    return proto.make_entry(meta, f"good-{key}".encode())


async def test_a_key_that_is_not_utf8_is_refused_and_key_shared_keeps_going(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('not-utf8')}"
    client = make_client(broker.url)
    peer = await WirePeer.connect(broker.port)
    try:
        consumer = client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared)
        assert (await create_producer(peer, topic, producer_name="p")).command.type == T.PRODUCER_SUCCESS
        peer.send(proto.commands.send(1, 0), keyed(0, "a"))
        assert (await peer.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id == 0
        for seq, field in ((1, 6), (2, 7), (3, 1)):  # partition_key, replicate_to, producer_name
            peer.send(proto.commands.send(1, seq), with_bad_text(seq, field))
            refused = (await peer.expect(T.SEND_ERROR)).command.send_error
            assert refused.sequence_id == seq and refused.error == proto.pb.NotAllowedError, refused
            assert "not valid UTF-8" in refused.message
        peer.send(proto.commands.send(1, 4), keyed(4, "b"))
        assert (await peer.expect(T.SEND_RECEIPT)).command.send_receipt.sequence_id == 4
        received = sorted(consumer.receive(10_000).data() for _ in range(2))
        assert received == [b"good-a", b"good-b"]
    finally:
        await peer.close()
        client.close()
