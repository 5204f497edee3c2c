"""Pure client logic: batch building, ack grouping, nacks, routing, backoff, config pickling, errors."""

from __future__ import annotations

import pickle
import random

import pytest

from magnetar.client import BatchingConfig, Client, DeadLetterPolicy, MessageId, errors
from magnetar.client._acks import AckGroupingTracker, NegativeAckTracker, ack_set_words, unacked_after, unacked_except
from magnetar.client._backoff import Backoff
from magnetar.client._batch import BatchBuilder, OutgoingMessage, build_entry, message_metadata, split_chunks
from magnetar.client._config import ConsumerConfig, ProducerConfig
from magnetar.client._incoming import ChunkAssembler, StartFilter, decode_entry
from magnetar.client._messages import full_topic_name, partition_index
from magnetar.client._routing import Router
from magnetar.core.lifecycle import Lifecycle, Transitions
from magnetar.protocol import entry_payload, parse_entry_metadata, pb, split_batch


def _msg(seq: int, body: bytes = b"x", **kw: object) -> OutgoingMessage[int]:
    return OutgoingMessage(body, seq, seq, **kw)  # type: ignore[arg-type]


def _message_cmd(ledger: int = 5, entry: int = 7, redelivery: int = 0) -> pb.CommandMessage:
    cmd = pb.CommandMessage(consumer_id=1, redelivery_count=redelivery)
    cmd.message_id.ledgerId, cmd.message_id.entryId = ledger, entry
    return cmd


# ---------------------------------------------------------------- batches


def test_batch_builder_fills_by_count_and_keeps_first_key() -> None:
    builder: BatchBuilder[int] = BatchBuilder(BatchingConfig(max_messages=3))
    assert not builder.add(_msg(10, key="k1", properties={"a": "b"}))
    assert not builder.add(_msg(11, key="k2"))
    assert builder.add(_msg(12))
    entry, messages = builder.take("prod", 1000, pb.LZ4)
    assert [m.token for m in messages] == [10, 11, 12]
    meta = parse_entry_metadata(entry)
    assert meta.sequence_id == 10 and meta.num_messages_in_batch == 3 and meta.partition_key == "k1"
    assert meta.compression == pb.LZ4 and not meta.properties
    from magnetar.protocol import decompress

    raw = decompress(meta.compression, entry_payload(entry), meta.uncompressed_size, 1 << 20)
    singles = split_batch(raw, 3)
    assert [s.sequence_id for s, _ in singles] == [10, 11, 12]
    assert singles[0][0].properties[0].key == "a" and singles[1][0].partition_key == "k2"
    assert len(builder) == 0


def test_batch_builder_bounds_bytes() -> None:
    builder: BatchBuilder[int] = BatchBuilder(BatchingConfig(max_bytes=100))
    builder.add(_msg(0, b"a" * 60))
    assert not builder.has_room_for(_msg(1, b"b" * 60))


@pytest.mark.parametrize("batch_size", [2, 63, 64, 65, 1000])
def test_ack_sets_from_bit_arithmetic_equal_the_index_by_index_ones(batch_size: int) -> None:
    for index in sorted({0, 1, batch_size // 2, batch_size - 2, batch_size - 1}):
        assert unacked_except(index, batch_size) == ack_set_words(set(range(batch_size)) - {index}, batch_size)
        assert unacked_after(index, batch_size) == ack_set_words(set(range(index + 1, batch_size)), batch_size)


def test_a_batch_holds_the_messages_of_one_transaction_and_carries_its_id() -> None:
    builder: BatchBuilder[int] = BatchBuilder(BatchingConfig(max_messages=10))
    builder.add(_msg(0, txn_id=(1, 7)))
    assert builder.has_room_for(_msg(1, txn_id=(1, 7)))
    builder.add(_msg(1, txn_id=(1, 7)))
    assert builder.txn_id == (1, 7)
    assert not builder.has_room_for(_msg(2, txn_id=(1, 8)))  # another transaction: a new batch
    assert not builder.has_room_for(_msg(3))  # a plain message too
    entry, _ = builder.take("prod", 1000, pb.NONE)
    meta = parse_entry_metadata(entry)
    assert (meta.txnid_most_bits, meta.txnid_least_bits, meta.num_messages_in_batch) == (1, 7, 2)
    builder.add(_msg(4))
    assert builder.txn_id is None and not builder.has_room_for(_msg(5, txn_id=(1, 8)))
    entry, _ = builder.take("prod", 1000, pb.NONE)
    assert not parse_entry_metadata(entry).HasField("txnid_most_bits")


def test_single_metadata_has_only_what_was_set() -> None:
    meta = message_metadata(_msg(3, event_time_ms=99, ordering_key=b"o"), "p", 5)
    assert (meta.producer_name, meta.sequence_id, meta.publish_time, meta.event_time) == ("p", 3, 5, 99)
    assert meta.ordering_key == b"o" and not meta.HasField("partition_key")
    assert not meta.HasField("num_messages_in_batch")


def test_chunks_reassemble() -> None:
    body = bytes(range(256)) * 40
    meta = message_metadata(_msg(4, body), "p", 5)
    entries = split_chunks(meta, body, 2048, "p-4")
    assert len(entries) > 1
    assembler = ChunkAssembler(2)
    results = []
    for i, entry in enumerate(entries):
        out = decode_entry("t", _message_cmd(1, i), memoryview(entry), partition=-1, max_message_bytes=1 << 20,
                           chunks=assembler, start=None)
        results.append(out)
    assert all(r.discarded == 1 for r in results[:-1])
    (msg,) = results[-1].messages
    assert msg.data == body and msg.message_id == MessageId(1, len(entries) - 1)
    assert len(msg.chunk_ids) == len(entries)


def test_decode_batch_honours_broker_ack_set_and_start_filter() -> None:
    builder: BatchBuilder[int] = BatchBuilder(BatchingConfig())
    for i in range(3):
        builder.add(_msg(i, f"m{i}".encode()))
    entry, _ = builder.take("p", 1, pb.NONE)
    cmd = _message_cmd()
    cmd.ack_set.extend(ack_set_words({0, 2}, 3))  # index 1 already acked
    out = decode_entry("t", cmd, memoryview(entry), partition=-1, max_message_bytes=1 << 20,
                       chunks=ChunkAssembler(1), start=None)
    assert [m.data for m in out.messages] == [b"m0", b"m2"] and out.discarded == 1
    out = decode_entry("t", _message_cmd(), memoryview(entry), partition=-1, max_message_bytes=1 << 20,
                       chunks=ChunkAssembler(1), start=StartFilter(MessageId(5, 7, 0), False))
    assert [m.message_id.batch_index for m in out.messages] == [1, 2]


def test_decode_rejects_corrupt_checksum() -> None:
    entry = bytearray(build_entry(message_metadata(_msg(0, b"hello"), "p", 1), b"hello", pb.NONE))
    entry[-1] ^= 0xFF
    out = decode_entry("t", _message_cmd(), memoryview(bytes(entry)), partition=-1, max_message_bytes=1 << 20,
                       chunks=ChunkAssembler(1), start=None)
    assert out.validation_error == pb.CommandAck.ChecksumMismatch and not out.messages


def test_start_filter_exclusive_and_inclusive() -> None:
    exclusive = StartFilter(MessageId(1, 5), False)
    assert exclusive.drops(MessageId(1, 5)) and exclusive.drops(MessageId(1, 5, 3))
    assert not exclusive.drops(MessageId(1, 6))
    inclusive = StartFilter(MessageId(1, 5), True)
    assert not inclusive.drops(MessageId(1, 5)) and inclusive.drops(MessageId(1, 4))


# ---------------------------------------------------------------- acks


def test_individual_acks_grouped_in_one_command() -> None:
    tracker = AckGroupingTracker(max_size=1000, batch_index_ack=False)
    tracker.add_individual(MessageId(1, 2), 1)
    tracker.add_individual(MessageId(1, 1), 1)
    (cmd,) = tracker.take_commands(7)
    assert cmd.ack.ack_type == pb.CommandAck.Individual and cmd.ack.consumer_id == 7
    assert [(m.ledgerId, m.entryId) for m in cmd.ack.message_id] == [(1, 1), (1, 2)]
    assert tracker.take_commands(7) == []


def test_batch_entry_acked_only_when_complete() -> None:
    tracker = AckGroupingTracker(max_size=1000, batch_index_ack=False)
    tracker.add_individual(MessageId(1, 2, 0), 2)
    assert tracker.take_commands(1) == []
    tracker.add_individual(MessageId(1, 2, 1), 2)
    (cmd,) = tracker.take_commands(1)
    assert not cmd.ack.message_id[0].ack_set


def test_batch_index_ack_sends_unacked_bits() -> None:
    tracker = AckGroupingTracker(max_size=1000, batch_index_ack=True)
    tracker.add_individual(MessageId(1, 2, 2), 3)
    (cmd,) = tracker.take_commands(1)
    assert list(cmd.ack.message_id[0].ack_set) == [3]  # indexes 0 and 1 still open


def test_cumulative_first_and_mid_batch_steps_back() -> None:
    tracker = AckGroupingTracker(max_size=1000, batch_index_ack=False)
    tracker.add_individual(MessageId(1, 9), 1)
    tracker.add_cumulative(MessageId(1, 5, 0), 3)
    cum, ind = tracker.take_commands(1)
    assert cum.ack.ack_type == pb.CommandAck.Cumulative and cum.ack.message_id[0].entryId == 4
    assert ind.ack.ack_type == pb.CommandAck.Individual
    tracker.add_cumulative(MessageId(1, 3), 1)  # older than what was sent: nothing new
    assert tracker.take_commands(1) == []
    assert tracker.is_acked(MessageId(1, 4))


def test_ack_threshold_asks_for_flush() -> None:
    tracker = AckGroupingTracker(max_size=2, batch_index_ack=False)
    assert not tracker.add_individual(MessageId(1, 1), 1)
    assert tracker.add_individual(MessageId(1, 2), 1)


def test_ack_set_words_are_signed_int64() -> None:
    assert ack_set_words({63}, 64) == [-(1 << 63)]
    assert ack_set_words({64}, 65) == [0, 1]


def test_negative_acks_wait_for_their_delay() -> None:
    nacks = NegativeAckTracker(200)
    nacks.add((1, 1), 1000)
    nacks.add((1, 2), 1100)
    assert nacks.take_due(1199) == []
    assert nacks.take_due(1200) == [(1, 1)]
    assert nacks.take_due(5000) == [(1, 2)] and len(nacks) == 0


# ---------------------------------------------------------------- routing, backoff, names, states


def test_router_keys_stable_and_round_robin() -> None:
    router = Router(3)
    assert [router.choose(None) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    assert len({router.choose("key") for _ in range(10)}) == 1
    single = Router(3, "key_hash", start=2)
    assert {single.choose(None) for _ in range(5)} == {2}


def test_backoff_doubles_to_cap_and_resets() -> None:
    backoff = Backoff(100, 500, jitter=0.0, rng=random.Random(1))
    assert [backoff.next_ms() for _ in range(5)] == [100, 200, 400, 500, 500]
    backoff.reset()
    assert backoff.next_ms() == 100


def test_topic_names() -> None:
    assert full_topic_name("t") == "persistent://public/default/t"
    assert full_topic_name("a/b/t") == "persistent://a/b/t"
    assert partition_index("persistent://public/default/t-partition-2") == 2
    with pytest.raises(errors.InvalidConfiguration):
        full_topic_name("a/b")


def test_lifecycle_rejects_illegal_edges() -> None:
    import enum

    class S(enum.Enum):
        A = 1
        B = 2

    life = Lifecycle(S.A, Transitions(S, {S.A: {S.B}, S.B: set()}))
    assert life.can_go(S.B) and not life.can_go(S.A)
    life.transition_to(S.B)
    with pytest.raises(AssertionError, match="illegal transition B -> A"):
        life.transition_to(S.A)
    assert life.state is S.B


# ---------------------------------------------------------------- config and errors


def test_client_pickles_as_configuration() -> None:
    client = Client("pulsar://localhost:6650", operation_timeout_ms=1234)
    clone = pickle.loads(pickle.dumps(client))
    assert clone.config == client.config and clone.config.operation_timeout_ms == 1234
    config = ConsumerConfig(subscription="s", dead_letter_policy=DeadLetterPolicy(max_redeliver_count=2))
    assert pickle.loads(pickle.dumps(config)) == config


def test_config_validation() -> None:
    with pytest.raises(errors.InvalidConfiguration):
        ProducerConfig(topic="t", compression="brotli")
    with pytest.raises(errors.InvalidConfiguration):
        ProducerConfig(topic="t", chunking=True, batching=BatchingConfig())
    with pytest.raises(errors.InvalidConfiguration):
        ConsumerConfig(subscription="s", subscription_type="broadcast")
    with pytest.raises(errors.InvalidConfiguration):
        Client("http://localhost:8080")


def test_server_errors_map_through_the_registry() -> None:
    exc = errors.from_server(pb.TopicNotFound, "nope")
    assert isinstance(exc, errors.TopicNotFound) and not exc.retriable and exc.wire_code == 11
    assert errors.is_retriable(errors.from_server(pb.ServiceNotReady, ""))
    assert isinstance(errors.from_server(99, "?"), errors.UnknownError)
    assert isinstance(errors.from_server(pb.ProducerBlockedQuotaExceededException, ""),
                      errors.ProducerBlockedQuotaExceeded)


def test_message_id_order_and_serialisation() -> None:
    a, b = MessageId(1, 2, 0), MessageId(1, 2, 1)
    assert a < b < MessageId(1, 3)
    assert MessageId.deserialize(b.serialize()) == b
    assert str(MessageId(104, 0)) == "(104,0,-1,-1)"
