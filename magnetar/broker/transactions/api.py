"""The seam between the transaction coordinator and the topics that take part in transactions.

The coordinator (TC) decides; participants (a topic's transaction buffer, a subscription's pending-ack
store) hold what a transaction wrote or acked until the TC tells them how it ended. In Pulsar the TC sends
``END_TXN_ON_PARTITION`` / ``END_TXN_ON_SUBSCRIPTION`` to the owning broker; in magnetar the owner is the
same process, so the TC calls a :class:`TxnParticipants` directly (the wire commands are still served for
clients that send them). Participants ask the TC, through :class:`TxnRegistry`, whether a transaction may
still write to a partition or ack on a subscription.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Protocol

from magnetar.broker.errors import BrokerError
from magnetar.protocol.server_errors import ServerErrorCode


@dataclass(frozen=True, slots=True, order=True)
class TxnId:
    """``(most, least)``: most is the coordinator id, least a sequence within that coordinator."""

    most: int
    least: int

    def __str__(self) -> str:  # Pulsar prints a TxnID as "(most,least)"
        return f"({self.most},{self.least})"


class TxnAction(enum.IntEnum):
    """The wire's ``TxnAction`` values."""

    COMMIT = 0
    ABORT = 1


class TxnError(BrokerError):
    """Root of the transaction errors a client can see; each carries its wire code."""


class CoordinatorNotFound(TxnError):
    server_error: ClassVar[ServerErrorCode] = ServerErrorCode.TransactionCoordinatorNotFound


class InvalidTxnStatus(TxnError):
    server_error: ClassVar[ServerErrorCode] = ServerErrorCode.InvalidTxnStatus


class TransactionConflict(TxnError):
    server_error: ClassVar[ServerErrorCode] = ServerErrorCode.TransactionConflict


class TransactionNotFound(TxnError):
    server_error: ClassVar[ServerErrorCode] = ServerErrorCode.TransactionNotFound


class TxnParticipants(Protocol):
    """What the coordinator calls to end a transaction on the topics and subscriptions it touched.

    Both calls are idempotent (a retry after a crash repeats them) and return once the outcome is durable:
    the commit/abort marker appended to the partition, the pending acks made real or released.
    """

    async def end_txn_on_partition(self, topic: str, txn: TxnId, action: TxnAction) -> None: ...

    async def end_txn_on_subscription(self, topic: str, subscription: str, txn: TxnId, action: TxnAction) -> None: ...


class TxnRegistry(Protocol):
    """What participants ask the coordinator before accepting a transactional SEND or ACK.

    Each raises :class:`TransactionNotFound` for an unknown or finished transaction,
    :class:`InvalidTxnStatus` for one that is no longer open, and :class:`TxnError` when the partition or
    subscription was not registered with ``ADD_PARTITION_TO_TXN`` / ``ADD_SUBSCRIPTION_TO_TXN``.
    """

    def check_produce(self, txn: TxnId, topic: str) -> None: ...

    def check_ack(self, txn: TxnId, topic: str, subscription: str) -> None: ...

    def owner_of(self, txn: TxnId) -> str | None:
        """The role that opened ``txn`` (None: opened without authentication, anyone may use it);
        :class:`TransactionNotFound` for an unknown or finished transaction, :class:`CoordinatorNotFound` when
        its coordinator is not here."""
        ...

    def check_decided(self, txn: TxnId, action: TxnAction) -> None:
        """An END_TXN_ON_PARTITION / _SUBSCRIPTION from the wire may end ``txn`` only as its coordinator
        decided: :class:`TransactionNotFound` unless the transaction is ending here, :class:`InvalidTxnStatus`
        while it is open or when it is ending the other way."""
        ...
