"""Three cluster brokers in one process, driven over the wire: lookups agree and converge, only the owner takes
producers, an unload hands producers to the destination (PIP-307), and two brokers that both believe they own
a topic cannot both acknowledge: the fence in the ledger store refuses the old owner's appends; the load
report a broker registers gives its rates."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.names import TopicName
from tests.component.cluster.conftest import Cluster
from tests.component.test_broker_wire import create_producer, entry, subscribe
from tests.component.wire import WirePeer

T = proto.pb.BaseCommand
REDIRECTS_MAX = 20


async def lookup(cluster: Cluster, topic: str, port: int) -> tuple[str, int]:
    """Follow LOOKUP from ``port`` as the official client does: (the broker URL to connect to, redirects)."""
    authoritative = False
    for hops in range(REDIRECTS_MAX + 1):
        peer = await WirePeer.connect(port)
        try:
            peer.send(proto.commands.lookup(topic, 1, authoritative=authoritative))
            answer = (await peer.expect(T.LOOKUP_RESPONSE)).command.lookupTopicResponse
        finally:
            await peer.close()
        assert answer.response != proto.pb.CommandLookupTopicResponse.Failed, answer.message
        if answer.response == proto.pb.CommandLookupTopicResponse.Connect:
            return answer.brokerServiceUrl, hops
        port, authoritative = cluster.by_url(answer.brokerServiceUrl).broker_port or 0, answer.authoritative
    raise AssertionError("too many redirects")


async def test_lookups_agree_and_only_the_owner_takes_producers(cluster: Cluster) -> None:
    topic = "persistent://public/default/wire-0"
    owner, hops = await lookup(cluster, topic, cluster.brokers[2].broker_port or 0)
    assert hops <= 2
    for broker in cluster.brokers:
        assert await lookup(cluster, topic, broker.broker_port or 0) == (owner, 0)
    for broker in cluster.brokers:
        peer = await WirePeer.connect(broker.broker_port or 0)
        peer.send(proto.commands.producer(topic, 1, 1))
        frame = await peer.expect(T.PRODUCER_SUCCESS, T.ERROR)
        if broker is cluster.by_url(owner):
            assert frame.command.type == T.PRODUCER_SUCCESS
        else:
            assert frame.command.error.error == proto.ServerErrorCode.ServiceNotReady
            assert "redo the lookup" in frame.command.error.message
        await peer.close()


async def test_an_unload_sends_producers_to_the_new_owner(cluster: Cluster) -> None:
    topic = "persistent://public/default/moving-0"
    owner_url, _ = await lookup(cluster, topic, cluster.brokers[0].broker_port or 0)
    owner = cluster.by_url(owner_url)
    producer = await WirePeer.connect(owner.broker_port or 0)
    name = await create_producer(producer, topic, name="mover")
    for seq in range(3):
        producer.send(proto.commands.send(1, seq), entry(seq, b"m%d" % seq, producer=name))
    for _ in range(3):
        await producer.expect(T.SEND_RECEIPT)
    assert owner.cluster is not None
    bundle = await owner.cluster.ownership.bundle_of(TopicName.parse(topic))
    destination = await owner.cluster.moves.unload(TopicName.parse(topic).namespace_name, bundle)
    close = (await producer.expect(T.CLOSE_PRODUCER)).command.close_producer
    assert destination is not None and close.assignedBrokerServiceUrl
    new_owner = cluster.by_url(close.assignedBrokerServiceUrl)
    assert new_owner is not owner
    # the client goes straight there (no lookup) and is served, with its sequence ids remembered
    again = await WirePeer.connect(new_owner.broker_port or 0)
    again.send(proto.commands.producer(topic, 1, 1, producer_name=name, epoch=1))
    success = (await again.expect(T.PRODUCER_SUCCESS)).command.producer_success
    assert success.last_sequence_id == 2
    for broker in cluster.brokers:
        assert (await lookup(cluster, topic, broker.broker_port or 0))[0] == close.assignedBrokerServiceUrl


async def test_two_brokers_believing_they_own_a_topic_cannot_both_acknowledge(cluster: Cluster) -> None:
    topic = "persistent://public/default/two-owners-0"
    owner_url, _ = await lookup(cluster, topic, cluster.brokers[0].broker_port or 0)
    old = cluster.by_url(owner_url)
    producer = await WirePeer.connect(old.broker_port or 0)
    name = await create_producer(producer, topic, name="zombie-writer")
    producer.send(proto.commands.send(1, 0), entry(0, b"before", producer=name))
    await producer.expect(T.SEND_RECEIPT)
    # the old owner's metadata session ends without it knowing (a pause past the session timeout)
    old_metadata = old.metadata
    assert isinstance(old_metadata, type(cluster.root))
    old_metadata.suspend()
    other = next(b for b in cluster.brokers if b is not old)
    new_url, _ = await lookup(cluster, topic, other.broker_port or 0)
    new = cluster.by_url(new_url)
    assert new is not old
    consumer = await WirePeer.connect(new.broker_port or 0)
    await subscribe(consumer, topic)  # the new owner opens the topic: it seals the old owner's ledger
    first = await consumer.expect(T.MESSAGE)
    assert first.payload is not None and bytes(proto.entry_payload(first.payload)) == b"before"
    # both believe they own it now; the old one's append is refused by the fence, never acknowledged
    assert old.cluster is not None
    await old.cluster.ownership.check_owned(TopicName.parse(topic))
    producer.send(proto.commands.send(1, 1), entry(1, b"zombie", producer=name))
    answer = await producer.expect(T.SEND_ERROR, T.CLOSE_PRODUCER)
    assert answer.command.type != T.SEND_RECEIPT
    old_metadata.resume()
    writer = await WirePeer.connect(new.broker_port or 0)
    writer.send(proto.commands.producer(topic, 1, 1, producer_name=name, epoch=1))
    assert (await writer.expect(T.PRODUCER_SUCCESS)).command.producer_success.last_sequence_id == 0
    writer.send(proto.commands.send(1, 1), entry(1, b"after", producer=name))
    await writer.expect(T.SEND_RECEIPT)
    second = await consumer.expect(T.MESSAGE)
    assert second.payload is not None and bytes(proto.entry_payload(second.payload)) == b"after"


async def test_the_load_report_gives_the_brokers_rates(cluster: Cluster) -> None:
    topic = "persistent://public/default/rates-0"
    owner = cluster.by_url((await lookup(cluster, topic, cluster.brokers[0].broker_port or 0))[0])
    assert owner.cluster is not None
    members = owner.cluster.members
    assert members.report().load.msg_rate_in == 0.0  # the first report is the rates' baseline
    peer = await WirePeer.connect(owner.broker_port or 0)
    name = await create_producer(peer, topic, name="rates")
    for i in range(5):
        peer.send(proto.commands.send(1, i), entry(i, b"x" * 100, producer=name))
        await peer.expect(T.SEND_RECEIPT)  # each waits for its chunk's flush: time passes between the reports
    load = members.report().load
    assert load.topics >= 1 and load.producers == 1
    assert load.msg_rate_in > 0 and load.throughput_in >= 100 * load.msg_rate_in
    assert f"public/default/{(await owner.broker.ownership.bundle_of(TopicName.parse(topic))).name}" in load.bundles
    await peer.close()
