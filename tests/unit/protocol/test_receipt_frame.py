"""send_receipt_frame writes the bytes protobuf would, and they decode as the receipt sent."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from magnetar.protocol import commands, encode_command
from magnetar.protocol.frames import FrameDecoder
from magnetar.protocol.receipt_frame import send_receipt_frame

I64 = st.integers(min_value=-1, max_value=2**63 - 1)
U64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(producer_id=U64, sequence_id=U64, ledger_id=I64, entry_id=I64, highest=st.none() | U64)
def test_receipt_is_byte_identical_to_protobuf(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest: int | None
) -> None:
    expected = encode_command(commands.send_receipt(producer_id, sequence_id, ledger_id, entry_id, highest))
    assert send_receipt_frame(producer_id, sequence_id, ledger_id, entry_id, highest) == expected


def test_receipt_decodes_as_the_receipt_sent() -> None:
    decoder = FrameDecoder(1 << 20)
    decoder.feed(send_receipt_frame(3, 41, 12, 7, 44))
    frame = decoder.next_frame()
    assert frame is not None and frame.payload is None
    receipt = frame.command.send_receipt
    assert (receipt.producer_id, receipt.sequence_id, receipt.highest_sequence_id) == (3, 41, 44)
    assert (receipt.message_id.ledgerId, receipt.message_id.entryId) == (12, 7)
    assert decoder.next_frame() is None
