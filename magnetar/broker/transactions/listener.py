"""Transactions as a topic listener, and a topic's transactions as their own type.

A loaded topic's transactions are its :class:`~magnetar.broker.topic.extensions.TxnPort` (built with the
topic, closed or deleted with it). A topic deleted while it is not loaded has its pending-ack logs and
buffer snapshot deleted here, before its managed ledger goes.
"""

from __future__ import annotations

from magnetar.broker.names import TopicName
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.transactions.snapshot import SnapshotStore
from magnetar.broker.transactions.topic_txn import TopicTransactions, delete_unloaded
from magnetar.ledger.api import ManagedLedgerConfig, ManagedLedgerFactory


def transactions_of(port: object) -> TopicTransactions | None:
    """A topic's transactions port (``PersistentTopic.txn``) as its transactions, None if it has none."""
    return port if isinstance(port, TopicTransactions) else None


class TransactionsListener(TopicListener):
    def __init__(
        self, ledgers: ManagedLedgerFactory, snapshots: SnapshotStore, config: ManagedLedgerConfig | None = None
    ) -> None:
        self._ledgers = ledgers
        self._snapshots = snapshots
        self._config = config

    async def unloaded_topic_deleting(self, topic: TopicName, cursors: list[str]) -> None:
        await delete_unloaded(self._ledgers, self._snapshots, topic, cursors, self._config)
