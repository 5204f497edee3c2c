"""Ownership on a cluster: the bundles this broker owns, locked in the metadata store, and the lookup answer
every broker gives for a topic (the :class:`~magnetar.broker.cluster.ownership.Ownership` port).

A topic's bundle comes from its namespace's boundaries (cached; a change of the namespace's policies or local
policies drops the cache). A lookup (:meth:`ClusterOwnership.find`), as Pulsar's ``NamespaceService`` answers:

    bundle owned (its lock stands)        -> Connect to the owner, from every broker (``disabled``: retry)
    unowned, asked ``authoritative``      -> this broker takes the bundle, Connect here
    unowned, this broker leads (or no
    live leader is known)                 -> the least-loaded live broker (``assignment``): this one takes it,
                                             or Redirect there, authoritative
    unowned, another broker leads         -> Redirect to the leader, not authoritative

so a client reaches the owner in at most two redirects (leader, then the chosen broker; three while a bundle
handed to another broker is not taken yet: its source sends lookups on to the destination, never takes it
back, which is Pulsar's lesson about bundles moved away returning to their source), and every broker that
finds the bundle owned names the same broker. Concurrent lookups of one bundle share one decision.

Taking a bundle (:meth:`ClusterOwnership.acquire`) creates its ephemeral lock with this broker's
``NamespaceEphemeralData``; the namespace's boundaries are read from the store before and after, so a bundle a
split just replaced is never taken. A lock found to be another's on revalidation (``metadata/locks.py``) is
LOST: the bundle's topics are closed at once (``close_bundle``) and their clients look them up again. A lock
is never released on a lost session alone: the broker keeps serving (``zookeeperSessionExpiredPolicy`` =
reconnect), and its revalidation decides when the session is back. Two brokers may both believe they own a
bundle for a while (Pulsar's PIP-118 window); the ledgers' fence in the object store and the managed ledger's
compare-and-set keep the data correct, never this module.

Moves (unload, transfer, split, shutdown) are :mod:`magnetar.broker.cluster.moves`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from magnetar.broker.cluster.assignment import Assigner
from magnetar.broker.cluster.bundles import BundleRange, Bundles
from magnetar.broker.cluster.keys import (
    LOCAL_POLICIES_ROOT,
    OWNERSHIP_ROOT,
    POLICIES_ROOT,
    ClusterKeys,
    bundle_key,
    bundle_of_key,
)
from magnetar.broker.cluster.members import Members
from magnetar.broker.cluster.owned import BundleState, OwnedBundle, bundle_name
from magnetar.broker.cluster.ownership import BrokerUrls, Placement
from magnetar.broker.cluster.records import BrokerReport, ListenerAddress, OwnerData
from magnetar.broker.errors import ServiceNotReady
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.core.clock import Clock
from magnetar.metadata import api as md
from magnetar.metadata.coordination import CoordinationStore, LockBusy, SessionEvent
from magnetar.metadata.locks import LockManager, ResourceLock

log = logging.getLogger("magnetar.cluster")

FIND_ATTEMPTS_MAX = 8  # each attempt follows a change (a bundle settling, a split, a lock taken meanwhile)
SETTLE_WAIT_S = 10.0  # a lookup waits this long at most for a bundle of this broker to finish moving
NAMESPACES_CACHED_MAX = 10_000
OWNERS_CACHED_MAX = 100_000  # bundles whose owner a lookup read (kept current by the ownership watch)
HANDED_WAIT_MS = 30_000  # lookups of a bundle this broker handed away go to its destination this long at most
HANDED_MAX = 10_000


class CloseBundle(Protocol):
    """Close this broker's topics in ``bundle`` (clients told to go to ``assigned``, or to look up again)."""

    def __call__(self, ns: NamespaceName, bundle: BundleRange, assigned: BrokerUrls | None) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class _Resolved:
    """A lookup's outcome before a listener's URLs are applied."""

    owner: OwnerData
    here: bool
    redirect: bool = False
    authoritative: bool = True


def _urls(owner: OwnerData, listener: str | None) -> BrokerUrls:
    if not listener:
        return owner.urls
    address: ListenerAddress | None = owner.listeners.get(listener)
    if address is None:
        raise ServiceNotReady(f"the broker do not have {listener} listener")
    return BrokerUrls(address.pulsar, address.pulsar_tls, owner.urls.http, owner.urls.https)


class ClusterOwnership:
    def __init__(
        self,
        store: CoordinationStore,
        members: Members,
        clock: Clock,
        *,
        default_bundles: int = 4,
        close_bundle: CloseBundle | None = None,
    ) -> None:
        self.store = store
        self.members = members
        self.keys = ClusterKeys(store, default_bundles)
        self.clock = clock
        self.assigner = Assigner(clock)
        self.close_bundle: CloseBundle | None = close_bundle
        self._locks = LockManager(store, OWNERSHIP_ROOT, on_lost=self._lost)
        self._owned: dict[str, OwnedBundle] = {}
        self._bundles: OrderedDict[NamespaceName, Bundles] = OrderedDict()
        self._finding: dict[tuple[str, bool], asyncio.Future[_Resolved | None]] = {}
        self.incoming: dict[str, asyncio.Future[None]] = {}  # bundles handed to this broker, being taken
        self._key_changed: dict[str, set[asyncio.Event]] = {}
        self._owners: OrderedDict[str, OwnerData | None] = OrderedDict()  # lock key -> its value as last read
        self._ownership_events = 0  # changes below /namespace heard: a read that raced one is not cached
        self._handed: OrderedDict[str, tuple[BrokerReport, int]] = OrderedDict()  # bundle -> (destination, until)
        self._background: set[asyncio.Task[None]] = set()
        self._unwatch = [store.watch(LOCAL_POLICIES_ROOT, self._policies_changed),
                         store.watch(POLICIES_ROOT, self._policies_changed),
                         store.watch(OWNERSHIP_ROOT, self._lock_key_changed), store.listen(self._on_session)]
        self.on_change: Callable[[], None] = members.report_soon

    def _on_session(self, event: SessionEvent) -> None:
        """Watches may have missed writes while the connection was down: read everything again, and give up
        the bundles a split replaced meanwhile (their locks may just have been re-created by revalidation)."""
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED):
            self._bundles.clear()
            self._owners.clear()
            self._ownership_events += 1
            for waiting in self._key_changed.values():
                for changed in waiting:
                    changed.set()
            self.spawn(self._drop_replaced({o.ns for o in self._owned.values()}))

    async def _drop_replaced(self, namespaces: set[NamespaceName]) -> None:
        """Give up every bundle of ``namespaces`` held here that is no longer one of their bundles (a split
        by another broker while this one could not hear of it)."""
        await self._locks.revalidations_done(SETTLE_WAIT_S)
        for ns in namespaces:
            current = await self.bundles(ns, fresh=True)
            for owned in [o for o in self._owned.values() if o.ns == ns and o.serving]:
                if current.has(owned.range):
                    continue
                log.warning("bundle %s: replaced by a split elsewhere; giving it up", owned.name)
                owned.transition_to(BundleState.UNLOADING)
                if self.close_bundle is not None:
                    await self.close_bundle(owned.ns, owned.range, None)
                if owned.lock is not None:
                    await owned.lock.release()
                self._settle(owned, BundleState.RELEASED)

    @property
    def me_data(self) -> OwnerData:
        """The ownership record this broker writes (ServiceNotReady before it joined its cluster)."""
        return self.members.me.owner_data()

    # ---- bundles of a namespace ----------------------------------------------------------------------

    def _policies_changed(self, event: md.WatchEvent) -> None:
        parts = event.key.split("/")
        if len(parts) == 5:  # /admin/<root>/<tenant>/<namespace>
            ns = NamespaceName(parts[3], parts[4])
            self._bundles.pop(ns, None)
            if any(o.ns == ns for o in self._owned.values()):
                self.spawn(self._drop_replaced({ns}))

    async def bundles(self, ns: NamespaceName, *, fresh: bool = False) -> Bundles:
        cached = None if fresh else self._bundles.get(ns)
        if cached is not None:
            return cached
        found = (await self.keys.bundles(ns)).bundles
        self._bundles[ns] = found
        self._bundles.move_to_end(ns)
        while len(self._bundles) > NAMESPACES_CACHED_MAX:
            self._bundles.popitem(last=False)
        return found

    def remember_bundles(self, ns: NamespaceName, bundles: Bundles) -> None:
        self._bundles[ns] = bundles

    async def bundle_of(self, topic: TopicName) -> BundleRange:
        return (await self.bundles(topic.namespace_name)).find(str(topic))

    # ---- what this broker owns -----------------------------------------------------------------------

    def owned(self) -> list[OwnedBundle]:
        return list(self._owned.values())

    def owned_bundle(self, ns: NamespaceName, bundle: BundleRange) -> OwnedBundle | None:
        return self._owned.get(bundle_name(ns, bundle))

    def serving_names(self) -> tuple[str, ...]:
        """The bundles this broker serves (``tenant/ns/0x.._0x..``), for its load report."""
        return tuple(sorted(name for name, ob in self._owned.items() if ob.serving))

    async def check_owned(self, topic: TopicName) -> None:
        bundle = await self.bundle_of(topic)
        name = bundle_name(topic.namespace_name, bundle)
        handed = self.incoming.get(name)
        if handed is not None:  # a transfer sent this client here ahead of the lock: wait for the take
            with contextlib.suppress(TimeoutError, ServiceNotReady):
                await asyncio.wait_for(asyncio.shield(handed), SETTLE_WAIT_S)
        owned = self._owned.get(name)
        if owned is not None and owned.state is BundleState.ACQUIRING:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(owned.done), SETTLE_WAIT_S)
            owned = self._owned.get(owned.name)
        if owned is not None and owned.serving:
            return
        raise ServiceNotReady(
            f"Namespace bundle for topic ({topic}) not served by this instance:{self.members.broker_id}. "
            f"Please redo the lookup. Request is denied: namespace={topic.namespace_name}")

    async def acquire(self, ns: NamespaceName, bundle: BundleRange) -> OwnedBundle | None:
        """Take ``bundle``: the bundle now owned here, or None when another broker holds it (or a split
        replaced it: the namespace's cached boundaries are dropped). ServiceNotReady when the store fails."""
        name = bundle_name(ns, bundle)
        existing = self._owned.get(name)
        if existing is not None:
            if existing.state is BundleState.ACQUIRING:
                await asyncio.wait_for(asyncio.shield(existing.done), SETTLE_WAIT_S)
                return self._owned.get(name)
            return existing if existing.serving else None
        owned = self.begin(ns, bundle)
        try:
            lock = await self._take_lock(ns, bundle)
        except BaseException:
            self._settle(owned, BundleState.RELEASED)
            raise
        if lock is None:
            self._settle(owned, BundleState.RELEASED)
            return None
        self.finish(owned, lock)
        return owned

    def begin(self, ns: NamespaceName, bundle: BundleRange) -> OwnedBundle:
        """A bundle being taken (ACQUIRING): lookups and producers of its topics wait for it."""
        owned = OwnedBundle(ns, bundle)
        if owned.name in self._owned:
            raise ServiceNotReady(f"namespace bundle {owned.name} is already being taken or moved here")
        self._owned[owned.name] = owned
        return owned

    def finish(self, owned: OwnedBundle, lock: ResourceLock) -> None:
        """``owned``'s lock is held: it serves from now on."""
        self._handed.pop(owned.name, None)
        owned.lock = lock
        owned.transition_to(BundleState.OWNED)
        log.info("bundle %s: owned", owned.name)
        self.on_change()

    async def lock(self, ns: NamespaceName, bundle: BundleRange) -> ResourceLock | None:
        """The bundle's lock as it is (no check of the boundaries: a split takes its pieces' locks before the
        pieces exist); None when another broker holds it."""
        try:
            return await self._locks.acquire(bundle_key(ns, bundle), self.me_data.encode())
        except LockBusy:
            return None

    async def _take_lock(self, ns: NamespaceName, bundle: BundleRange) -> ResourceLock | None:
        try:
            if not (await self.bundles(ns, fresh=True)).has(bundle):
                return None
            lock = await self.lock(ns, bundle)
            if lock is None:
                return None
            if (await self.bundles(ns, fresh=True)).has(bundle):
                return lock
            await lock.release()  # split meanwhile: the range is no longer a bundle
            return None
        except md.MetadataError as exc:
            raise ServiceNotReady(f"Failed to acquire ownership for namespace bundle {ns}/{bundle}: {exc}") from exc

    def _settle(self, owned: OwnedBundle, state: BundleState) -> None:
        if not owned.settled:
            owned.transition_to(state)
        if self._owned.get(owned.name) is owned:
            del self._owned[owned.name]
            self.on_change()

    def release_settled(self, owned: OwnedBundle, state: BundleState) -> None:
        """A move is done with ``owned`` (RELEASED) or found it taken (LOST): forget it."""
        self._settle(owned, state)

    def _lost(self, lock: ResourceLock) -> None:
        found = bundle_of_key(lock.key)
        owned = self._owned.get(bundle_name(*found)) if found is not None else None
        if owned is None or owned.lock is not lock or owned.settled:
            return
        log.warning("bundle %s: ownership lost to another broker; closing its topics", owned.name)
        self._settle(owned, BundleState.LOST)
        self.spawn(self._close_lost(owned))

    async def _close_lost(self, owned: OwnedBundle) -> None:
        if self.close_bundle is not None:
            await self.close_bundle(owned.ns, owned.range, None)

    def spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("cluster background work failed")

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- lookups ---------------------------------------------------------------------------------------

    async def find(self, topic: TopicName, listener: str | None, authoritative: bool) -> Placement:
        ns = topic.namespace_name
        for _ in range(FIND_ATTEMPTS_MAX):
            bundle = await self.bundle_of(topic)
            resolved = await self._resolve_shared(ns, bundle, authoritative)
            if resolved is not None:
                return Placement(_urls(resolved.owner, listener), resolved.here, resolved.redirect,
                                 resolved.authoritative)
            self._bundles.pop(ns, None)  # the bundle changed under the lookup: read the boundaries again
        raise ServiceNotReady(f"Namespace bundle for topic {topic} keeps changing: look it up again")

    async def _resolve_shared(self, ns: NamespaceName, bundle: BundleRange, authoritative: bool) -> _Resolved | None:
        key = (bundle_name(ns, bundle), authoritative)
        pending = self._finding.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_task(self._resolve(ns, bundle, authoritative))
            self._finding[key] = pending
            pending.add_done_callback(lambda _f: self._finding.pop(key, None))
        return await asyncio.shield(pending)

    async def _resolve(self, ns: NamespaceName, bundle: BundleRange, authoritative: bool) -> _Resolved | None:
        """None: the bundle is no longer one (look it up again from the boundaries)."""
        name = bundle_name(ns, bundle)
        mine = self._owned.get(name)
        if mine is not None and not mine.serving:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(mine.done), SETTLE_WAIT_S)
            mine = self._owned.get(name)
        if mine is not None:
            if mine.serving:
                return _Resolved(self.me_data, here=True)
            raise ServiceNotReady(f"Namespace bundle {name} is being moved: look it up again")
        try:
            owner = await self._owner(ns, bundle)
        except md.MetadataError as exc:
            raise ServiceNotReady(f"Cannot read the owner of namespace bundle {name}: {exc}") from exc
        if owner is not None:
            self._handed.pop(name, None)
        else:
            handed = await self._handed_to(name)
            if handed is not None:  # handed away, not taken yet: the destination takes it, never this broker
                return _Resolved(handed, here=False, redirect=True, authoritative=True)
        if owner is not None and not owner.same_broker(self.me_data):
            if owner.disabled:
                raise ServiceNotReady(f"Namespace bundle {name} is being unloaded: look it up again")
            return _Resolved(owner, here=False)
        # unowned, or held by this broker's previous session (a restart): decide (or take it back)
        if owner is None and not authoritative:
            chosen = await self._decide(name)
            if chosen is not None:
                return chosen
        return await self._take_here(ns, bundle)

    async def _take_here(self, ns: NamespaceName, bundle: BundleRange) -> _Resolved | None:
        owned = await self.acquire(ns, bundle)
        if owned is not None:
            return _Resolved(self.me_data, here=True)
        try:
            owner = await self.keys.owner(ns, bundle)
        except md.MetadataError as exc:
            raise ServiceNotReady(f"Cannot read the owner of namespace bundle {ns}/{bundle}: {exc}") from exc
        if owner is None:
            return None  # a split replaced it, or its holder let go meanwhile: look again
        return _Resolved(owner, here=owner.same_broker(self.me_data))

    async def _decide(self, name: str) -> _Resolved | None:
        """The leader's decision, or a redirect to the leader; None: this broker is to take it."""
        try:
            leader = await self.members.leader()
            if leader is not None and leader.broker_id != self.members.broker_id:
                return _Resolved(leader.owner_data(), here=False, redirect=True, authoritative=False)
            live = await self.members.live()
        except md.MetadataError as exc:
            raise ServiceNotReady(f"Cannot reach the cluster's metadata to assign {name}: {exc}") from exc
        chosen = self.assigner.choose(name, {b: r.load.bundles for b, r in live.items()})
        if chosen is None:
            if self.members.registered or not live:
                return None  # nobody else is eligible: this broker takes it
            raise ServiceNotReady(f"No broker was available to own {name}")
        if chosen == self.members.broker_id:
            return None
        report: BrokerReport = live[chosen]
        return _Resolved(report.owner_data(), here=False, redirect=True, authoritative=True)

    # ---- bundles handed to another broker ------------------------------------------------------------

    def hand_over(self, ns: NamespaceName, bundle: BundleRange, destination: BrokerReport) -> None:
        """This broker is giving ``bundle`` to ``destination`` (a transfer): until that broker owns it, for
        ``HANDED_WAIT_MS`` at most and while it is registered, lookups reaching this broker for the unowned
        bundle are sent there with ``authoritative`` (it takes the bundle), so a lookup racing the
        destination's take never brings the bundle back here (the leader may have chosen this broker for it
        moments ago, and this broker has just become the least loaded)."""
        name = bundle_name(ns, bundle)
        self._handed[name] = (destination, self.clock.now_ms() + HANDED_WAIT_MS)
        self._handed.move_to_end(name)
        while len(self._handed) > HANDED_MAX:
            self._handed.popitem(last=False)

    async def _handed_to(self, name: str) -> OwnerData | None:
        entry = self._handed.get(name)
        if entry is None:
            return None
        destination, until_ms = entry
        try:
            live = await self.members.live()
        except md.MetadataError as exc:
            raise ServiceNotReady(f"Cannot reach the cluster's metadata to place {name}: {exc}") from exc
        if self.clock.now_ms() > until_ms or destination.broker_id not in live:
            self._handed.pop(name, None)  # the destination did not take it in time, or is gone: decide afresh
            return None
        return destination.owner_data()

    # ---- waiting for a lock key to change ------------------------------------------------------------

    def _lock_key_changed(self, event: md.WatchEvent) -> None:
        self._ownership_events += 1
        self._owners.pop(event.key, None)
        for waiting in self._key_changed.get(event.key, ()):
            waiting.set()

    async def _owner(self, ns: NamespaceName, bundle: BundleRange) -> OwnerData | None:
        """The bundle's owner as its lock says, from a cache the ownership watch keeps current (a lookup of an
        owned bundle costs no store read); a stale answer sends a client to a broker that tells it to look up
        again, never to wrong data."""
        key = bundle_key(ns, bundle)
        if key in self._owners:
            self._owners.move_to_end(key)
            return self._owners[key]
        heard = self._ownership_events
        owner = await self.keys.owner(ns, bundle)
        if heard == self._ownership_events:
            self._owners[key] = owner
            while len(self._owners) > OWNERS_CACHED_MAX:
                self._owners.popitem(last=False)
        return owner

    def watch_key(self, ns: NamespaceName, bundle: BundleRange) -> tuple[asyncio.Event, Callable[[], None]]:
        """An event set on every change of the bundle's lock key from now on, and its unwatch function. Clear
        it, read the key, decide, then wait on it: a change after the read is never missed."""
        key = bundle_key(ns, bundle)
        event = asyncio.Event()
        self._key_changed.setdefault(key, set()).add(event)

        def unwatch() -> None:
            waiting = self._key_changed.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._key_changed[key]

        return event, unwatch

    async def idle(self, timeout_s: float) -> None:
        """Until no revalidation, take or close started by an event is running (tests, orderly shutdown)."""
        await self._locks.revalidations_done(timeout_s)
        pending = [*self._background, *self.incoming.values()]
        if pending:
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), timeout_s)

    # ---- the rest of the port --------------------------------------------------------------------------

    def me(self) -> BrokerUrls:
        return self.me_data.urls

    async def other_brokers(self) -> list[BrokerUrls]:
        live = await self.members.live()
        return [r.urls for b, r in sorted(live.items()) if b != self.members.broker_id]

    async def leader(self) -> BrokerUrls | None:
        leader = await self.members.leader()
        return leader.urls if leader is not None else None

    async def close(self) -> None:
        """Stop watching and give up every lock (their keys are deleted; nothing is unloaded: ``moves`` does
        that first at an orderly shutdown)."""
        for stop in self._unwatch:
            stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._locks.close()
        for owned in list(self._owned.values()):
            self._settle(owned, BundleState.RELEASED if owned.state is not BundleState.OWNED
                         else BundleState.LOST)
