"""Frame codec: golden bytes, incremental decoding, limits, malformed input."""

from __future__ import annotations

import struct

import pytest

from magnetar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING_BYTES,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    encode_command,
    encode_payload_command,
    max_frame_bytes_for,
    pb,
)

T = pb.BaseCommand
LIMIT = max_frame_bytes_for(DEFAULT_MAX_MESSAGE_SIZE)

CLOSE_PRODUCER_GOLDEN = bytes.fromhex("0000000c00000008080f7a0408001001")
PING_GOLDEN = bytes.fromhex("00000009000000050812920100")


def close_producer() -> pb.BaseCommand:
    return T(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=0, request_id=1))


def ping() -> pb.BaseCommand:
    return T(type=T.PING, ping=pb.CommandPing())


def decode_all(data: bytes, limit: int = LIMIT) -> list[Frame]:
    decoder = FrameDecoder(limit)
    decoder.feed(data)
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    assert decoder.buffered_bytes == 0
    return frames


def test_constants() -> None:
    assert DEFAULT_MAX_MESSAGE_SIZE == 5 * 1024 * 1024
    assert FRAME_PADDING_BYTES == 10 * 1024
    assert max_frame_bytes_for(2048) == 2048 + 10240


def test_golden_close_producer() -> None:
    assert encode_command(close_producer()) == CLOSE_PRODUCER_GOLDEN
    (frame,) = decode_all(CLOSE_PRODUCER_GOLDEN)
    assert frame == Frame(close_producer(), None)


def test_golden_ping() -> None:
    assert encode_command(ping()) == PING_GOLDEN
    (frame,) = decode_all(PING_GOLDEN)
    assert frame.command.type == T.PING and frame.command.HasField("ping")
    assert frame.payload is None


def test_several_frames_in_one_chunk() -> None:
    frames = decode_all(PING_GOLDEN + CLOSE_PRODUCER_GOLDEN + PING_GOLDEN)
    assert [f.command.type for f in frames] == [T.PING, T.CLOSE_PRODUCER, T.PING]


def test_one_byte_at_a_time() -> None:
    send = T(type=T.SEND, send=pb.CommandSend(producer_id=3, sequence_id=9))
    wire = encode_payload_command(send, b"\x0e\x01entrybytes") + PING_GOLDEN + CLOSE_PRODUCER_GOLDEN
    decoder = FrameDecoder(LIMIT)
    frames: list[Frame] = []
    for i in range(len(wire)):
        decoder.feed(wire[i : i + 1])
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    assert [f.command.type for f in frames] == [T.SEND, T.PING, T.CLOSE_PRODUCER]
    assert frames[0].command == send
    assert frames[0].payload is not None and bytes(frames[0].payload) == b"\x0e\x01entrybytes"
    assert decoder.buffered_bytes == 0


def test_oversize_rejected_on_header_before_body() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(b"\x00\x00")
    assert decoder.next_frame() is None
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">H", 101))
    assert info.value.frame_bytes == 101 and info.value.frame_bytes_max == 100
    assert decoder.buffered_bytes == 4  # nothing of the body was waited for


def test_oversize_in_later_frame_of_a_chunk() -> None:
    decoder = FrameDecoder(100)
    decoder.feed(PING_GOLDEN + struct.pack(">I", 10_000))
    assert decoder.next_frame() is not None
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()


def test_frame_at_exact_limit_is_accepted() -> None:
    send = T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=2))
    wire = encode_payload_command(send, b"x" * 50)
    limit = struct.unpack(">I", wire[:4])[0]
    assert len(decode_all(wire, limit)) == 1
    with pytest.raises(FrameTooLarge):
        decode_all(wire, limit - 1)


def test_undersize_frame_rejected() -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder(LIMIT).feed(b"\x00\x00\x00\x03")


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x00\x09\x08\x12\x92\x01\x00",  # command size beyond the frame
        b"\x00\x00\x00\x02\xff\xff",  # not protobuf
        b"\x00\x00\x00\x02\x08\x12",  # PING without its sub-message
        b"\x00\x00\x00\x03\x92\x01\x00",  # sub-message but no type
        b"\x00\x00\x00\x04\x7a\x02\x08\x00",  # CLOSE_PRODUCER body lacks type
        b"\x00\x00\x00\x06\x08\x0f\x7a\x02\x08\x00",  # close_producer missing request_id
        b"\x00\x00\x00\x05\x08\x12\x92\x01\x00\xaa",  # trailing bytes after a PING
    ],
)
def test_malformed_frames(body: bytes) -> None:
    with pytest.raises(MalformedFrame):
        decode_all(struct.pack(">I", len(body)) + body)


def test_send_without_payload_is_malformed() -> None:
    send = T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=2))
    with pytest.raises(MalformedFrame):
        decode_all(encode_command(send))


def test_encode_rejects_incomplete_command() -> None:
    with pytest.raises(LocalProtocolError):
        encode_command(T(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=1)))


def test_encode_payload_rejects_non_payload_command() -> None:
    with pytest.raises(LocalProtocolError):
        encode_payload_command(ping(), b"\x0e\x01")


def test_feed_requires_draining() -> None:
    decoder = FrameDecoder(LIMIT)
    decoder.feed(PING_GOLDEN)
    with pytest.raises(LocalProtocolError):
        decoder.feed(PING_GOLDEN)
    assert decoder.next_frame() is not None
    decoder.feed(PING_GOLDEN)
    assert decoder.next_frame() is not None


def test_payload_frame_split_across_chunks() -> None:
    message = T(
        type=T.MESSAGE,
        message=pb.CommandMessage(consumer_id=1, message_id=pb.MessageIdData(ledgerId=4, entryId=5)),
    )
    entry = bytes(range(256)) * 40
    wire = encode_payload_command(message, entry)
    decoder = FrameDecoder(LIMIT)
    frames = []
    for start in range(0, len(wire), 333):
        decoder.feed(wire[start : start + 333])
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    (frame,) = frames
    assert frame.command == message
    assert frame.payload is not None and frame.payload.tobytes() == entry
