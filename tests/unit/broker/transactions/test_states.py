"""The coordinator's one table of legal transaction transitions."""

from __future__ import annotations

import pytest

from magnetar.broker.transactions.api import InvalidTxnStatus, TxnAction, TxnId
from magnetar.broker.transactions.states import (
    LEGAL,
    TxnStatus,
    action_of,
    check_open,
    check_transition,
    ending_status,
    final_status,
)

TXN = TxnId(0, 7)
S = TxnStatus


@pytest.mark.parametrize(
    ("current", "action", "expected"),
    [
        (S.OPEN, TxnAction.COMMIT, S.COMMITTING),
        (S.OPEN, TxnAction.ABORT, S.ABORTING),
        (S.COMMITTING, TxnAction.COMMIT, S.COMMITTING),  # a repeated end drives it again
        (S.ABORTING, TxnAction.ABORT, S.ABORTING),
    ],
)
def test_end_actions_that_are_allowed(current: TxnStatus, action: TxnAction, expected: TxnStatus) -> None:
    assert ending_status(TXN, current, action) is expected
    assert action_of(expected) is action


@pytest.mark.parametrize(
    ("current", "action"),
    [
        (S.COMMITTING, TxnAction.ABORT),
        (S.ABORTING, TxnAction.COMMIT),
        (S.COMMITTED, TxnAction.COMMIT),
        (S.ABORTED, TxnAction.ABORT),
    ],
)
def test_crossed_or_late_end_actions_are_invalid(current: TxnStatus, action: TxnAction) -> None:
    with pytest.raises(InvalidTxnStatus, match=r"\(0,7\)"):
        ending_status(TXN, current, action)


def test_every_edge_of_the_table() -> None:
    for current in TxnStatus:
        for new in TxnStatus:
            if new in LEGAL[current]:
                check_transition(TXN, current, new)
            else:
                with pytest.raises(InvalidTxnStatus):
                    check_transition(TXN, current, new)
    assert final_status(S.COMMITTING) is S.COMMITTED and final_status(S.ABORTING) is S.ABORTED
    assert all(not LEGAL[s] for s in TxnStatus if s.finished)


def test_only_open_transactions_take_new_work() -> None:
    check_open(TXN, S.OPEN)
    for status in (S.COMMITTING, S.ABORTING, S.COMMITTED, S.ABORTED):
        with pytest.raises(InvalidTxnStatus):
            check_open(TXN, status)
