"""Two brokers in one process over one metadata store and one ledger store (the ``two_brokers`` fixture):
what one writes the other reads, and a topic unloaded from one is served by the other with everything it
stored - the ground the ownership and failover work stands on."""

from __future__ import annotations

import pytest

from magnetar import protocol as proto
from magnetar.app.standalone import Standalone
from magnetar.broker.admin.broker_admin import BrokerAdmin
from magnetar.broker.errors import TopicNotFound
from magnetar.broker.names import NamespaceName, TopicName
from tests.component.test_broker_wire import create_producer, entry, subscribe
from tests.component.wire import WirePeer

T = proto.pb.BaseCommand


async def test_namespaces_and_partitioned_topics_made_on_one_broker_are_seen_on_the_other(
    two_brokers: tuple[Standalone, Standalone],
) -> None:
    a, b = two_brokers
    ns = NamespaceName("public", "shared")
    await BrokerAdmin(a.broker).create_namespace(ns, {"deduplicationEnabled": True})
    topic = TopicName.parse("persistent://public/shared/orders")
    assert await a.broker.catalog.create_partitioned_topic(topic, 3)

    assert await b.broker.catalog.namespace_exists(ns)
    assert (await BrokerAdmin(b.broker).policies(ns))["deduplicationEnabled"] is True
    assert (await b.broker.catalog.partitioned_metadata(topic)).partitions == 3
    assert await b.broker.catalog.list_topics(ns) == [str(topic.partition(i)) for i in range(3)]
    assert not await b.broker.catalog.create_partitioned_topic(topic, 5)  # the name is taken, whoever asks


async def test_a_topic_unloaded_from_one_broker_is_served_by_the_other_with_what_it_stored(
    two_brokers: tuple[Standalone, Standalone],
) -> None:
    a, b = two_brokers
    topic = "persistent://public/default/moving"
    producer = await WirePeer.connect(a.broker_port)
    name = await create_producer(producer, topic, name="mover")
    for seq in range(3):
        producer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer=name))
    for _ in range(3):
        await producer.expect(T.SEND_RECEIPT)

    assert await a.broker.registry.unload(TopicName.parse(topic))
    await producer.expect(T.CLOSE_PRODUCER)  # the client looks the topic up again
    assert topic not in a.broker.registry.loaded

    consumer = await WirePeer.connect(b.broker_port)
    await subscribe(consumer, topic)
    bodies = []
    for _ in range(3):
        frame = await consumer.expect(T.MESSAGE)
        assert frame.payload is not None
        bodies.append(bytes(proto.entry_payload(frame.payload)))
    assert bodies == [b"m0", b"m1", b"m2"]
    again = await WirePeer.connect(b.broker_port)
    again.send(proto.commands.producer(topic, 1, 1, producer_name=name, epoch=1))
    success = (await again.expect(T.PRODUCER_SUCCESS)).command.producer_success
    assert success.last_sequence_id == 2  # deduplication carried over through the shared storage
    for peer in (producer, consumer, again):
        await peer.close()


async def test_a_namespace_policy_written_on_one_broker_applies_on_the_other_at_once(
    two_brokers: tuple[Standalone, Standalone],
) -> None:
    """Each broker caches the tenants' and namespaces' records it reads (magnetar.resources); the store's watch
    keeps that cache current whoever writes, so b acts on a's write without waiting for anything."""
    a, b = two_brokers
    ns = NamespaceName("public", "default")
    assert (await b.broker.catalog.auto_topic_creation(ns)).allowed  # read (and cached) by b first
    await b.broker.registry.get(TopicName.parse("persistent://public/default/before"), create=True)
    await BrokerAdmin(a.broker).set_policy(ns, "autoTopicCreationOverride", {"allowAutoTopicCreation": False})
    assert not (await b.broker.catalog.auto_topic_creation(ns)).allowed
    with pytest.raises(TopicNotFound):
        await b.broker.registry.get(TopicName.parse("persistent://public/default/after"), create=True)
    await BrokerAdmin(a.broker).create_tenant("acme", {"allowedClusters": ["standalone"]})
    await BrokerAdmin(b.broker).create_namespace(NamespaceName("acme", "app"), None)
    assert await a.broker.catalog.namespace_exists(NamespaceName("acme", "app"))
    await BrokerAdmin(a.broker).delete_namespace(NamespaceName("acme", "app"), force=False)
    assert not await b.broker.catalog.namespace_exists(NamespaceName("acme", "app"))
