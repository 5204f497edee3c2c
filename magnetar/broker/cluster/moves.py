"""Moving bundles between brokers: unload and transfer, the destination's take, split, and the orderly shutdown.

Unload of a bundle this broker owns (Pulsar's ``OwnedBundle.handleUnloadRequest`` with PIP-307's transfer):

1. choose the destination: the one asked for, else the least-loaded other live broker (none: a plain unload,
   whoever looks the topics up next gets them assigned);
2. the bundle stops serving (UNLOADING: new producers and consumers are told to look it up again) and its
   lock is marked ``disabled`` (other brokers answer "being unloaded, retry" instead of naming this one);
3. the destination is told to take the bundle as soon as its lock goes (:class:`Handoff`; it waits for the
   key's deletion, and holds the clients that reach it first until then);
4. the bundle's topics close: accepted sends are answered, their ledgers sealed, cursors written, and every
   producer and consumer gets CLOSE_PRODUCER / CLOSE_CONSUMER with ``assignedBrokerServiceUrl`` = the
   destination, which the official client connects to without a lookup;
5. the lock is released; the destination's take creates it (meanwhile lookups that reach the source are sent
   on to the destination, which takes the bundle if its own take has not: never back to the source).

Nothing is lost or duplicated by a move: the source wrote everything it acknowledged before releasing, the
destination opens the topics only after (its recovery seals the source's ledgers in the object store anyway),
and producers resend what was not acknowledged, which deduplication drops if it had landed.

Split (Pulsar's ``splitAndOwnBundle``), on the bundle's owner: the pieces' locks are taken first, then the
namespace's boundaries are rewritten (compare-and-set), then the parent's lock is released; a broker that
takes a bundle checks the boundaries before and after, so nobody ever owns the parent and a piece at once.
The topics stay loaded (they now belong to the pieces, owned here); ``unload`` moves the pieces on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from magnetar.broker.cluster.bundle_owner import ClusterOwnership
from magnetar.broker.cluster.bundles import BundleError, BundleRange, SplitAlgorithm, split_positions
from magnetar.broker.cluster.owned import BundleState, OwnedBundle, bundle_name
from magnetar.broker.cluster.records import BrokerReport, OwnerData
from magnetar.broker.errors import InvalidRequest, NotFound, ServiceNotReady
from magnetar.broker.names import NamespaceName
from magnetar.metadata import api as md
from magnetar.metadata.coordination import LockBusy
from magnetar.metadata.locks import ResourceLock

log = logging.getLogger("magnetar.cluster")

TAKE_WAIT_S = 30.0  # a destination waits this long for the source to let go of a bundle
TAKE_ATTEMPTS_MAX = 64  # each attempt follows a change of the bundle's lock key
PREPARE_TIMEOUT_S = 5.0
UNLOADS_PARALLEL_MAX = 8  # bundles unloaded at once at shutdown
_Taken = tuple[OwnedBundle, ResourceLock]


class Handoff(Protocol):
    """Tells another broker to take a bundle as soon as this one lets go of it (the server supplies it)."""

    async def prepare(self, destination: BrokerReport, ns: NamespaceName, bundle: BundleRange) -> None: ...


class BundleMoves:
    def __init__(self, owner: ClusterOwnership, handoff: Handoff | None = None, *,
                 take_wait_s: float = TAKE_WAIT_S) -> None:
        self.owner = owner
        self.handoff = handoff
        self.take_wait_s = take_wait_s

    # ---- unload and transfer -----------------------------------------------------------------------

    async def _destination(self, name: str, asked: str | None, transfer: bool) -> BrokerReport | None:
        members = self.owner.members
        live = await members.live()
        if asked:
            if asked == members.broker_id:
                raise InvalidRequest(f"the destination broker {asked} already owns {name}")
            if asked not in live:
                raise NotFound(f"destination broker {asked} is not an active broker")
            return live[asked]
        if not transfer:
            return None
        others = {b: r.load.bundles for b, r in live.items() if b != members.broker_id}
        chosen = self.owner.assigner.choose(name, others)
        return live[chosen] if chosen is not None else None

    async def unload(self, ns: NamespaceName, bundle: BundleRange, *, destination: str | None = None,
                     transfer: bool = True) -> str | None:
        """Give up ``bundle`` (owned here), to ``destination`` or the least-loaded other broker when
        ``transfer``; returns the destination's id (None: unloaded for anyone to take)."""
        owned = self.owner.owned_bundle(ns, bundle)
        if owned is None or not owned.serving:
            raise ServiceNotReady(f"namespace bundle {ns}/{bundle} is not served by this broker")
        dest = await self._destination(owned.name, destination, transfer)
        if not owned.serving:  # moved meanwhile
            raise ServiceNotReady(f"namespace bundle {ns}/{bundle} is already moving")
        owned.transition_to(BundleState.UNLOADING)
        self.owner.on_change()
        log.info("bundle %s: unloading%s", owned.name, f" to {dest.broker_id}" if dest else "")
        lock = owned.lock
        assert lock is not None
        await self._disable(lock)
        if dest is not None and self.handoff is not None:
            try:
                await asyncio.wait_for(self.handoff.prepare(dest, ns, bundle), PREPARE_TIMEOUT_S)
            except Exception as exc:  # the clients then look the topics up instead: slower, as safe
                log.warning("bundle %s: telling %s to take it failed: %s", owned.name, dest.broker_id, exc)
        try:
            if self.owner.close_bundle is not None:
                await self.owner.close_bundle(ns, bundle, dest.urls if dest is not None else None)
        finally:
            held = lock.held
            if dest is not None:
                self.owner.hand_over(ns, bundle, dest)
            try:
                await lock.release()
            except md.MetadataError as exc:
                log.warning("bundle %s: releasing its lock failed (%s); it goes with the session", owned.name, exc)
            self.owner.release_settled(owned, BundleState.RELEASED if held else BundleState.LOST)
        log.info("bundle %s: unloaded", owned.name)
        return dest.broker_id if dest is not None else None

    async def _disable(self, lock: ResourceLock) -> None:
        me = self.owner.me_data
        try:
            await lock.update_value(OwnerData(me.urls, True, me.listeners).encode())
        except (LockBusy, md.MetadataError) as exc:
            log.warning("lock %s: marking it disabled failed (%s); unloading all the same", lock.key, exc)

    async def unload_namespace(self, ns: NamespaceName) -> list[BundleRange]:
        """Unload (transfer) every bundle of ``ns`` this broker owns; returns them."""
        mine = [o for o in self.owner.owned() if o.ns == ns and o.serving]
        await self._unload_each(mine)
        return [o.range for o in mine]

    async def unload_all(self) -> None:
        """Shutdown: every bundle owned here moves to another broker (or is unloaded when none is left)."""
        await self._unload_each([o for o in self.owner.owned() if o.serving])

    async def _unload_each(self, bundles: Iterable[OwnedBundle]) -> None:
        gate = asyncio.Semaphore(UNLOADS_PARALLEL_MAX)

        async def one(owned: OwnedBundle) -> None:
            async with gate:
                if owned.serving:
                    try:
                        await self.unload(owned.ns, owned.range)
                    except Exception:
                        log.exception("bundle %s: unloading failed", owned.name)

        await asyncio.gather(*(one(o) for o in bundles))

    # ---- the destination's side --------------------------------------------------------------------

    def take(self, ns: NamespaceName, bundle: BundleRange) -> asyncio.Future[None]:
        """Start taking ``bundle`` as soon as its owner lets go (a transfer to this broker); the future is
        done when it is taken or the wait is over. Producers and consumers reaching this broker for its topics
        meanwhile wait for it instead of being sent away."""
        name = bundle_name(ns, bundle)
        pending = self.owner.incoming.get(name)
        if pending is not None:
            return pending
        task = asyncio.get_running_loop().create_task(self._take(ns, bundle))
        self.owner.incoming[name] = task
        task.add_done_callback(lambda _t: self.owner.incoming.pop(name, None))
        return task

    async def _take(self, ns: NamespaceName, bundle: BundleRange) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.take_wait_s
        changed, unwatch = self.owner.watch_key(ns, bundle)
        try:
            for _ in range(TAKE_ATTEMPTS_MAX):
                changed.clear()
                holder = await self.owner.keys.owner(ns, bundle)
                if holder is None or holder.same_broker(self.owner.me_data):
                    if await self.owner.acquire(ns, bundle) is not None:
                        return
                    continue  # another broker got it first, or a split: look again
                if not holder.disabled:
                    return  # owned elsewhere and not moving: nothing to take
                remaining = deadline - loop.time()
                if remaining <= 0:
                    log.warning("bundle %s/%s: its owner did not let go within %s s", ns, bundle, self.take_wait_s)
                    return
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    continue
        except (md.MetadataError, ServiceNotReady) as exc:
            log.warning("bundle %s/%s: taking it failed: %s", ns, bundle, exc)
        finally:
            unwatch()

    # ---- split ---------------------------------------------------------------------------------------

    async def split(
        self, ns: NamespaceName, bundle: BundleRange, algorithm: SplitAlgorithm, *,
        positions: Iterable[int] = (), topics: Iterable[str] = (), unload: bool = False,
    ) -> list[BundleRange]:
        """Split ``bundle`` (owned here, or taken now if nobody owns it); returns its pieces."""
        owner = self.owner
        parent = owner.owned_bundle(ns, bundle)
        if parent is None:
            parent = await owner.acquire(ns, bundle)
        if parent is None or not parent.serving:
            raise ServiceNotReady(f"namespace bundle {ns}/{bundle} is owned by another broker or moving")
        stored = await owner.keys.bundles(ns)
        if not stored.bundles.has(bundle):
            raise NotFound(f"{bundle} is not a bundle of {ns}")
        try:
            new = stored.bundles.split(bundle, split_positions(bundle, algorithm, positions=positions, topics=topics))
        except BundleError as exc:
            raise InvalidRequest(str(exc)) from exc
        pieces = new.children(bundle)
        taken = await self._lock_pieces(ns, pieces)
        try:
            await owner.keys.put_bundles(ns, stored, new)
        except md.MetadataError as exc:
            for piece, lock in taken:
                await lock.release()
                owner.release_settled(piece, BundleState.RELEASED)
            raise ServiceNotReady(f"splitting {ns}/{bundle} failed (the bundles changed meanwhile?): {exc}") from exc
        for piece, lock in taken:
            owner.finish(piece, lock)
        owner.remember_bundles(ns, new)
        parent.transition_to(BundleState.UNLOADING)
        assert parent.lock is not None
        await parent.lock.release()
        owner.release_settled(parent, BundleState.RELEASED)
        log.info("bundle %s split into %s", parent.name, ", ".join(p.name for p in pieces))
        if unload:
            await self._unload_each([p for p, _ in taken])
        return pieces

    async def _lock_pieces(self, ns: NamespaceName, pieces: list[BundleRange]) -> list[_Taken]:
        taken: list[_Taken] = []
        try:
            for piece in pieces:
                owned = self.owner.begin(ns, piece)
                lock = await self.owner.lock(ns, piece)
                if lock is None:
                    self.owner.release_settled(owned, BundleState.RELEASED)
                    raise ServiceNotReady(f"{ns}/{piece} is owned by another broker: the split raced another")
                taken.append((owned, lock))
        except BaseException:
            for owned, lock in taken:
                await lock.release()
                self.owner.release_settled(owned, BundleState.RELEASED)
            raise
        return taken

