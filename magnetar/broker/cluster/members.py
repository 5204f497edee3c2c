"""The brokers of the cluster as this broker sees them: its own registration, the live ones, the leader.

- Registration: an ephemeral ``/loadbalance/brokers/<host:port>`` holding this broker's
  :class:`~magnetar.broker.cluster.records.BrokerReport`, held as a lock (Pulsar registers the same way) so it
  is re-created after a new session and its loss is noticed. A key left by this broker's previous process
  (killed, its session not yet expired) blocks the registration until it goes: registering retries on every
  change of the key, and meanwhile this broker serves but is not offered new bundles. The report is rewritten
  when the bundles it owns change and every ``report_interval_s``.
- The live brokers: the registrations, read again after any change below ``/loadbalance/brokers`` (a watch).
- The leader: the election on ``/loadbalance/leader`` (its value Pulsar's ``LeaderBroker`` JSON).

Lifecycle: ``start`` (register, join the election), ``unregister`` (graceful shutdown: no new bundles come
here), ``close``. Knows nothing of topics or bundles beyond their names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from magnetar.broker.cluster.keys import BROKERS_ROOT, LEADER, ClusterKeys, broker_key
from magnetar.broker.cluster.records import BrokerReport, LeaderData, Load
from magnetar.broker.errors import ServiceNotReady
from magnetar.core.clock import Clock
from magnetar.core.periodic import asyncio_sleep_s
from magnetar.metadata import api as md
from magnetar.metadata.coordination import CoordinationStore, LockBusy, SessionEvent
from magnetar.metadata.election import ElectionState, LeaderElection
from magnetar.metadata.locks import LockManager, ResourceLock

log = logging.getLogger("magnetar.cluster")

REGISTER_RETRY_S = 1.0  # a blocked registration is tried again on a change of its key, or this often
REPORT_INTERVAL_S = 30.0
REPORT_DEBOUNCE_S = 0.05


class Members:
    def __init__(
        self,
        store: CoordinationStore,
        clock: Clock,
        *,
        load: Callable[[], Load] = Load,
        report_interval_s: float = REPORT_INTERVAL_S,
        sleep_s: Callable[[float], Awaitable[None]] = asyncio_sleep_s,
    ) -> None:
        self.store = store
        self.keys = ClusterKeys(store, 4)
        self._me: BrokerReport | None = None  # known at start, once the ports are bound
        self._clock = clock
        self.load = load  # what the report says of this broker's load (set by the composition root)
        self._report_interval_s = report_interval_s
        self._sleep_s = sleep_s
        self._locks = LockManager(store, BROKERS_ROOT, on_lost=self._registration_lost)
        self._registration: ResourceLock | None = None
        self._leaving = False
        self.election: LeaderElection | None = None
        self._live: dict[str, BrokerReport] = {}
        self._dirty = True
        self._refresh_lock = asyncio.Lock()
        self._changed = asyncio.Event()  # set on any change below BROKERS_ROOT
        self._report_soon = asyncio.Event()
        self._writing = False
        self._tasks: list[asyncio.Task[None]] = []
        self._unwatch: Callable[[], None] | None = None
        self._unlisten: Callable[[], None] | None = None

    @property
    def me(self) -> BrokerReport:
        if self._me is None:
            raise ServiceNotReady("the broker is starting: it has not joined its cluster yet")
        return self._me

    @property
    def started(self) -> bool:
        return self._me is not None

    @property
    def broker_id(self) -> str:
        return self.me.broker_id

    @property
    def registered(self) -> bool:
        return self._registration is not None and self._registration.held

    @property
    def leading(self) -> bool:
        return self.election is not None and self.election.state is ElectionState.LEADING

    async def start(self, me: BrokerReport) -> None:
        """Join the cluster as ``me`` (its URLs, as the bound ports make them)."""
        self._me = me
        self.election = LeaderElection(
            self.store, LeaderData(me.broker_id, me.urls.http or me.urls.https or "").encode(), key=LEADER,
        )
        self._unwatch = self.store.watch(BROKERS_ROOT, self._on_change)
        self._unlisten = self.store.listen(self._on_session)
        await self._register_once()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._keep_registered(), name="cluster-registration"),
                       loop.create_task(self._keep_reporting(), name="cluster-load-report")]
        await self.election.start()

    # ---- the live brokers and the leader ------------------------------------------------------------

    def _on_change(self, event: md.WatchEvent) -> None:
        self._dirty = True
        self._changed.set()

    def _on_session(self, event: SessionEvent) -> None:
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED):
            self._dirty = True
            self._changed.set()

    async def live(self) -> dict[str, BrokerReport]:
        """The registered brokers (read again after a change; the last known ones when the store is down)."""
        if self._dirty:
            async with self._refresh_lock:
                if self._dirty:
                    self._dirty = False
                    try:
                        self._live = await self.keys.brokers()
                    except md.MetadataError:
                        self._dirty = True
                        raise
        return dict(self._live)

    def live_cached(self) -> dict[str, BrokerReport]:
        return dict(self._live)

    async def leader(self) -> BrokerReport | None:
        """The leader's report; None when no leader is known or it is not registered (not alive)."""
        if self.election is None:
            return None
        raw = self.election.leader
        if raw is None:
            raw = await self.election.read_leader()
        data = LeaderData.decode(raw) if raw is not None else None
        if data is None:
            return None
        return (await self.live()).get(data.broker_id)

    # ---- registration and reports --------------------------------------------------------------------

    def report(self) -> BrokerReport:
        now = self._clock.now_ms()
        return replace(self.me, update_ms=now, load=self.load())

    @property
    def report_pending(self) -> bool:
        """A report is due or being written (tests and the simulator settle on it)."""
        return self._report_soon.is_set() or self._writing

    def report_soon(self) -> None:
        """The owned bundles changed: rewrite the report shortly (changes close together are one write)."""
        self._report_soon.set()

    async def _register_once(self) -> bool:
        if self._leaving or self.registered:
            return True
        try:
            self._registration = await self._locks.acquire(broker_key(self.broker_id), self.report().encode())
        except LockBusy:
            log.warning("broker %s: a registration of this id from another session stands (a previous process "
                        "whose session has not expired yet?); registering when it goes", self.broker_id)
            return False
        except md.MetadataError as exc:
            log.warning("broker %s: registering failed (%s); retrying", self.broker_id, exc)
            return False
        log.info("broker %s registered", self.broker_id)
        self._dirty = True
        return True

    async def _keep_registered(self) -> None:
        while not self._leaving:  # ends at unregister/close; each turn waits for a change or the retry delay
            if not self.registered:
                await self._register_once()
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), REGISTER_RETRY_S)

    async def _keep_reporting(self) -> None:
        while not self._leaving:  # ends at unregister/close; one report per change burst or interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._report_soon.wait(), self._report_interval_s)
            self._writing = True
            try:
                self._report_soon.clear()
                await self._sleep_s(REPORT_DEBOUNCE_S)  # a burst of ownership changes lands in one report
                registration = self._registration
                if registration is not None and registration.held:
                    await registration.update_value(self.report().encode())
            except (LockBusy, md.MetadataError) as exc:
                log.warning("broker %s: writing the load report failed: %s", self.broker_id, exc)
            finally:
                self._writing = False

    def _registration_lost(self, lock: ResourceLock) -> None:
        if not self._leaving:
            log.error("broker %s: its registration was taken by another session; registering again when it goes",
                      self.broker_id)
        self._registration = None
        self._changed.set()

    async def unregister(self) -> None:
        """Leave: the registration and the leadership go (no new bundle is assigned here)."""
        self._leaving = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.election is not None:
            await self.election.close()
        registration, self._registration = self._registration, None
        if registration is not None:
            with contextlib.suppress(md.MetadataError):
                await registration.release()

    async def close(self) -> None:
        await self.unregister()
        for stop in (self._unwatch, self._unlisten):
            if stop is not None:
                stop()
        await self._locks.close()
