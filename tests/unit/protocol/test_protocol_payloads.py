"""Compression codecs, batches, markers and id helpers."""

from __future__ import annotations

import zlib

import cramjam
import pytest

from magnetar.protocol import (
    CompressionError,
    LocalProtocolError,
    MalformedFrame,
    build_batch,
    compress,
    decompress,
    entry_payload,
    ids,
    is_marker,
    make_entry,
    make_marker_entry,
    markers,
    markers_pb,
    parse_entry_metadata,
    pb,
    split_batch,
    verify_entry,
)

CODECS = [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]
DATA = b"The quick brown fox jumps over the lazy dog. " * 40


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"a", DATA])
def test_codec_round_trip(codec: int, data: bytes) -> None:
    blob = compress(codec, data)
    assert decompress(codec, blob, len(data), 1 << 20) == data


def test_wire_formats_match_the_client() -> None:
    assert compress(pb.ZLIB, DATA)[:1] == b"\x78"  # zlib header
    assert zlib.decompress(compress(pb.ZLIB, DATA)) == DATA
    assert bytes(cramjam.lz4.decompress_block(compress(pb.LZ4, DATA), output_len=len(DATA))) == DATA
    assert compress(pb.ZSTD, DATA)[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    assert bytes(cramjam.snappy.decompress_raw(compress(pb.SNAPPY, DATA))) == DATA


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_corrupt_blob_raises(codec: int) -> None:
    blob = bytearray(compress(codec, DATA))
    for i in range(0, len(blob), 3):
        blob[i] ^= 0xA5
    with pytest.raises(CompressionError):
        decompress(codec, bytes(blob), len(DATA), 1 << 20)


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_wrong_size_raises(codec: int) -> None:
    blob = compress(codec, DATA)
    for size in (len(DATA) - 1, len(DATA) + 1):
        with pytest.raises(CompressionError):
            decompress(codec, blob, size, 1 << 20)


@pytest.mark.parametrize("codec", CODECS)
def test_size_above_limit_raises(codec: int) -> None:
    with pytest.raises(CompressionError):
        decompress(codec, compress(codec, DATA), len(DATA), len(DATA) - 1)


def test_unknown_codec() -> None:
    with pytest.raises(CompressionError):
        compress(9, DATA)
    with pytest.raises(CompressionError):
        decompress(9, DATA, len(DATA), 1 << 20)


def single(seq: int, **fields: object) -> pb.SingleMessageMetadata:
    return pb.SingleMessageMetadata(sequence_id=seq, payload_size=0, **fields)  # type: ignore[arg-type]


def test_batch_round_trip() -> None:
    messages = [
        (single(0, partition_key="a", properties=[pb.KeyValue(key="p", value="q")]), b"first"),
        (single(1, event_time=99), b""),
        (single(2, null_value=True), b"x" * 300),
    ]
    payload = build_batch(messages)
    parts = split_batch(payload, 3)
    assert [bytes(body) for _, body in parts] == [b"first", b"", b"x" * 300]
    assert [m.sequence_id for m, _ in parts] == [0, 1, 2]
    assert parts[0][0].partition_key == "a" and parts[1][0].event_time == 99
    assert [m.payload_size for m, _ in parts] == [5, 0, 300]


def test_compressed_batch_round_trip() -> None:
    payload = build_batch([(single(i), b"m%d" % i * 20) for i in range(5)])
    blob = compress(pb.LZ4, payload)
    meta = pb.MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        num_messages_in_batch=5,
        compression=pb.LZ4,
        uncompressed_size=len(payload),
    )
    entry = make_entry(meta, blob)
    got = parse_entry_metadata(entry)
    raw = decompress(got.compression, entry_payload(entry), got.uncompressed_size, 1 << 20)
    assert len(split_batch(raw, got.num_messages_in_batch)) == 5


def test_one_message_batch_keeps_num_messages_in_batch() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1, num_messages_in_batch=1)
    entry = make_entry(meta, build_batch([(single(3), b"only")]))
    got = parse_entry_metadata(entry)
    assert got.HasField("num_messages_in_batch") and got.num_messages_in_batch == 1
    (only,) = split_batch(entry_payload(entry), 1)
    assert bytes(only[1]) == b"only"
    plain = parse_entry_metadata(make_entry(pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1), b""))
    assert not plain.HasField("num_messages_in_batch")


@pytest.mark.parametrize("cut", [1, 4, 6, 10])
def test_truncated_batch(cut: int) -> None:
    payload = build_batch([(single(0), b"abcdef"), (single(1), b"ghijkl")])
    with pytest.raises(MalformedFrame):
        split_batch(payload[:-cut], 2)


def test_batch_count_inconsistent() -> None:
    payload = build_batch([(single(0), b"abc"), (single(1), b"def")])
    with pytest.raises(MalformedFrame):
        split_batch(payload, 1)  # bytes left over
    with pytest.raises(MalformedFrame):
        split_batch(payload, 3)  # runs out
    with pytest.raises(MalformedFrame):
        split_batch(payload, 0)
    with pytest.raises(LocalProtocolError):
        build_batch([])


def test_marker_detection() -> None:
    entry = make_marker_entry(markers.TXN_COMMIT, b"", publish_time_ms=10, txnid=(1, 2))
    meta = parse_entry_metadata(entry)
    assert verify_entry(entry)
    assert is_marker(meta) and meta.marker_type == 21
    assert (meta.txnid_most_bits, meta.txnid_least_bits) == (1, 2)
    assert meta.producer_name == "pulsar.marker"
    zero = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0, marker_type=0)
    assert is_marker(zero)  # presence counts, not the value
    assert not is_marker(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0))


def test_replication_marker_payload() -> None:
    snapshot = markers_pb.ReplicatedSubscriptionsSnapshotRequest(snapshot_id="s1", source_cluster="east")
    entry = make_marker_entry(
        markers.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST,
        snapshot.SerializeToString(),
        publish_time_ms=5,
        replicate_to=["west"],
    )
    meta = parse_entry_metadata(entry)
    assert meta.marker_type == 10 and list(meta.replicate_to) == ["west"]
    got = markers_pb.ReplicatedSubscriptionsSnapshotRequest.FromString(bytes(entry_payload(entry)))
    assert got == snapshot
    txn = parse_entry_metadata(markers.make_txn_marker_entry(markers.TXN_ABORT, (3, 4), publish_time_ms=1))
    assert txn.producer_name == "pulsar.txn.marker" and txn.marker_type == 22


def test_id_helpers() -> None:
    assert ids.signed(2**64 - 1) == -1
    assert ids.signed(5) == 5
    assert ids.unsigned(-1) == 2**64 - 1
    assert ids.signed(ids.unsigned(-7)) == -7
    earliest = pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1)
    latest = pb.MessageIdData(ledgerId=2**63 - 1, entryId=2**63 - 1)
    assert ids.is_earliest(earliest) and not ids.is_latest(earliest)
    assert ids.is_latest(latest) and not ids.is_earliest(latest)
    assert ids.is_earliest(ids.message_id(*ids.EARLIEST))
    assert ids.is_latest(ids.message_id(*ids.LATEST))
    mid = ids.message_id(3, 4, partition=2)
    assert mid.partition == 2 and not mid.HasField("batch_index")
