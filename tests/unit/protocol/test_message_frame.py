"""MessageFrames writes the bytes protobuf would, for every id, partition and entry."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from magnetar.protocol import commands, encode_payload_command
from magnetar.protocol.frames import FrameDecoder
from magnetar.protocol.message_frame import MessageFrames, varint

I64 = st.integers(min_value=-1, max_value=2**63 - 1)
U64 = st.integers(min_value=0, max_value=2**64 - 1)
PARTITION = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(consumer_id=U64, partition=PARTITION, ledger_id=I64, entry_id=I64, entry=st.binary(max_size=64))
def test_frame_is_byte_identical_to_protobuf(
    consumer_id: int, partition: int, ledger_id: int, entry_id: int, entry: bytes
) -> None:
    frames = MessageFrames(consumer_id, partition)
    expected = encode_payload_command(commands.message(consumer_id, ledger_id, entry_id, partition), entry)
    assert frames.frame(ledger_id, entry_id, entry) == expected
    assert frames.frame(ledger_id, entry_id + 1, entry) == encode_payload_command(
        commands.message(consumer_id, ledger_id, entry_id + 1, partition), entry
    )  # the cached ledger id field is reused, the entry id is not


@given(redelivery=st.integers(min_value=0, max_value=2**32 - 1),
       ack_set=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3))
def test_redelivery_count_and_ack_set_are_carried(redelivery: int, ack_set: list[int]) -> None:
    frames = MessageFrames(7, 2)
    expected = encode_payload_command(
        commands.message(7, 5, 9, 2, redelivery_count=redelivery, ack_set=ack_set), b"entry"
    )
    assert frames.frame(5, 9, b"entry", redelivery, ack_set) == expected


def test_frame_decodes_as_a_message_command() -> None:
    decoder = FrameDecoder(1 << 20)
    decoder.feed(MessageFrames(3, -1).frame(12, 300, b"stored entry"))
    frame = decoder.next_frame()
    assert frame is not None
    msg = frame.command.message
    assert (msg.consumer_id, msg.message_id.ledgerId, msg.message_id.entryId, msg.message_id.partition) == (
        3, 12, 300, -1)
    assert frame.payload is not None and bytes(frame.payload) == b"stored entry"


@given(U64)
def test_varint_round_trips(value: int) -> None:
    raw = varint(value)
    decoded = sum((b & 0x7F) << (7 * i) for i, b in enumerate(raw))
    assert decoded == value
    assert all(b & 0x80 for b in raw[:-1]) and not raw[-1] & 0x80


def test_header_is_the_frame_without_the_entry() -> None:
    frames = MessageFrames(9, 1)
    for redelivery, ack_set in [(0, None), (2, None), (0, [5])]:
        frame = frames.frame(4, 77, b"payload", redelivery, ack_set)
        assert frames.header(4, 77, len(b"payload"), redelivery, ack_set) + b"payload" == frame
