"""Batch and chunk metadata are checked at SEND (issue item 14, and item 15's negative num_messages).

A lying batch or chunk header used to be receipted and then crash every official consumer of the
subscription on each reconnect; now the SEND is refused and consumers read only honest messages.
"""

from __future__ import annotations

import random

import pulsar

from magnetar import protocol as proto
from magnetar.protocol import pb
from tests.abuse.conftest import create_producer, unique
from tests.component.wire import T, WirePeer
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

INT32_MAX = 2**31 - 1


def _meta(seq: int, **fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="liar", sequence_id=seq, publish_time=1000 + seq,
                              **fields)  # type: ignore[arg-type]


def _one_message_batch(body: bytes) -> bytes:
    return proto.build_batch([(pb.SingleMessageMetadata(payload_size=len(body)), body)])


async def test_lying_batch_and_chunk_headers_are_refused(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/{unique('liar')}"
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "victim", consumer_type=pulsar.ConsumerType.Shared)
        peer = await WirePeer.connect(broker.port)
        assert (await create_producer(peer, topic, producer_name="liar")).command.type == T.PRODUCER_SUCCESS
        lies = [
            (proto.commands.send(1, 0, num_messages=INT32_MAX),
             _meta(0, num_messages_in_batch=INT32_MAX), _one_message_batch(b"x")),
            (proto.commands.send(1, 1, num_messages=1),
             _meta(1, num_messages_in_batch=INT32_MAX), _one_message_batch(b"x")),
            (proto.commands.send(1, 2, num_messages=-7), _meta(2), b"negative"),
            (proto.commands.send(1, 3, is_chunk=True),
             _meta(3, uuid="liar-3", chunk_id=0, num_chunks_from_msg=INT32_MAX, total_chunk_msg_size=INT32_MAX),
             b"chunk"),
            (proto.commands.send(1, 4, is_chunk=True),
             _meta(4, uuid="liar-4", chunk_id=9, num_chunks_from_msg=2, total_chunk_msg_size=10), b"chunk"),
        ]
        honest = (proto.commands.send(1, 5, num_messages=1), _meta(5, num_messages_in_batch=1),
                  _one_message_batch(b"honest"))
        for cmd, meta, body in [*lies, honest]:
            peer.send(cmd, proto.make_entry(meta, body))
        replies = [(await peer.expect(T.SEND_RECEIPT, T.SEND_ERROR)).command for _ in range(len(lies) + 1)]
        assert [r.type for r in replies] == [T.SEND_ERROR] * len(lies) + [T.SEND_RECEIPT]
        assert all("Invalid message" in r.send_error.message for r in replies[:-1])
        await peer.close()

        message = consumer.receive(10_000)
        assert message.data() == b"honest"
        consumer.acknowledge(message)
    finally:
        client.close()


def test_official_batches_and_chunks_still_pass(broker: BrokerProcess) -> None:
    topic = unique("honest")
    client = make_client(broker.url)
    try:
        consumer = client.subscribe(topic, "s")
        batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                         compression_type=pulsar.CompressionType.LZ4)
        for i in range(100):
            batched.send_async(b"b%d" % i, None)
        batched.flush()
        chunked = client.create_producer(topic, batching_enabled=False, chunking_enabled=True,
                                         compression_type=pulsar.CompressionType.ZLib)
        big = random.Random(24).randbytes(7 * 1024 * 1024)  # incompressible, above maxMessageSize: chunked
        chunked.send(big)
        got = [consumer.receive(10_000).data() for _ in range(101)]
        assert got[:100] == [b"b%d" % i for i in range(100)] and got[100] == big
    finally:
        client.close()
