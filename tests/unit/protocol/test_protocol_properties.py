"""Property tests: hostile bytes raise only ProtocolError subclasses; valid commands round-trip."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.protocol import (
    FrameDecoder,
    ProtocolError,
    commands,
    crc32c,
    decompress,
    encode_command,
    encode_payload_command,
    make_entry,
    parse_send_payload,
    pb,
    split_batch,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 64 * 1024

u64 = st.integers(min_value=0, max_value=2**64 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
text = st.text(max_size=20)


def drain(decoder: FrameDecoder) -> int:
    for count in range(10_000):  # bounded: no input here holds more frames than this
        if decoder.next_frame() is None:
            return count
    raise AssertionError("decoder produced too many frames")


def sized(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


# Bytes that look like frames more often than uniform noise does.
frame_like = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=120).map(sized),
    st.tuples(st.binary(max_size=60), st.binary(max_size=60)).map(lambda p: sized(sized(p[0]) + p[1])),
)


@SETTINGS
@given(chunks=st.lists(frame_like, max_size=6), split=st.integers(min_value=1, max_value=50))
def test_decoder_raises_only_protocol_errors(chunks: list[bytes], split: int) -> None:
    decoder = FrameDecoder(LIMIT)
    data = b"".join(chunks)
    try:
        for start in range(0, len(data), split):
            decoder.feed(data[start : start + split])
            drain(decoder)
            assert decoder.buffered_bytes <= LIMIT + 4
    except ProtocolError:
        pass


payload_like = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=100).map(lambda b: b"\x0e\x01" + struct.pack(">I", crc32c(b)) + b),
    st.binary(max_size=100).map(lambda b: b"\x0e\x02" + b),
    st.binary(max_size=100).map(sized),
)


@SETTINGS
@given(payload=payload_like)
def test_parse_send_payload_raises_only_protocol_errors(payload: bytes) -> None:
    try:
        parsed = parse_send_payload(memoryview(payload))
    except ProtocolError:
        return
    assert parsed.entry[:2] == b"\x0e\x01"


@SETTINGS
@given(payload=st.binary(max_size=300), count=st.integers(min_value=-2, max_value=20))
def test_split_batch_raises_only_protocol_errors(payload: bytes, count: int) -> None:
    try:
        parts = split_batch(payload, count)
    except ProtocolError:
        return
    assert len(parts) == count


@SETTINGS
@given(
    codec=st.integers(min_value=-1, max_value=6),
    data=st.binary(max_size=300),
    size=st.integers(min_value=-5, max_value=5000),
)
def test_decompress_raises_only_protocol_errors(codec: int, data: bytes, size: int) -> None:
    try:
        out = decompress(codec, data, size, 4096)
    except ProtocolError:
        return
    assert len(out) <= 4096


ids_strategy = st.builds(
    lambda ledger, entry, partition: pb.MessageIdData(ledgerId=ledger, entryId=entry, partition=partition),
    u64,
    u64,
    i32,
)

valid_commands = st.one_of(
    st.builds(commands.connected, text, i32, st.none() | i32),
    st.builds(commands.error, u64, st.integers(0, 25), text),
    st.builds(commands.success, u64),
    st.builds(commands.producer_success, u64, text, i64, st.none() | u64, st.booleans()),
    st.builds(commands.send_receipt, u64, u64, i64, i64, st.none() | u64),
    st.builds(commands.send_error, u64, u64, st.integers(0, 25), text),
    st.builds(commands.close_producer, u64, i64),
    st.builds(commands.close_consumer, u64, i64),
    st.builds(commands.flow, u64, st.integers(0, 2**32 - 1)),
    st.builds(commands.ack, u64, st.lists(ids_strategy, max_size=4), st.integers(0, 1)),
    st.builds(commands.redeliver, u64, st.lists(ids_strategy, max_size=4)),
    st.builds(commands.partitioned_metadata_response, u64, st.integers(0, 2**32 - 1)),
    st.builds(commands.lookup_response, u64, text, st.booleans()),
    st.builds(commands.get_topics_of_namespace_response, u64, st.lists(text, max_size=5)),
    st.builds(commands.producer, text, u64, u64, producer_name=st.none() | text, epoch=u64),
    st.builds(commands.subscribe, text, text, st.integers(0, 3), u64, u64, consumer_name=text),
    st.builds(commands.active_consumer_change, u64, st.booleans()),
    st.builds(commands.ping),
    st.builds(commands.pong),
)


@SETTINGS
@given(cmds=st.lists(valid_commands, min_size=1, max_size=5), split=st.integers(min_value=1, max_value=64))
def test_valid_commands_round_trip(cmds: list[pb.BaseCommand], split: int) -> None:
    wire = b"".join(encode_command(c) for c in cmds)
    decoder = FrameDecoder(LIMIT)
    got: list[pb.BaseCommand] = []
    for start in range(0, len(wire), split):
        decoder.feed(wire[start : start + split])
        while (frame := decoder.next_frame()) is not None:
            got.append(frame.command)
    assert got == cmds


@SETTINGS
@given(seq=u64, body=st.binary(max_size=500), key=text, split=st.integers(min_value=1, max_value=97))
def test_send_frames_round_trip(seq: int, body: bytes, key: str, split: int) -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1, partition_key=key)
    entry = make_entry(meta, body)
    wire = encode_payload_command(commands.send(1, seq), entry)
    decoder = FrameDecoder(LIMIT)
    frames = []
    for start in range(0, len(wire), split):
        decoder.feed(wire[start : start + split])
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    (frame,) = frames
    assert frame.payload is not None
    parsed = parse_send_payload(frame.payload)
    assert parsed.entry == entry and parsed.metadata == meta
