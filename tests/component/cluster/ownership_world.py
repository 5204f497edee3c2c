"""Brokers' cluster parts in one process on one in-memory metadata tree (each broker a session of its own):
membership, bundle ownership and moves, without topics. A test's "client" follows lookups from broker to
broker as the official client does (Redirect: ask there, with its authoritative flag; Connect: done)."""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.broker.cluster.bundle_owner import ClusterOwnership
from magnetar.broker.cluster.bundles import BundleRange
from magnetar.broker.cluster.members import Members
from magnetar.broker.cluster.moves import BundleMoves
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.cluster.records import BrokerReport, Load
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.core.clock import SystemClock
from magnetar.metadata import MemoryMetadataStore

REDIRECTS_MAX = 20  # the official client's maxLookupRedirects


@dataclass
class Node:
    name: str
    store: MemoryMetadataStore
    members: Members
    ownership: ClusterOwnership
    moves: BundleMoves
    closed: list[tuple[str, str, str | None]] = field(default_factory=list)  # (ns, bundle, assigned url)

    @property
    def url(self) -> str:
        return self.members.me.urls.pulsar or ""


def urls(name: str) -> BrokerUrls:
    return BrokerUrls(f"pulsar://{name}:6650", None, f"http://{name}:8080", None)


class Handoff:
    def __init__(self, world: World) -> None:
        self.world = world

    async def prepare(self, destination: BrokerReport, ns: NamespaceName, bundle: BundleRange) -> None:
        if self.world.handoffs_lost:
            raise ConnectionError(f"{destination.broker_id}: the request to take {bundle.name} was lost")
        self.world.by_id[destination.broker_id].moves.take(ns, bundle)


class World:
    def __init__(self) -> None:
        self.root = MemoryMetadataStore()
        self.nodes: dict[str, Node] = {}
        self.by_id: dict[str, Node] = {}
        self.handoffs_lost = False  # a transfer's request to the destination fails (it is slow, or cut off)

    async def start(self, name: str) -> Node:
        store = self.root.another_session()
        clock = SystemClock()
        node_ref: list[Node] = []

        def load() -> Load:
            return Load(bundles=node_ref[0].ownership.serving_names()) if node_ref else Load()

        me = BrokerReport(f"{name}:8080", urls(name), start_ms=clock.now_ms())
        members = Members(store, clock, load=load, report_interval_s=3600)
        ownership = ClusterOwnership(store, members, clock)
        moves = BundleMoves(ownership, Handoff(self), take_wait_s=5.0)
        node = Node(name, store, members, ownership, moves)
        node_ref.append(node)

        async def close_bundle(ns: NamespaceName, bundle: BundleRange, assigned: BrokerUrls | None) -> None:
            node.closed.append((str(ns), bundle.name, assigned.pulsar if assigned else None))

        ownership.close_bundle = close_bundle
        await members.start(me)
        self.nodes[name] = node
        self.by_id[me.broker_id] = node
        return node

    def at(self, url: str) -> Node:
        return next(n for n in self.nodes.values() if n.url == url)

    async def lookup(self, topic: str, via: str) -> tuple[str, int]:
        """Where a client ends up for ``topic`` starting at broker ``via``: (broker url, redirects)."""
        name = TopicName.parse(topic)
        node, authoritative = self.nodes[via], False
        for hops in range(REDIRECTS_MAX + 1):
            placement = await node.ownership.find(name, None, authoritative)
            assert placement.urls is not None and placement.urls.pulsar is not None
            if not placement.redirect:
                return placement.urls.pulsar, hops
            node, authoritative = self.at(placement.urls.pulsar), placement.authoritative
        raise AssertionError(f"more than {REDIRECTS_MAX} redirects for {topic}")

    async def settle(self) -> None:
        """Until every broker's background work (revalidations, takes, closes) is done."""
        for node in self.nodes.values():
            await node.ownership.idle(10.0)

    async def close(self) -> None:
        for node in self.nodes.values():
            await node.ownership.close()
            await node.members.close()
            await node.store.close()
