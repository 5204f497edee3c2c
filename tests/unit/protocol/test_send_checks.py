"""The SEND metadata checks: what an honest producer sends passes, contradictions are refused."""

from __future__ import annotations

import pytest

from magnetar import protocol as proto
from magnetar.broker.subscription.key_shared import sticky_key
from magnetar.protocol import pb
from magnetar.protocol.errors import InvalidMessageMetadata
from magnetar.protocol.send_checks import check_text

LIMITS = {"max_message_size": 5 * 1024 * 1024, "chunked_message_bytes_max": 64 * 1024 * 1024}


def check(meta: pb.MessageMetadata, num_messages: int, payload_bytes: int) -> None:
    proto.check_send_metadata(meta, num_messages=num_messages, payload_bytes=payload_bytes, **LIMITS)


def batch(count: int, **fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=count,
                              **fields)  # type: ignore[arg-type]


def chunk(chunk_id: int, chunks: int, total: int, uuid: str | None = "p-0") -> pb.MessageMetadata:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, chunk_id=chunk_id,
                              num_chunks_from_msg=chunks, total_chunk_msg_size=total)
    if uuid is not None:
        meta.uuid = uuid
    return meta


def test_honest_messages_pass() -> None:
    check(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), 1, 0)
    check(batch(3), 3, 3 * 6)
    real = proto.build_batch([(pb.SingleMessageMetadata(payload_size=0), b"")] * 5)
    check(batch(5), 5, len(real))
    check(batch(100, compression=pb.LZ4, uncompressed_size=4096), 100, 50)
    check(chunk(0, 3, 10), 1, 4)
    check(chunk(2, 3, 10), 1, 2)


@pytest.mark.parametrize(
    ("meta", "num_messages", "payload_bytes", "words"),
    [
        (pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), -5, 10, "at least 1"),
        (batch(2**31 - 1), 1, 40, "disagrees"),
        (batch(2**31 - 1), 2**31 - 1, 40, "cannot fit"),
        (batch(0), 0, 40, "at least 1"),
        (batch(-3), 1, 40, "at least 1"),
        (batch(1000, compression=pb.ZLIB, uncompressed_size=2**31), 1000, 40, "exceeds"),
        (batch(1000, compression=pb.ZLIB, uncompressed_size=100), 1000, 40, "cannot fit"),
        (chunk(0, 2**31 - 1, 10), 1, 4, "num_chunks_from_msg"),
        (chunk(5, 3, 10), 1, 4, "chunk_id"),
        (chunk(-1, 3, 10), 1, 4, "chunk_id"),
        (chunk(0, 3, 2**31 - 1), 1, 4, "total_chunk_msg_size"),
        (chunk(0, 3, 0), 1, 0, "total_chunk_msg_size"),
        (chunk(0, 3, 10, uuid=None), 1, 4, "uuid"),
        (chunk(0, 3, 10), 1, 11, "exceeds"),
    ],
)
def test_contradictions_are_refused(meta: pb.MessageMetadata, num_messages: int, payload_bytes: int,
                                    words: str) -> None:
    with pytest.raises(proto.InvalidMessageMetadata, match=words):
        check(meta, num_messages, payload_bytes)


def test_text_fields_must_be_utf8_nested_and_repeated_ones_too() -> None:
    good = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, partition_key="k",
                              properties=[pb.KeyValue(key="a", value="b")], replicate_to=["c"])
    check_text(good)
    for raw in (b"\x32\x01\xff",  # partition_key
                b"\x3a\x01\xff",  # replicate_to (repeated)
                b"\x22\x06\x0a\x01a\x12\x01\xff"):  # a property's value (a nested message)
        bad = pb.MessageMetadata()
        bad.ParseFromString(good.SerializeToString() + raw)
        with pytest.raises(InvalidMessageMetadata, match="not valid UTF-8"):
            check_text(bad)
    keyed = pb.MessageMetadata()
    keyed.ParseFromString(b"\x32\x02\xff\xfe")
    assert sticky_key(keyed) == b"\xff\xfe"  # an entry stored before SENDs were checked still hashes
