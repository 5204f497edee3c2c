"""The participants' side of ending a transaction, over the broker's topics (implements ``TxnParticipants``).

The coordinator calls :class:`BrokerParticipants` once per partition and once per subscription a
transaction touched. Each call loads the topic if needed (which recovers its transaction buffer and
pending-ack stores first), ends the transaction there and returns once the outcome is durable: the
commit/abort marker written, the acks applied to the cursor (flushed) or released, and the end recorded in
the pending-ack log. Repeating a call is harmless. A topic or subscription that no longer exists has
nothing waiting for the transaction, so ending there succeeds; so does a name that can never hold a
transaction's entries (not a topic name, a non-persistent topic, a coordinator's log): such an error is
permanent, and retrying it would leave the transaction ending for ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from magnetar.broker.errors import InvalidTopicName, ServiceNotReady, TopicNotFound
from magnetar.broker.names import TopicName
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.transactions.api import TxnAction, TxnId
from magnetar.broker.transactions.coordinators import is_coordinator_log
from magnetar.broker.transactions.listener import transactions_of
from magnetar.broker.transactions.topic_txn import TopicTransactions


class LoadsTopics(Protocol):
    """The loaded topics, and loading one (the topic registry)."""

    @property
    def loaded(self) -> Mapping[str, PersistentTopic]: ...

    async def get(self, topic: TopicName, *, create: bool) -> PersistentTopic: ...


class BrokerParticipants:
    def __init__(self, topics: LoadsTopics) -> None:
        self._topics = topics

    async def _transactions(self, topic: str) -> TopicTransactions | None:
        loaded = self._topics.loaded.get(topic)  # the coordinator names topics normalised: no parse when loaded
        if loaded is None or loaded.closed:
            try:
                name = TopicName.parse(topic)
            except InvalidTopicName:
                return None  # a name no topic has (logged before names were checked when added)
            if not name.persistent or is_coordinator_log(name):
                return None  # never holds a transaction's entries: permanent, nothing to end, never retried
            try:
                loaded = await self._topics.get(name, create=False)
            except TopicNotFound:
                return None
        transactions = transactions_of(loaded.txn)
        if transactions is None:
            raise ServiceNotReady(f"Topic {topic} has no transaction buffer")
        return transactions

    async def end_txn_on_partition(self, topic: str, txn: TxnId, action: TxnAction) -> None:
        transactions = await self._transactions(topic)
        if transactions is not None:
            await transactions.end_on_partition(txn, action)

    async def end_txn_on_subscription(self, topic: str, subscription: str, txn: TxnId, action: TxnAction) -> None:
        transactions = await self._transactions(topic)
        if transactions is not None:
            await transactions.end_on_subscription(subscription, txn, action)
