"""dispatch_fields reads what dispatch needs from an entry exactly as a full protobuf parse would."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar import protocol as proto
from magnetar.protocol.dispatch_fields import dispatch_fields
from magnetar.protocol.errors import MalformedFrame

pb = proto.pb
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
UINT32 = st.integers(0, 2**32 - 1)
TEXT = st.text(max_size=20)


def expected(entry: bytes) -> tuple[int, int | None]:
    meta = proto.parse_entry_metadata(entry)
    return meta.num_messages_in_batch, (meta.deliver_at_time if meta.HasField("deliver_at_time") else None)


@st.composite
def metadata(draw: st.DrawFn) -> pb.MessageMetadata:
    m = pb.MessageMetadata(producer_name=draw(TEXT), sequence_id=draw(UINT64), publish_time=draw(UINT64))
    for name, values in (
        ("num_messages_in_batch", INT32), ("deliver_at_time", INT64), ("partition_key", TEXT),
        ("ordering_key", st.binary(max_size=8)), ("event_time", UINT64), ("uncompressed_size", UINT32),
        ("highest_sequence_id", UINT64), ("txnid_least_bits", UINT64), ("txnid_most_bits", UINT64),
        ("num_chunks_from_msg", INT32), ("chunk_id", INT32), ("uuid", TEXT), ("null_value", st.booleans()),
        ("compression", st.sampled_from([0, 1, 2])), ("schema_version", st.binary(max_size=8)),
    ):
        if draw(st.booleans()):
            setattr(m, name, draw(values))
    for _ in range(draw(st.integers(0, 3))):
        m.properties.add(key=draw(TEXT), value=draw(TEXT))
    return m


@settings(max_examples=300, deadline=None)
@given(metadata(), st.binary(max_size=64))
def test_fields_equal_protobuf(meta: pb.MessageMetadata, payload: bytes) -> None:
    entry = proto.make_entry(meta, payload)
    assert dispatch_fields(entry) == expected(entry)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.binary(max_size=16))
def test_arbitrary_metadata_bytes_agree_or_defer(raw: bytes, payload: bytes) -> None:
    """On any metadata bytes: either the same answer as protobuf, or None (the caller parses)."""
    entry = struct.pack(">HII", 0x0E01, 0, len(raw)) + raw + payload
    got = dispatch_fields(entry)
    if got is None:
        return
    try:
        want = expected(entry)
    except MalformedFrame:
        return  # unparseable (or missing required fields): stored entries never are; not dispatch's question
    assert got == want


def test_markers_and_odd_entries_defer_to_protobuf() -> None:
    marker = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, marker_type=1)
    assert dispatch_fields(proto.make_entry(marker, b"")) is None
    assert dispatch_fields(b"\x0e") is None
    plain = proto.make_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), b"x")
    assert dispatch_fields(plain) == (1, None)
    assert dispatch_fields(b"\x00\x00" + plain[2:]) is None  # no CRC magic
    assert dispatch_fields(plain[:12]) is None  # metadata size runs past the entry
