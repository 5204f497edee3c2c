"""A transaction's lifecycle at its coordinator: one table of legal transitions, one place that checks it.

    OPEN ──commit──▶ COMMITTING ──▶ COMMITTED
      └───abort────▶ ABORTING  ──▶ ABORTED      (a timeout is an abort)

Repeating the end action already under way is legal (the client retries; the TC drives the end again);
the opposite end action is ``InvalidTxnStatus``. A finished transaction leaves the coordinator's memory,
so asking about it again is ``TransactionNotFound`` (decided by the caller, which holds the map).
Pure logic: no asyncio, no log.
"""

from __future__ import annotations

import enum
from typing import Final

from magnetar.broker.transactions.api import InvalidTxnStatus, TxnAction, TxnId
from magnetar.core.lifecycle import Transitions


class TxnStatus(enum.IntEnum):
    """Values match the log's ``TxnStatus`` (and Pulsar's names in admin output)."""

    OPEN = 0
    COMMITTING = 1
    COMMITTED = 2
    ABORTING = 3
    ABORTED = 4

    @property
    def finished(self) -> bool:
        return self in (TxnStatus.COMMITTED, TxnStatus.ABORTED)

    @property
    def ending(self) -> bool:
        return self in (TxnStatus.COMMITTING, TxnStatus.ABORTING)


_S = TxnStatus
LEGAL: Final = Transitions(TxnStatus, {
    _S.OPEN: {_S.COMMITTING, _S.ABORTING},
    _S.COMMITTING: {_S.COMMITTING, _S.COMMITTED},
    _S.ABORTING: {_S.ABORTING, _S.ABORTED},
    _S.COMMITTED: set(),
    _S.ABORTED: set(),
})

_ENDING_BY_ACTION: Final = {TxnAction.COMMIT: _S.COMMITTING, TxnAction.ABORT: _S.ABORTING}
_FINAL_BY_ENDING: Final = {_S.COMMITTING: _S.COMMITTED, _S.ABORTING: _S.ABORTED}


def check_transition(txn: TxnId, current: TxnStatus, new: TxnStatus) -> None:
    """Raise ``InvalidTxnStatus`` unless ``current → new`` is in the table."""
    if not LEGAL.allows(current, new):
        raise InvalidTxnStatus(f"Txn {txn} cannot become {new.name}: it is {current.name}")


def ending_status(txn: TxnId, current: TxnStatus, action: TxnAction) -> TxnStatus:
    """The status an ``END_TXN(action)`` moves ``current`` to (checked against the table)."""
    new = _ENDING_BY_ACTION[action]
    if not LEGAL.allows(current, new):
        raise InvalidTxnStatus(
            f"Expect Txn {txn} to be in {TxnStatus.OPEN.name} or {new.name} to {action.name.lower()}, "
            f"but it is {current.name}"
        )
    return new


def final_status(ending: TxnStatus) -> TxnStatus:
    """COMMITTING → COMMITTED, ABORTING → ABORTED."""
    return _FINAL_BY_ENDING[ending]


def action_of(ending: TxnStatus) -> TxnAction:
    return TxnAction.COMMIT if ending is TxnStatus.COMMITTING else TxnAction.ABORT


def check_open(txn: TxnId, current: TxnStatus) -> None:
    """Registration and transactional sends/acks need an OPEN transaction."""
    if current is not TxnStatus.OPEN:
        raise InvalidTxnStatus(f"Expect Txn {txn} to be in {TxnStatus.OPEN.name} status but it is {current.name}")
