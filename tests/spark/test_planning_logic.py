"""Pure logic of the connector, no Spark and no broker: offsets, option parsing, splits, admission shares."""

from __future__ import annotations

import json

import pytest

from magnetar.client import MessageId
from magnetar.spark.direct import Ledger, LedgerRange, LedgerTask, group_tasks, split_direct
from magnetar.spark.discovery import Peek
from magnetar.spark.offsets import BEFORE_FIRST, after, contiguous, from_source_offset, to_source_offset
from magnetar.spark.options import LedgerStoreLocation, OptionError, parse_sink, parse_source
from magnetar.spark.planning import _advance, _shares, split_range
from magnetar.spark.scan import ScanRange

URL = "pulsar://localhost:6650"


def test_source_offsets_are_canonical_json_and_round_trip() -> None:
    ids = {"b": MessageId(3, 4, -1), "a": MessageId(1, 2, 5)}
    offset = to_source_offset(ids)
    assert json.dumps(offset) == '{"partitions": {"a": [1, 2, 5], "b": [3, 4, -1]}}'
    assert from_source_offset(offset) == ids


def test_positions_order_whole_entries_after_their_messages() -> None:
    assert after(MessageId(1, 3, -1), MessageId(1, 3, 2))
    assert not after(MessageId(1, 3, 2), MessageId(1, 3, -1))
    assert after(MessageId(2, -1), MessageId(1, 99))
    assert contiguous(MessageId(1, 5), MessageId(1, 6)) and not contiguous(MessageId(1, 5), MessageId(2, 0))
    assert contiguous(BEFORE_FIRST, MessageId(9, 0))


def test_options_name_the_problem() -> None:
    with pytest.raises(OptionError, match=r"service\.url"):
        parse_source({"topic": "t"}, streaming=False)
    with pytest.raises(OptionError, match="exactly one of topic"):
        parse_source({"service.url": URL, "topic": "t", "topics": "a,b"}, streaming=False)
    with pytest.raises(OptionError, match="batch reads only"):
        parse_source({"service.url": URL, "topic": "t", "endingOffsets": "latest"}, streaming=True)
    opts = parse_source({"service.url": URL, "TOPICS": "a, b", "maxEntriesPerTrigger": "7"}, streaming=True)
    assert opts.topics.topics == ("a", "b") and opts.max_records_per_trigger == 7 and opts.starting == "latest"
    with pytest.raises(OptionError, match="deliveryGuarantee must be one of exactly_once, at_least_once"):
        parse_sink({"service.url": URL, "topic": "t", "deliveryGuarantee": "exactly-twice"})
    with pytest.raises(OptionError, match="sinkId"):
        parse_sink({"service.url": URL, "topic": "t", "sinkId": "../elsewhere"})
    sink = parse_sink({"service.url": URL, "topic": "t", "DELIVERYGUARANTEE": "Exactly_Once", "txnTimeoutMs": "9000",
                       "checkpointLocation": "/cp", "sinkId": "orders-v2"})
    assert (sink.delivery_guarantee, sink.txn_timeout_ms, sink.checkpoint_location, sink.sink_id) == (
        "exactly_once", 9000, "/cp", "orders-v2")
    assert parse_sink({"service.url": URL, "topic": "t"}).delivery_guarantee is None  # decided by the broker


def test_split_cuts_at_ledger_starts_and_covers_the_range() -> None:
    rng = ScanRange("t-partition-0", 0, BEFORE_FIRST, MessageId(30, 7))
    pieces = split_range(rng, 3)
    assert [p.start for p in pieces] == [BEFORE_FIRST, MessageId(10, -1), MessageId(20, -1)]
    assert [p.end for p in pieces] == [MessageId(10, -1), MessageId(20, -1), MessageId(30, 7)]
    assert [p.check_loss for p in pieces] == [True, False, False]
    inside = split_range(ScanRange("t", -1, MessageId(5, 9), MessageId(5, 99)), 3)
    assert [p.end for p in inside] == [MessageId(5, 39), MessageId(5, 69), MessageId(5, 99)]


def test_shares_follow_backlog_and_never_exceed_the_total() -> None:
    assert _shares(30, {"a": 100, "b": 100, "c": 100}) == {"a": 10, "b": 10, "c": 10}
    shares = _shares(30, {"a": 5, "b": 100})
    assert sum(shares.values()) == 30 and shares["a"] <= 5 and shares["b"] >= 25
    assert sum(_shares(2, {"a": 9, "b": 9, "c": 9}).values()) <= 2
    assert sum(_shares(1, {"a": 9, "b": 9, "c": 9}).values()) == 1


def test_advance_counts_messages_in_batches_and_stops_at_the_last() -> None:
    assert _advance(Peek(MessageId(1, 4), 1, 10), 3, MessageId(1, 100)) == MessageId(1, 6)
    assert _advance(Peek(MessageId(1, 4, 2), 10, 10), 5, MessageId(9, 0)) == MessageId(1, 4, 6)
    assert _advance(Peek(MessageId(1, 4, 8), 10, 10), 12, MessageId(9, 0)) == MessageId(1, 5, -1)
    assert _advance(Peek(MessageId(1, 4), 1, 10), 50, MessageId(1, 9)) == MessageId(1, 9)


def test_misspelled_options_are_refused_with_the_closest_name() -> None:
    with pytest.raises(OptionError, match=r"unknown option 'startingoffset'; did you mean startingOffsets"):
        parse_source({"service.url": URL, "topic": "t", "startingOffset": "latest"}, streaming=False)
    with pytest.raises(OptionError, match=r"did you mean maxPendingMessages"):
        parse_sink({"service.url": URL, "topic": "t", "maxPendingMessage": "5"})
    assert parse_source({"service.url": URL, "topic": "t", "client.operationTimeoutMs": "5"}, streaming=False)


def _pieces(rng: ScanRange, ledgers: list[Ledger]) -> list[tuple[str, object, object]]:
    out: list[tuple[str, object, object]] = []
    for piece in split_direct(rng, ledgers, LedgerStoreLocation("s3://b/p")):
        if isinstance(piece, LedgerRange):
            out.append(("store", piece.ledger_id, (piece.first, piece.last)))
        else:
            out.append(("broker", piece.start, piece.end))
    return out


def test_direct_plan_reads_sealed_ledgers_from_the_store_and_the_rest_through_the_broker() -> None:
    ledgers = [Ledger(1, 10, True), Ledger(2, 10, False), Ledger(3, 0, True), Ledger(4, 10, True), Ledger(5, 3, True)]
    rng = ScanRange("t-partition-0", 0, MessageId(1, 4, 2), MessageId(5, 1, -1))
    assert _pieces(rng, ledgers) == [
        ("store", 1, (4, 9)),  # entry 4 from batch index 3 on: the start is inside it
        ("broker", MessageId(1, 9, -1), MessageId(2, 9, -1)),  # offloaded, its store copy deleted
        ("store", 4, (0, 9)),  # ledger 3 is empty
        ("broker", MessageId(4, 9, -1), MessageId(5, 1, -1)),  # the current ledger
    ]
    cut = [p for p in split_direct(rng, ledgers, LedgerStoreLocation("s3://b/p")) if isinstance(p, ScanRange)]
    assert not any(p.check_loss for p in cut)  # cuts, not consumed positions
    inside = ScanRange("t-partition-0", 0, MessageId(4, 2, -1), MessageId(4, 6, 1))
    assert _pieces(inside, ledgers) == [("store", 4, (3, 6))]
    assert _pieces(ScanRange("t", -1, BEFORE_FIRST, MessageId(5, 2, -1)), ledgers)[0] == ("store", 1, (0, 9))


def test_direct_plan_leaves_a_range_whose_start_ledger_is_gone_to_the_broker() -> None:
    rng = ScanRange("t-partition-0", 0, MessageId(1, 4, -1), MessageId(5, 1, -1))
    assert split_direct(rng, [Ledger(4, 10, True), Ledger(5, 3, True)], LedgerStoreLocation("s3://b/p")) == [rng]


def test_direct_plan_groups_consecutive_ledgers_of_a_partition_into_tasks() -> None:
    where = LedgerStoreLocation("s3://b/p")
    rng = ScanRange("t-partition-0", 0, BEFORE_FIRST, MessageId(9, 1, -1))
    ledgers = [Ledger(i, 10, i != 4, 1000) for i in range(1, 10)]  # ledger 4: offloaded, its copy deleted
    tasks = group_tasks(split_direct(rng, ledgers, where), task_bytes=2500)
    shapes = [[r.ledger_id for r in t.ranges] if isinstance(t, LedgerTask) else "broker" for t in tasks]
    assert shapes == [[1, 2], [3], "broker", [5, 6], [7, 8], "broker"]
    other = ScanRange("t-partition-1", 1, BEFORE_FIRST, MessageId(3, 1, -1))
    both = group_tasks([*split_direct(rng, ledgers[:3], where), *split_direct(other, ledgers[:3], where)],
                       task_bytes=10_000)
    assert [len(t.ranges) if isinstance(t, LedgerTask) else 0 for t in both] == [2, 0, 2, 0]  # never across ranges
