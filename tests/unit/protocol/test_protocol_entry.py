"""Entries and SEND payloads: checksums, normalisation, broker entry metadata, bad sizes."""

from __future__ import annotations

import struct

import pytest

from magnetar.protocol import (
    ChecksumMismatch,
    FrameDecoder,
    MalformedFrame,
    commands,
    crc32c,
    encode_payload_command,
    entry_payload,
    make_entry,
    max_frame_bytes_for,
    parse_entry_metadata,
    parse_send_payload,
    pb,
    split_broker_entry_metadata,
    verify_entry,
)


def metadata(seq: int = 7) -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name="mock-0-0",
        sequence_id=seq,
        publish_time=1795260459872,
        properties=[pb.KeyValue(key="k", value="v")],
        partition_key="pk1",
        event_time=1234,
    )


def unchecked_body(meta: pb.MessageMetadata, payload: bytes) -> bytes:
    raw = meta.SerializeToString()
    return struct.pack(">I", len(raw)) + raw + payload


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_make_entry_layout() -> None:
    entry = make_entry(metadata(), b"hello")
    assert entry[:2] == b"\x0e\x01"
    assert struct.unpack(">I", entry[2:6])[0] == crc32c(entry[6:])
    assert verify_entry(entry)
    assert parse_entry_metadata(entry) == metadata()
    assert bytes(entry_payload(entry)) == b"hello"


def test_send_frame_round_trip_with_checksum() -> None:
    entry = make_entry(metadata(), b"body bytes")
    wire = encode_payload_command(commands.send(0, 7), entry)
    decoder = FrameDecoder(max_frame_bytes_for(5 * 1024 * 1024))
    decoder.feed(wire)
    frame = decoder.next_frame()
    assert frame is not None and frame.payload is not None
    assert frame.command.send.sequence_id == 7
    parsed = parse_send_payload(frame.payload)
    assert parsed.entry == entry
    assert parsed.metadata == metadata()


def test_corrupted_byte_raises_checksum_mismatch() -> None:
    entry = bytearray(make_entry(metadata(), b"body bytes"))
    entry[-3] ^= 0x40
    with pytest.raises(ChecksumMismatch) as info:
        parse_send_payload(memoryview(bytes(entry)))
    assert info.value.expected != info.value.actual
    assert not verify_entry(bytes(entry))


def test_send_without_checksum_is_normalised() -> None:
    body = unchecked_body(metadata(), b"old client")
    parsed = parse_send_payload(memoryview(body))
    assert parsed.entry[:2] == b"\x0e\x01"
    assert parsed.entry[6:] == body
    assert verify_entry(parsed.entry)
    assert parsed.entry == make_entry(metadata(), b"old client")
    assert parsed.metadata == metadata()


def test_broker_entry_metadata_is_skipped() -> None:
    entry = make_entry(metadata(), b"x")
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=9).SerializeToString()
    payload = memoryview(b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + entry)
    found, rest = split_broker_entry_metadata(payload)
    assert found is not None and found.index == 9 and bytes(rest) == entry
    assert parse_send_payload(payload).entry == entry


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x0e\x01\x00\x00",  # truncated checksum header
        b"\x0e\x02\x00\x00\x00\x10abc",  # broker entry metadata overruns
        b"\x00\x00\x00\x50abc",  # metadata size beyond the buffer
        b"\x00\x00\x00\x02\xff\xff",  # invalid protobuf
        b"\x00\x00\x00\x02\x08\x01",  # metadata lacking producer_name and publish_time
    ],
)
def test_malformed_payloads(payload: bytes) -> None:
    with pytest.raises(MalformedFrame):
        parse_send_payload(memoryview(payload))


def test_malformed_payload_with_valid_checksum() -> None:
    body = b"\x00\x00\x01\x00tiny"
    payload = b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
    with pytest.raises(MalformedFrame):
        parse_send_payload(memoryview(payload))


def test_entry_helpers_reject_bad_sizes() -> None:
    with pytest.raises(MalformedFrame):
        parse_entry_metadata(b"\x0e\x01\x00\x00\x00\x00\x00\x00\x00\x99")
    with pytest.raises(MalformedFrame):
        entry_payload(b"\x0e\x01\x00\x00")
    assert not verify_entry(b"\x0e")
    assert not verify_entry(unchecked_body(metadata(), b"x"))
