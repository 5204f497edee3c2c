"""The schema's numbers equal Pulsar's (facts §1-§7, §11), and the builders' wire shapes."""

from __future__ import annotations

import pytest

from magnetar.protocol import commands, encode_command, encode_payload_command, markers_pb, pb
from magnetar.protocol.frames import FrameDecoder, max_frame_bytes_for

T = pb.BaseCommand


def number(message: type, field: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[field].number)  # type: ignore[attr-defined]


def test_every_type_has_its_sub_message_at_the_same_number() -> None:
    values = {v.number for v in T.DESCRIPTOR.enum_types_by_name["Type"].values}
    assert values == set(range(2, 41)) | set(range(50, 69))
    for value in values:
        field = T.DESCRIPTOR.fields_by_number[value]
        assert field.message_type is not None, value
    assert number(T, "type") == 1
    assert T.DESCRIPTOR.fields_by_number[23].name == "lookupTopic"
    assert T.DESCRIPTOR.fields_by_number[21].name == "partitionMetadata"


@pytest.mark.parametrize(
    ("message", "field", "expected"),
    [
        (pb.MessageMetadata, "marker_type", 20),
        (pb.MessageMetadata, "num_messages_in_batch", 11),
        (pb.MessageMetadata, "uncompressed_size", 9),
        (pb.MessageMetadata, "txnid_most_bits", 23),
        (pb.MessageMetadata, "chunk_id", 29),
        (pb.MessageMetadata, "null_partition_key", 30),
        (pb.SingleMessageMetadata, "payload_size", 3),
        (pb.SingleMessageMetadata, "sequence_id", 8),
        (pb.MessageIdData, "first_chunk_message_id", 7),
        (pb.CommandSend, "is_chunk", 7),
        (pb.CommandSend, "marker", 8),
        (pb.CommandMessage, "ack_set", 4),
        (pb.CommandAck, "request_id", 8),
        (pb.CommandSubscribe, "keySharedMeta", 17),
        (pb.CommandSubscribe, "start_message_id", 9),
        (pb.CommandProducer, "producer_access_mode", 10),
        (pb.CommandProducerSuccess, "producer_ready", 6),
        (pb.CommandConnect, "feature_flags", 10),
        (pb.CommandConnect, "auth_method_name", 5),
        (pb.CommandLookupTopic, "advertised_listener_name", 7),
        (pb.CommandLookupTopicResponse, "request_id", 4),
        (pb.CommandPartitionedTopicMetadataResponse, "response", 3),
        (pb.CommandConsumerStats, "consumer_id", 4),
        (pb.CommandEndTxnOnPartition, "txnid_least_bits_of_low_watermark", 6),
        (pb.KeySharedMeta, "hashRanges", 3),
        (pb.FeatureFlags, "supports_topic_watchers", 4),
        (pb.BrokerEntryMetadata, "index", 2),
        (pb.Schema, "type", 4),
        (markers_pb.ClusterMessageId, "message_id", 2),
        (markers_pb.ReplicatedSubscriptionsSnapshot, "clusters", 3),
    ],
)
def test_field_numbers(message: type, field: str, expected: int) -> None:
    assert number(message, field) == expected


def test_enum_values() -> None:
    assert [pb.ServerError.Value(n) for n in ("UnknownError", "ChecksumError", "ProducerFenced")] == [0, 9, 25]
    assert len(pb.ServerError.keys()) == 26
    assert pb.ProtocolVersion.Value("v21") == 21 and len(pb.ProtocolVersion.keys()) == 22
    assert (pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY) == (0, 1, 2, 3, 4)
    assert (pb.Shared, pb.Exclusive, pb.WaitForExclusive, pb.ExclusiveWithFencing) == (0, 1, 2, 3)
    assert (pb.COMMIT, pb.ABORT) == (0, 1)
    assert pb.CommandSubscribe.Key_Shared == 3 and pb.CommandSubscribe.Earliest == 1
    assert pb.CommandLookupTopicResponse.Failed == 2
    assert pb.CommandAck.ChecksumMismatch == 2
    assert pb.Schema.ProtobufNative == 20
    assert [markers_pb.TXN_COMMITTING, markers_pb.TXN_COMMIT, markers_pb.TXN_ABORT] == [20, 21, 22]
    assert markers_pb.REPLICATED_SUBSCRIPTION_UPDATE == 13


def test_defaults_match_pulsar() -> None:
    assert pb.MessageIdData(ledgerId=1, entryId=2).partition == -1
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandProducerSuccess().producer_ready is True
    assert pb.CommandSubscribe().durable is True
    assert pb.MessageMetadata().num_messages_in_batch == 1


def decode(cmd: pb.BaseCommand) -> pb.BaseCommand:
    decoder = FrameDecoder(max_frame_bytes_for(1 << 20))
    payload_types = (T.SEND, T.MESSAGE)
    decoder.feed(encode_payload_command(cmd, b"\x0e\x01") if cmd.type in payload_types else encode_command(cmd))
    frame = decoder.next_frame()
    assert frame is not None
    return frame.command


ALL_BUILT = [
    commands.connect(),
    commands.connected("magnetar", 20, 5242880),
    commands.ping(),
    commands.pong(),
    commands.error(1, pb.TopicNotFound, "nope"),
    commands.success(2),
    commands.producer_success(3, "standalone-0-1", -1, topic_epoch=1, producer_ready=False),
    commands.send_receipt(0, 5, 101, 0),
    commands.send_receipt(0, 5, -1, -1, highest_sequence_id=7),
    commands.send_error(0, 5, pb.ChecksumError, "bad crc"),
    commands.message(1, 101, 2, -1, redelivery_count=2, ack_set=[3]),
    commands.close_producer(0, -1),
    commands.close_consumer(4, 9),
    commands.active_consumer_change(1, True),
    commands.partitioned_metadata_response(1, 3),
    commands.partitioned_metadata_failure(1, pb.TopicNotFound, "missing"),
    commands.lookup_response(2, "pulsar://localhost:6650"),
    commands.lookup_failure(2, pb.ServiceNotReady, "later"),
    commands.get_last_message_id_response(3, pb.MessageIdData(ledgerId=1, entryId=2, partition=0)),
    commands.get_topics_of_namespace_response(4, ["persistent://public/default/a"]),
    commands.get_schema_response_error(5, pb.TopicNotFound, "no schema"),
    commands.ack_response(1, 2),
    commands.producer("persistent://public/default/t", 0, 1, metadata={"a": "b"}),
    commands.subscribe("t", "s", pb.CommandSubscribe.Shared, 1, 2, consumer_name="c"),
    commands.flow(1, 1000),
    commands.ack(1, [pb.MessageIdData(ledgerId=1, entryId=2)], pb.CommandAck.Cumulative),
    commands.redeliver(1),
    commands.seek(1, 2, publish_time_ms=123),
    commands.seek(1, 2, message_id=pb.MessageIdData(ledgerId=1, entryId=2)),
    commands.unsubscribe(1, 2),
    commands.lookup("t", 1),
    commands.partitioned_metadata("t", 1),
    commands.get_last_message_id(1, 2),
    commands.get_topics_of_namespace(1, "public/default"),
    commands.send(0, 1, num_messages=3),
]


@pytest.mark.parametrize("cmd", ALL_BUILT, ids=lambda c: T.Type.Name(c.type))
def test_builders_round_trip(cmd: pb.BaseCommand) -> None:
    assert cmd.IsInitialized()
    assert decode(cmd) == cmd


def test_builder_wire_shapes() -> None:
    assert commands.close_producer(0, 1) == pb.BaseCommand(
        type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=0, request_id=1)
    )
    msg = commands.message(1, 101, 2, -1).message
    assert not msg.HasField("redelivery_count") and not msg.ack_set
    assert msg.message_id.partition == -1 and not msg.message_id.HasField("batch_index")
    send = commands.send(0, 1).send
    assert not send.HasField("num_messages") and not send.HasField("is_chunk")
    assert commands.send(0, 1, is_chunk=True).send.is_chunk
    pm = commands.partitioned_metadata_response(1, 0).partitionMetadataResponse
    assert pm.HasField("response") and pm.response == 0 and pm.partitions == 0
    lr = commands.lookup_response(2, "pulsar://h:6650").lookupTopicResponse
    assert lr.response == pb.CommandLookupTopicResponse.Connect and lr.authoritative
    ps = commands.producer_success(1, "n", 5).producer_success
    assert ps.producer_ready and not ps.HasField("topic_epoch")
    receipt = commands.send_receipt(0, 1, -1, -1).send_receipt.message_id
    assert (receipt.ledgerId, receipt.entryId) == (2**64 - 1, 2**64 - 1)
    with pytest.raises(ValueError):
        commands.seek(1, 2)
