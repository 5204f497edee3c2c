"""TopicHarness: persistent topics over in-memory stores, their clients over in-memory endpoints.

Topic and subscription lifecycles are tested without a socket, the way h11 joins two endpoints through an
in-memory wire: the broker's real topic registry and catalog run over ``MemoryMetadataStore`` and
``MemoryLedgerStore`` with a manual clock; producers and consumers write their frames into a
:class:`MemoryEndpoint`, which decodes them so a test reads receipts, messages and close commands as the
client would. Waits are on events with bounded timeouts, never on sleeps.

    harness = await TopicHarness.start()
    topic = await harness.topic("t")
    producer = await harness.producer(topic)
    await harness.send(topic, producer, 0, b"hello")
    consumer = await harness.subscribe(topic, "sub")
    assert await harness.received(consumer, 1) == [b"hello"]
    await harness.close()
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from magnetar import protocol as proto
from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import TopicName
from magnetar.broker.registry.catalog import TopicCatalog
from magnetar.broker.registry.registry import TopicRegistry, TopicSettings
from magnetar.broker.subscription.consumer import Consumer, SubType
from magnetar.broker.topic.access import Granted
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.producer import AccessMode, Producer
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import InitialPosition, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.resources import MetadataResources
from magnetar.storage.memory import MemoryLedgerStore

T = proto.pb.BaseCommand
WAIT_S = 5.0
NAMESPACE = "public/default"


class MemoryEndpoint:
    """The broker's ``Endpoint`` in memory: every frame written to it is decoded and kept in order."""

    remote_address = "memory"
    client_version = "topic-harness"
    protocol_version = 20
    connected_since_ms = 0

    def __init__(self) -> None:
        self.is_open = True
        self.frames: list[proto.Frame] = []
        self.forgotten_producers: list[int] = []
        self.forgotten_consumers: list[int] = []
        self._decoder = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE))
        self._arrived = asyncio.Event()

    def send_frame(self, frame: bytes) -> None:
        if self.is_open:
            self._feed(frame)

    def send_frame_parts(self, head: bytes, payload: bytes) -> None:
        if self.is_open:
            self._feed(head + payload)

    def _feed(self, data: bytes) -> None:
        self._decoder.feed(data)
        while (frame := self._decoder.next_frame()) is not None:
            self.frames.append(frame)
        self._arrived.set()

    def forget_producer(self, producer_id: int) -> None:
        self.forgotten_producers.append(producer_id)

    def forget_consumer(self, consumer_id: int) -> None:
        self.forgotten_consumers.append(consumer_id)

    async def drain(self) -> None:
        return None

    def has_output_room(self) -> bool:
        return True

    def output_turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def output_turn_if_free(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return contextlib.nullcontext(True)

    def commands(self, kind: int) -> list[proto.pb.BaseCommand]:
        return [f.command for f in self.frames if f.command.type == kind]

    async def wait_for(self, kind: int, count: int = 1) -> list[proto.pb.BaseCommand]:
        """At least ``count`` commands of ``kind`` (bounded wait); all of them so far."""
        async with asyncio.timeout(WAIT_S):
            while len(found := self.commands(kind)) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return found


@dataclass
class TopicHarness:
    config: BrokerConfig
    metadata: MemoryMetadataStore
    store: MemoryLedgerStore
    ledgers: LedgerFactory
    catalog: TopicCatalog
    registry: TopicRegistry
    clock: ManualClock
    _ids: int = 0
    _endpoints: list[MemoryEndpoint] = field(default_factory=list)

    @classmethod
    async def start(cls, config: BrokerConfig | None = None) -> TopicHarness:
        config = config or BrokerConfig()
        clock = ManualClock()
        metadata, store = MemoryMetadataStore(clock=clock), MemoryLedgerStore(clock=clock)
        ledgers = LedgerFactory(store, metadata, config=config.managed_ledger, clock=clock)
        resources = MetadataResources(metadata)
        catalog = TopicCatalog(config, resources, ledgers)
        await resources.namespaces.put(TopicName.parse(f"persistent://{NAMESPACE}/x").namespace_name, {})

        async def dedup(_topic: TopicName) -> bool:
            return config.broker_deduplication_enabled

        registry = TopicRegistry(catalog, ledgers, clock, settings=TopicSettings(ledger_config=config.managed_ledger),
                                 dedup_enabled=dedup)
        return cls(config, metadata, store, ledgers, catalog, registry, clock)

    @staticmethod
    def name(local: str) -> TopicName:
        return TopicName.parse(f"persistent://{NAMESPACE}/{local}")

    async def topic(self, local: str = "t", *, create: bool = True) -> PersistentTopic:
        return await self.registry.get(self.name(local), create=create)

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def endpoint(self) -> MemoryEndpoint:
        endpoint = MemoryEndpoint()
        self._endpoints.append(endpoint)
        return endpoint

    async def producer(self, topic: PersistentTopic, name: str = "p",
                       mode: AccessMode = AccessMode.SHARED) -> Producer:
        producer = Producer(
            endpoint=self.endpoint(), producer_id=self._next_id(), name=name, topic_name=str(topic.name),
            partition=topic.name.partition_index, epoch=0, access_mode=mode, user_provided_name=True,
            created_ms=self.clock.now_ms(),
        )
        admission = await topic.admit_producer(producer, None)
        assert isinstance(admission, Granted), admission
        return producer

    async def send(self, topic: PersistentTopic, producer: Producer, sequence_id: int, body: bytes) -> Position:
        metadata = proto.pb.MessageMetadata(producer_name=producer.name, sequence_id=sequence_id,
                                            publish_time=self.clock.now_ms())
        future = topic.publish(producer, sequence_id, None, 1, proto.make_entry(metadata, body), metadata)
        async with asyncio.timeout(WAIT_S):
            return await future

    async def subscribe(self, topic: PersistentTopic, subscription: str, *, sub_type: int = SubType.EXCLUSIVE,
                        durable: bool = True, permits: int = 1000) -> Consumer:
        consumer = Consumer(
            endpoint=self.endpoint(), consumer_id=self._next_id(), name=f"c{self._ids}",
            topic_name=str(topic.name), subscription_name=subscription, sub_type=sub_type, priority_level=0,
            partition=topic.name.partition_index, created_ms=self.clock.now_ms(),
        )
        sub = await topic.subscribe(consumer, durable=durable, initial_position=InitialPosition.EARLIEST, start=None)
        sub.flow(consumer, permits)
        return consumer

    @staticmethod
    async def received(consumer: Consumer, count: int) -> list[bytes]:
        """The bodies of the first ``count`` messages the consumer got (bounded wait)."""
        endpoint = consumer.endpoint
        assert isinstance(endpoint, MemoryEndpoint)
        await endpoint.wait_for(T.MESSAGE, count)
        frames = [f for f in endpoint.frames if f.command.type == T.MESSAGE][:count]
        return [bytes(proto.entry_payload(f.payload)) for f in frames if f.payload is not None]

    async def close(self) -> None:
        await self.registry.close_all()
        await self.ledgers.close()
        await self.store.close()
        await self.metadata.close()
