"""A stand-in for the transaction coordinator's registry (``TxnRegistry``) and a driver of participants,
for tests of the topic side of transactions before (and without) the real coordinator."""

from __future__ import annotations

import itertools

from magnetar.broker.transactions.api import (
    InvalidTxnStatus,
    TransactionNotFound,
    TxnAction,
    TxnError,
    TxnId,
    TxnParticipants,
)


class FakeRegistry:
    """Open transactions and what they registered; ``end`` drives the participants like the TC does."""

    def __init__(self, tc_id: int = 0) -> None:
        self._sequence = itertools.count()
        self._tc_id = tc_id
        self.partitions: dict[TxnId, set[str]] = {}
        self.subscriptions: dict[TxnId, set[tuple[str, str]]] = {}
        self.ended: set[TxnId] = set()
        self.decided: dict[TxnId, TxnAction] = {}

    def new_txn(self) -> TxnId:
        txn = TxnId(self._tc_id, next(self._sequence))
        self.partitions[txn] = set()
        self.subscriptions[txn] = set()
        return txn

    def add_partition(self, txn: TxnId, topic: str) -> None:
        self.partitions[txn].add(topic)

    def add_subscription(self, txn: TxnId, topic: str, subscription: str) -> None:
        self.subscriptions[txn].add((topic, subscription))

    def _open(self, txn: TxnId) -> None:
        if txn in self.ended:
            raise InvalidTxnStatus(f"Transaction {txn} is not open")
        if txn not in self.partitions:
            raise TransactionNotFound(f"Transaction {txn} not found")

    def check_produce(self, txn: TxnId, topic: str) -> None:
        self._open(txn)
        if topic not in self.partitions[txn]:
            raise TxnError(f"Partition {topic} is not registered with transaction {txn}")

    def check_ack(self, txn: TxnId, topic: str, subscription: str) -> None:
        self._open(txn)
        if (topic, subscription) not in self.subscriptions[txn]:
            raise TxnError(f"Subscription {topic} / {subscription} is not registered with transaction {txn}")

    def decide(self, txn: TxnId, action: TxnAction) -> None:
        """The coordinator's decision (COMMITTING or ABORTING): what END_TXN_ON_* from the wire may do."""
        self.ended.add(txn)
        self.decided[txn] = action

    def owner_of(self, txn: TxnId) -> str | None:
        return None  # opened without authentication: anyone may use it

    def check_decided(self, txn: TxnId, action: TxnAction) -> None:
        if txn not in self.partitions:
            raise TransactionNotFound(f"Transaction {txn} not found")
        decided = self.decided.get(txn)
        if decided is None:
            raise InvalidTxnStatus(f"Transaction {txn} is OPEN: only its coordinator ends it")
        if decided is not action:
            raise InvalidTxnStatus(f"Transaction {txn} is ending by {decided.name}, not {action.name}")

    async def end(self, participants: TxnParticipants, txn: TxnId, action: TxnAction) -> None:
        self.decide(txn, action)
        for topic in sorted(self.partitions[txn]):
            await participants.end_txn_on_partition(topic, txn, action)
        for topic, subscription in sorted(self.subscriptions[txn]):
            await participants.end_txn_on_subscription(topic, subscription, txn, action)
