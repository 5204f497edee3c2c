"""The non-persistent topic, its subscriptions (all four types) and the registry of loaded ones."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.errors import ConsumerBusy, NotAllowed, ProducerBusy, SubscriptionNotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.subscription.consumer import Consumer, Delivery, SubType
from magnetar.broker.subscription.key_shared import StickyKeySelector, key_hash, sticky_key
from magnetar.broker.topic.producer import Producer
from magnetar.ledger.api import Position

log = logging.getLogger("magnetar.broker.nonpersistent")

TOPICS_MAX = 100_000
NON_PERSISTENT = "non-persistent"


class NonPersistentSubscription:
    def __init__(self, name: str, sub_type: int, key_shared_mode: int) -> None:
        self.name = name
        self.sub_type = sub_type
        self.consumers: list[Consumer] = []
        self._selector = StickyKeySelector(key_shared_mode) if sub_type == SubType.KEY_SHARED else None
        self._turn = itertools.count()
        self.msg_out_counter = 0
        self.bytes_out_counter = 0
        self.msg_drop_counter = 0

    def prune(self) -> None:
        """Forget consumers whose connection is gone (the connection does not tell this registry)."""
        for gone in [c for c in self.consumers if not c.endpoint.is_open or c.closed]:
            self.remove_consumer(gone)

    def add_consumer(self, consumer: Consumer) -> None:
        self.prune()
        if self.consumers and consumer.sub_type != self.sub_type:
            raise ConsumerBusy("Subscription is of different type")
        if self.sub_type == SubType.EXCLUSIVE and self.consumers:
            raise ConsumerBusy("Exclusive consumer is already connected")
        if self._selector is not None:
            self._selector.add(consumer)
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            if self._selector is not None:
                self._selector.remove(consumer)

    def _target(self, hash_value: int, partition: int) -> Consumer | None:
        live = self.consumers
        if not live:
            return None
        if self.sub_type == SubType.EXCLUSIVE:
            return live[0]
        if self.sub_type == SubType.FAILOVER:
            ordered = sorted(live, key=lambda c: (c.priority_level, c.name, c.consumer_id))
            return ordered[max(partition, 0) % len(ordered)]
        if self._selector is not None:
            return self._selector.select(hash_value)
        start = next(self._turn)
        for step in range(len(live)):  # Shared: the next consumer round the ring that has a permit
            candidate = live[(start + step) % len(live)]
            if candidate.can_receive:
                return candidate
        return None

    def deliver(self, position: Position, data: bytes, num_messages: int, hash_value: int, partition: int) -> bool:
        """Hand the message to this subscription's consumer for it, or drop it (no permit, no consumer)."""
        consumer = self._target(hash_value, partition)
        if consumer is None or not consumer.can_receive:
            self.msg_drop_counter += num_messages
            return False
        consumer.deliver([Delivery(position, data, num_messages, 0, None)])
        consumer.forget(position)  # nothing is redelivered: the consumer holds no unacked state here
        self.msg_out_counter += num_messages
        self.bytes_out_counter += len(data)
        return True

    def stats(self) -> dict[str, Any]:
        return {
            "type": SubType.LABELS.get(self.sub_type, "Exclusive"),
            "msgOutCounter": self.msg_out_counter,
            "bytesOutCounter": self.bytes_out_counter,
            "msgDropRate": 0.0,
            "msgDropCounter": self.msg_drop_counter,
            "msgBacklog": 0,
            "isDurable": False,
            "consumers": [
                {"consumerName": c.name, "availablePermits": c.permits, "msgOutCounter": c.msg_out_counter,
                 "bytesOutCounter": c.bytes_out_counter, "address": c.endpoint.remote_address,
                 "clientVersion": c.endpoint.client_version}
                for c in self.consumers
            ],
        }


class NonPersistentTopic:
    def __init__(self, name: TopicName) -> None:
        self.name = name
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self._entry_ids = itertools.count()
        self.msg_in_counter = 0
        self.bytes_in_counter = 0

    def prune(self) -> None:
        for gone in [p for p in self.producers.values() if not p.endpoint.is_open or p.closed]:
            self.remove_producer(gone)
        for sub in list(self.subscriptions.values()):
            sub.prune()
            if not sub.consumers:
                del self.subscriptions[sub.name]

    @property
    def idle(self) -> bool:
        self.prune()
        return not self.producers and not self.subscriptions

    def add_producer(self, producer: Producer) -> None:
        self.prune()
        if producer.name in self.producers:
            raise ProducerBusy(f"Producer with name '{producer.name}' is already connected to topic")
        self.producers[producer.name] = producer
        producer.ready = True

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        producer.closed = True

    def publish(self, producer: Producer, sequence_id: int, highest_sequence_id: int | None, num_messages: int,
                entry: bytes, metadata: proto.pb.MessageMetadata) -> asyncio.Future[Position]:
        """Fan out at once to every subscription; the receipt follows in SEND order. Nothing is stored."""
        position = Position(0, next(self._entry_ids))
        count = max(metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1, 1)
        self.msg_in_counter += count
        self.bytes_in_counter += len(entry)
        hash_value = key_hash(sticky_key(metadata))
        for sub in list(self.subscriptions.values()):
            sub.deliver(position, entry, count, hash_value, self.name.partition_index)
        done: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        done.set_result(position)
        return producer.track(sequence_id, highest_sequence_id, done)

    def subscribe(self, consumer: Consumer) -> NonPersistentSubscription:
        self.prune()
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            sub = NonPersistentSubscription(consumer.subscription_name, consumer.sub_type, consumer.key_shared_mode)
            self.subscriptions[sub.name] = sub
        try:
            sub.add_consumer(consumer)
        except Exception:
            if not sub.consumers:
                del self.subscriptions[sub.name]
            raise
        return sub

    def remove_consumer(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        sub.remove_consumer(consumer)
        if not sub.consumers:
            del self.subscriptions[sub.name]  # no backlog to keep: the subscription ends with its consumers

    def unsubscribe(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {consumer.subscription_name!r} not found")
        if [c for c in sub.consumers if c is not consumer]:
            raise ConsumerBusy("Subscription has other connected consumers")
        self.remove_consumer(consumer)

    def stats(self) -> dict[str, Any]:
        self.prune()
        subs = {name: sub.stats() for name, sub in sorted(self.subscriptions.items())}
        return {
            "msgInCounter": self.msg_in_counter,
            "bytesInCounter": self.bytes_in_counter,
            "msgOutCounter": sum(s.msg_out_counter for s in self.subscriptions.values()),
            "bytesOutCounter": sum(s.bytes_out_counter for s in self.subscriptions.values()),
            "msgDropRate": 0.0,
            "storageSize": 0,
            "backlogSize": 0,
            "publishers": [
                {"producerName": p.name, "producerId": p.producer_id, "address": p.endpoint.remote_address,
                 "clientVersion": p.endpoint.client_version}
                for p in self.producers.values()
            ],
            "subscriptions": subs,
        }


class NonPersistentTopics:
    """The loaded non-persistent topics, created on first use and dropped when nobody uses them."""

    def __init__(self) -> None:
        self.topics: dict[str, NonPersistentTopic] = {}

    def get(self, name: str) -> NonPersistentTopic | None:
        return self.topics.get(name)

    def get_or_create(self, name: TopicName) -> NonPersistentTopic:
        if name.domain != NON_PERSISTENT:
            raise NotAllowed(f"{name} is not a non-persistent topic")
        topic = self.topics.get(str(name))
        if topic is None:
            if len(self.topics) >= TOPICS_MAX:
                self.collect()
            if len(self.topics) >= TOPICS_MAX:
                raise NotAllowed(f"Too many non-persistent topics (at most {TOPICS_MAX})")
            topic = self.topics[str(name)] = NonPersistentTopic(name)
            log.info("created non-persistent topic %s", name)
        return topic

    def collect(self) -> None:
        """Drop the topics nobody produces to or consumes from."""
        for key in [k for k, t in self.topics.items() if t.idle]:
            del self.topics[key]

    def names(self, ns: NamespaceName) -> list[str]:
        self.collect()
        return sorted(k for k, t in self.topics.items() if t.name.namespace_name == ns)
