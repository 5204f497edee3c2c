"""AckState against a model (a set of acked positions), plus a few direct cases. No event loop."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from magnetar.ledger.acks import AckState
from magnetar.ledger.api import LedgerSummary, Position
from magnetar.ledger.bitset import all_set, words_to_int
from magnetar.ledger.ledger_list import LedgerList

ENTRY_IDS = st.integers(min_value=-2, max_value=6)


class AckModel(RuleBasedStateMachine):
    """The cursor's acknowledgement rules checked against "acked = a set of positions"."""

    def __init__(self) -> None:
        super().__init__()
        self.ledgers = LedgerList([LedgerSummary(3, 0, 0, 0)])
        self.acks = AckState(self.ledgers, self.ledgers.first_position())
        self.positions: list[Position] = []
        self.acked: set[Position] = set()
        self.batches: dict[Position, int] = {}

    # ---- the ledger grows ----------------------------------------------------------------------------------

    @rule(count=st.integers(min_value=1, max_value=4))
    def add_entries(self, count: int) -> None:
        current = self.ledgers.current
        for i in range(count):
            self.ledgers.record_add(current.ledger_id, current.entries + i, 1)
            self.positions.append(Position(current.ledger_id, current.entries + i))

    @precondition(lambda self: self.ledgers.current.entries > 0 and len(self.ledgers) < 6)
    @rule(gap=st.integers(min_value=1, max_value=3))
    def rollover(self, gap: int) -> None:
        self.ledgers.append(LedgerSummary(self.ledgers.current.ledger_id + gap, 0, 0, 0))

    # ---- positions: mostly real entries, sometimes nonsense ------------------------------------------------

    def pick(self, data: st.DataObject) -> Position:
        ids = [x.ledger_id for x in self.ledgers.summaries()]
        if self.positions and data.draw(st.booleans()):
            return data.draw(st.sampled_from(self.positions))
        ledger = data.draw(st.integers(min_value=ids[0] - 2, max_value=ids[-1] + 2))
        return Position(ledger, data.draw(ENTRY_IDS))

    # ---- acks ----------------------------------------------------------------------------------------------

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        p = self.pick(data)
        self.acks.ack(p)
        if p in self.positions:
            self.acked.add(p)
            self.batches.pop(p, None)

    @rule(data=st.data())
    def ack_cumulative(self, data: st.DataObject) -> None:
        p = self.pick(data)
        self.acks.ack_cumulative(p)
        if p in self.positions:
            self.acked.update(q for q in self.positions if q <= p)
            self.batches = {q: b for q, b in self.batches.items() if q > p}

    @rule(data=st.data(), size=st.integers(min_value=0, max_value=130),
          words=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3))
    def ack_batch(self, data: st.DataObject, size: int, words: list[int]) -> None:
        p = self.pick(data)
        self.acks.ack_batch(p, words, size)
        if p not in self.positions or p in self.acked or size == 0:
            return
        bits = self.batches.get(p, all_set(size)) & words_to_int(words, size)
        if bits:
            self.batches[p] = bits
        else:
            self.acked.add(p)
            self.batches.pop(p, None)

    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        p = self.pick(data)
        target = self.ledgers.forward(p)
        self.acks.reset(Position(target.ledger_id, target.entry_id - 1))
        self.acked = {q for q in self.positions if q < target}
        self.batches = {}

    # ---- what must always hold -----------------------------------------------------------------------------

    @invariant()
    def acked_agrees(self) -> None:
        for q in self.positions:
            assert self.acks.is_acked(q) == (q in self.acked), q

    @invariant()
    def backlog_agrees(self) -> None:
        assert self.acks.backlog() == len(self.positions) - len(self.acked)

    @invariant()
    def mark_delete_is_the_acked_prefix(self) -> None:
        unacked = [q for q in self.positions if q not in self.acked]
        expected = unacked[0] if unacked else self.ledgers.end_position()
        after_mark_delete = self.ledgers.next_position(self.acks.mark_delete)
        assert self.ledgers.forward(after_mark_delete) == expected
        ranges = self.acks.ranges()
        assert not ranges or ranges[0][0] != after_mark_delete  # advanced over contiguous acks
        assert self.acks.first_unacked(self.ledgers.first_position()) == expected

    @invariant()
    def ranges_are_merged_and_exact(self) -> None:
        ranges = self.acks.ranges()
        covered = {q for q in self.positions if any(f <= q <= last for f, last in ranges)}
        assert covered == {q for q in self.acked if q > self.acks.mark_delete}
        for (_, last), (first, _) in itertools.pairwise(ranges):
            assert self.ledgers.next_position(last) != first and last < first

    @invariant()
    def batches_agree(self) -> None:
        assert {p: words_to_int(w, 1 << 16) for p, w in self.acks.batches()} == self.batches


TestAckModel = AckModel.TestCase
TestAckModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_restore_drops_what_is_not_after_mark_delete() -> None:
    ledgers = LedgerList([LedgerSummary(1, 5, 5, 0), LedgerSummary(2, 3, 3, 0)])
    acks = AckState(ledgers, Position(1, 1))
    acks.restore(
        [(Position(1, 0), Position(1, 2)), (Position(1, 4), Position(2, 0)), (Position(7, 0), Position(7, 1))],
        [(Position(2, 2), (0b10,)), (Position(1, 0), (1,)), (Position(9, 9), (1,))],
    )
    assert acks.mark_delete == Position(1, 2)
    assert acks.ranges() == [(Position(1, 4), Position(2, 0))]
    assert acks.batches() == [(Position(2, 2), [0b10])]
    assert acks.backlog() == 3


def test_in_order_acks_move_the_mark_delete_position_and_drop_a_partial_batch() -> None:
    ledgers = LedgerList([LedgerSummary(3, 4, 0, 0)])
    acks = AckState(ledgers, ledgers.first_position())
    assert acks.ack_batch(Position(3, 1), [0b10], 2)  # index 0 of the 2-message batch acked
    assert acks.ack(Position(3, 0)) and acks.mark_delete == Position(3, 0)
    assert acks.ack(Position(3, 1)) and acks.mark_delete == Position(3, 1)
    assert acks.batch_words(Position(3, 1)) is None and acks.batches() == []
    assert not acks.ack(Position(3, 1))  # already acked
    assert not acks.ack(Position(3, 4))  # not an entry (past the end)
    assert acks.ack(Position(3, 3)) and acks.mark_delete == Position(3, 1)  # a gap: kept as a range
    assert acks.ack(Position(3, 2)) and acks.mark_delete == Position(3, 3) and acks.ranges() == []
    assert acks.backlog() == 0
