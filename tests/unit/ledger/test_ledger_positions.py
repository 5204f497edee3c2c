"""LedgerList navigation and counting, the range set, the bit-set codec, the metadata records."""

from __future__ import annotations

import pytest

from magnetar.ledger.api import LedgerSummary, ManagedLedgerError, Position
from magnetar.ledger.bitset import int_to_words, words_to_int
from magnetar.ledger.formats import (
    CorruptMetadata,
    CursorRecord,
    LedgerRecord,
    cursor_key,
    decode_cursor,
    decode_ledger,
    encode_cursor,
    encode_ledger,
    ledger_key,
)
from magnetar.ledger.ledger_list import LedgerList
from magnetar.ledger.ranges import PositionRangeSet
from magnetar.ledger.states import (
    CURSOR_TRANSITIONS,
    LEDGER_TRANSITIONS,
    CursorState,
    IllegalTransition,
    LedgerState,
)


def P(ledger: int, entry: int) -> Position:
    return Position(ledger, entry)


def sample() -> LedgerList:
    # ledger 4 holds 3 entries, 6 holds 2, 9 is current with 1 confirmed
    return LedgerList([LedgerSummary(4, 3, 30, 0), LedgerSummary(6, 2, 20, 0), LedgerSummary(9, 1, 10, 0)])


def test_counts_and_ends() -> None:
    ledgers = sample()
    assert ledgers.total_entries() == 6 and ledgers.total_size_bytes() == 60
    assert ledgers.first_position() == P(4, -1)
    assert ledgers.last_confirmed() == P(9, 0)
    assert ledgers.end_position() == P(9, 1)
    assert ledgers.count_between(P(4, -1), P(9, 0)) == 6
    assert ledgers.count_between(P(4, 1), P(6, 1)) == 3
    assert ledgers.count_between(P(5, 0), P(7, 0)) == 2  # ids between ledgers
    assert ledgers.count_between(P(9, 0), P(4, 0)) == 0
    assert ledgers.index(P(6, -1)) == 3 and ledgers.index(P(100, 0)) == 6 and ledgers.index(P(0, 0)) == 0


def test_navigation() -> None:
    ledgers = sample()
    assert ledgers.next_position(P(4, 2)) == P(6, 0)
    assert ledgers.next_position(P(6, 1)) == P(9, 0)
    assert ledgers.next_position(P(9, 0)) == P(9, 1)  # past the end: the next entry to be written
    assert ledgers.next_position(P(4, -1)) == P(4, 0)
    assert ledgers.next_position(P(1, 7)) == P(4, 0)
    assert ledgers.forward(P(5, 3)) == P(6, 0)
    assert ledgers.forward(P(4, 50)) == P(6, 0)
    assert ledgers.forward(P(-1, -1)) == P(4, 0)
    assert ledgers.forward(P(9, 5)) == P(9, 1)
    assert ledgers.forward(P(99, 0)) == P(9, 1)
    assert ledgers.is_entry(P(6, 1)) and not ledgers.is_entry(P(6, 2)) and not ledgers.is_entry(P(9, 1))


def test_updates_keep_the_index() -> None:
    ledgers = sample()
    ledgers.record_add(9, 1, 5)
    assert ledgers.last_confirmed() == P(9, 1) and ledgers.total_entries() == 7
    ledgers.append(LedgerSummary(12, 0, 0, 0))
    assert ledgers.last_confirmed() == P(9, 1) and ledgers.end_position() == P(12, 0)
    assert ledgers.next_position(P(9, 1)) == P(12, 0)
    ledgers.remove(6)
    assert ledgers.count_between(P(4, -1), P(12, 0)) == 5 and ledgers.next_position(P(4, 2)) == P(9, 0)
    with pytest.raises(AssertionError):
        ledgers.append(LedgerSummary(3, 0, 0, 0))


def test_empty_list() -> None:
    ledgers = LedgerList()
    assert ledgers.total_entries() == 0 and ledgers.last_confirmed() == P(-1, -1)
    assert ledgers.forward(P(1, 1)) == P(-1, -1)


def test_range_set_merges_across_ledgers() -> None:
    ledgers = sample()
    ranges = PositionRangeSet(ledgers.next_position)
    for p in (P(4, 0), P(4, 2), P(6, 0), P(9, 0)):
        assert ranges.add(p)
    assert not ranges.add(P(6, 0))
    assert ranges.ranges() == [(P(4, 0), P(4, 0)), (P(4, 2), P(6, 0)), (P(9, 0), P(9, 0))]
    ranges.add(P(6, 1))
    ranges.add(P(4, 1))
    assert ranges.ranges() == [(P(4, 0), P(9, 0))]
    assert ranges.remove_up_to(P(4, 2)) == [(P(4, 0), P(4, 2))]
    assert ranges.ranges() == [(P(6, 0), P(9, 0))]
    assert ranges.next_first_after(P(4, 0)) == P(6, 0) and ranges.next_first_after(P(6, 0)) is None


def test_range_set_restores_overlapping_input() -> None:
    ledgers = sample()
    ranges = PositionRangeSet(ledgers.next_position, [(P(4, 1), P(6, 0)), (P(4, 0), P(4, 2)), (P(6, 1), P(6, 1))])
    assert ranges.ranges() == [(P(4, 0), P(6, 1))]


@pytest.mark.parametrize(
    ("words", "bits", "value"),
    [([], 8, 0), ([0b101], 8, 0b101), ([-1], 4, 0b1111), ([-1, 1], 65, (1 << 65) - 1), ([0, 1 << 63], 200, 1 << 127)],
)
def test_bitset_words(words: list[int], bits: int, value: int) -> None:
    assert words_to_int(words, bits) == value


def test_bitset_round_trip_is_java_signed() -> None:
    assert int_to_words((1 << 64) - 1) == [-1]
    assert int_to_words(1 << 64) == [0, 1]
    assert int_to_words(0) == []
    for value in (1, 12345, (1 << 100) | 7, (1 << 63)):
        assert words_to_int(int_to_words(value), 128) == value


def test_records_round_trip() -> None:
    ledger = LedgerRecord((LedgerSummary(1, 5, 50, 7), LedgerSummary(3, 0, 0, 9)), {"epoch": "2"})
    assert decode_ledger(encode_ledger(ledger), "k") == ledger
    cursor = CursorRecord(P(1, 4), ((P(1, 6), P(3, 0)),), ((P(3, 2), (-1, 5)),), {"a": 1})
    assert decode_cursor(encode_cursor(cursor), "k") == cursor


@pytest.mark.parametrize(
    "data", [b"", b"nope", b"[]", b'{"format": 2}', b'{"format": 1, "ledgers": [[1]]}',
             b'{"format": 1, "ledgers": [[2,0,0,0],[1,0,0,0]]}']
)
def test_corrupt_ledger_records_are_reported(data: bytes) -> None:
    with pytest.raises(CorruptMetadata):
        decode_ledger(data, "k")


@pytest.mark.parametrize("data", [b"{}", b'{"format": 1}', b'{"format": 1, "mark_delete": [1, "x"]}'])
def test_corrupt_cursor_records_are_reported(data: bytes) -> None:
    with pytest.raises(CorruptMetadata):
        decode_cursor(data, "k")


def test_keys() -> None:
    assert ledger_key("a/b/persistent/t") == "/managed-ledgers/a/b/persistent/t"
    assert cursor_key("a/b/persistent/t", "s/1 %") == "/managed-ledgers/a/b/persistent/t/cursors/s%2F1%20%25"
    for bad in ("", "/a", "a/", "a//b"):
        with pytest.raises(Exception, match="invalid"):
            ledger_key(bad)


def test_lifecycle_tables_refuse_illegal_edges() -> None:
    assert LEDGER_TRANSITIONS.check(LedgerState.OPEN, LedgerState.FENCED, "x") is LedgerState.FENCED
    with pytest.raises(IllegalTransition, match="x: illegal transition CLOSED -> OPEN"):
        LEDGER_TRANSITIONS.check(LedgerState.CLOSED, LedgerState.OPEN, "x")
    with pytest.raises(ManagedLedgerError):  # the ledger layer's own root, as every ledger error
        CURSOR_TRANSITIONS.check(CursorState.DELETED, CursorState.OPEN, "x")
    for table in (LEDGER_TRANSITIONS, CURSOR_TRANSITIONS):
        for state, targets in table.items():
            assert state not in targets
