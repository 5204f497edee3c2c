"""THE topic lifecycle: the loaded topics of this broker, and the one way each is loaded and closed.

:class:`TopicRegistry` is the only writer of the loaded-topics map (everyone else reads :attr:`loaded`).

- ``get`` loads a topic on first use (one load per name at a time; creation rules are the catalog's):
  the topic recovers, then every :class:`~magnetar.broker.topic.listener.TopicListener` is told in
  registration order before anything is admitted. A listener that fails the load gets the topic closed.
- ``unload``, ``delete`` and ``close_all`` all go through one close with its reason: the topic stops
  admitting (CLOSING), its clients are closed once their accepted sends are answered (not at shutdown:
  the server closed the connections already), every listener is told in reverse order, then the topic
  tears down (its ledger closed, or deleted with everything a topic owns). The topic stays in the map while
  it closes, so a ``get`` of the same name waits for the close and then loads it afresh.
- a topic that is not loaded is deleted without loading it: listeners delete their records of it first.

Pure asyncio over the ledger layer; knows no sockets. Before a topic loads, the ownership
(:mod:`magnetar.broker.cluster.ownership`) says whether this broker may serve it ("look it up again" if not).
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.broker.cluster.ownership import LocalOwnership, Ownership
from magnetar.broker.errors import PersistenceError, PreconditionFailed, ServiceNotReady
from magnetar.broker.names import TopicName
from magnetar.broker.registry.catalog import TopicCatalog
from magnetar.broker.subscription.dispatcher import DEFAULT_READ_BACKOFF, ReadBackoff
from magnetar.broker.topic.extensions import TxnPort
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedger, ManagedLedgerConfig, ManagedLedgerError, ManagedLedgerFactory

log = logging.getLogger("magnetar.broker")

#: a get that finds its topic closing waits for the close and looks again, at most this often
CLOSED_WHILE_LOADING_MAX = 16
UNLOADS_PARALLEL_MAX = 16  # topics of one bundle closed at once


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSettings:
    """What every loaded topic is built with (from the broker's configuration)."""

    dedup_snapshot_entries: int = 1000
    dedup_snapshot_interval_s: float = 120.0
    read_batch_max: int = 100
    read_bytes_max: int = 5 * 1024 * 1024
    auto_skip_corrupted: bool = False
    read_backoff: ReadBackoff = DEFAULT_READ_BACKOFF
    ledger_config: ManagedLedgerConfig | None = None


#: whether deduplication is on for a topic (topic, namespace, broker policies)
DedupEnabled = Callable[[TopicName], Awaitable[bool]]
#: the transactions of a topic being built (None: transactions are off)
NewTransactions = Callable[[PersistentTopic], TxnPort[Any]]
#: the order topics close in at shutdown: those with a true key last (transaction-snapshot topics)
CloseLast = Callable[[str], bool]


async def _dedup_off(_topic: TopicName) -> bool:
    return False


class TopicRegistry:
    def __init__(
        self,
        catalog: TopicCatalog,
        ledgers: ManagedLedgerFactory,
        clock: Clock,
        ownership: Ownership | None = None,
        settings: TopicSettings = TopicSettings(),
        *,
        dedup_enabled: DedupEnabled = _dedup_off,
        transactions: NewTransactions | None = None,
        close_last: CloseLast = lambda _name: False,
    ) -> None:
        self.catalog = catalog
        self._ledgers = ledgers
        self._clock = clock
        self._ownership = ownership or LocalOwnership()
        self._settings = settings
        self._dedup_enabled = dedup_enabled
        self._transactions = transactions
        self._close_last = close_last
        self._loaded: dict[str, PersistentTopic] = {}
        self.loaded: Mapping[str, PersistentTopic] = types.MappingProxyType(self._loaded)
        self._loading: dict[str, asyncio.Future[PersistentTopic]] = {}
        self._closing: dict[str, asyncio.Future[None]] = {}
        self._listeners: list[TopicListener] = []
        self.shutting_down = False
        catalog.is_loaded = self._loaded.__contains__

    def add_listener(self, listener: TopicListener) -> None:
        """Told of every load and close from now on (the composition root registers each feature once)."""
        self._listeners.append(listener)

    def topics(self) -> list[PersistentTopic]:
        """A snapshot of the loaded topics (iterate this, not :attr:`loaded`, across an await)."""
        return list(self._loaded.values())

    # ---- loading -------------------------------------------------------------------------------------

    async def get(self, topic: TopicName, *, create: bool) -> PersistentTopic:
        """The loaded topic; load it, or create it when ``create`` and auto-creation allow."""
        key = str(topic)
        for _ in range(CLOSED_WHILE_LOADING_MAX):
            loaded = self._loaded.get(key)
            if loaded is not None:
                if not loaded.closed:
                    return loaded
                await asyncio.shield(self._closing[key])  # closing: wait, then load it afresh
                continue
            if self.shutting_down:
                raise ServiceNotReady("Broker is shutting down")
            pending = self._loading.get(key)
            if pending is not None:
                return await asyncio.shield(pending)
            await self._ownership.check_owned(topic)
            if key in self._loaded or key in self._loading:
                continue  # loaded (or being loaded) while ownership was checked
            loaded = await self._load_once(key, topic, create)
            try:  # its bundle may have moved away while it loaded: then it is not served here
                await self._ownership.check_owned(topic)
            except ServiceNotReady:
                await self._close(loaded, CloseReason.MOVING)
                raise
            return loaded
        raise ServiceNotReady(f"Topic {topic} keeps closing while it loads: look it up again")

    async def _load_once(self, key: str, topic: TopicName, create: bool) -> PersistentTopic:
        future: asyncio.Future[PersistentTopic] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            result = await self._load(topic, create=create)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # waiters re-raise; nobody else needs to see it
            raise
        else:
            future.set_result(result)
            self._loaded[key] = result
            return result
        finally:
            del self._loading[key]

    async def _load(self, name: TopicName, *, create: bool) -> PersistentTopic:
        ledger = await self.catalog.open_or_create(name, create=create)
        topic = await self._new_topic(name, ledger)
        await topic.start()
        try:
            for listener in self._listeners:
                await listener.topic_loaded(topic)
        except BaseException:
            await self._teardown(topic, CloseReason.MOVING)
            raise
        # a topic just created said so already ("creating topic"): one line per topic, thousands at a time
        log.log(logging.INFO if ledger.number_of_entries() or topic.subscriptions else logging.DEBUG,
                "loaded topic %s (%d entries, %d subscriptions)", name, ledger.number_of_entries(),
                len(topic.subscriptions))
        return topic

    async def _new_topic(self, name: TopicName, ledger: ManagedLedger) -> PersistentTopic:
        s = self._settings
        return PersistentTopic(
            name, ledger, self._clock,
            dedup_enabled=await self._dedup_enabled(name),
            dedup_snapshot_entries=s.dedup_snapshot_entries,
            dedup_snapshot_interval_s=s.dedup_snapshot_interval_s,
            read_batch_max=s.read_batch_max,
            read_bytes_max=s.read_bytes_max,
            auto_skip_corrupted=s.auto_skip_corrupted,
            read_backoff=s.read_backoff,
            transactions=self._transactions,
        )

    # ---- closing -------------------------------------------------------------------------------------

    async def unload(self, topic: TopicName, *, assigned_url: str | None = None) -> bool:
        """Close the loaded topic (clients look it up again and reconnect, or go to ``assigned_url``: the broker
        it moves to); False if it was not loaded."""
        loaded = self._loaded.get(str(topic))
        if loaded is None:
            return False
        await self._close(loaded, CloseReason.MOVING, assigned_url=assigned_url)
        log.info("unloaded topic %s", topic)
        return True

    async def unload_where(self, matches: Callable[[TopicName], bool], *, assigned_url: str | None = None,
                           parallel_max: int = UNLOADS_PARALLEL_MAX) -> int:
        """Unload every loaded topic ``matches`` accepts (a bundle moving away); returns how many."""
        gate = asyncio.Semaphore(parallel_max)

        async def one(topic: PersistentTopic) -> None:
            async with gate:
                try:
                    await self.unload(topic.name, assigned_url=assigned_url)
                except Exception:  # one topic failing to close must not keep the others open
                    log.exception("failed to unload topic %s", topic.name)

        chosen = [t for t in self.topics() if matches(t.name)]
        await asyncio.gather(*(one(t) for t in chosen))
        return len(chosen)

    async def delete(self, topic: TopicName, *, force: bool) -> bool:
        """Delete a topic with its data, loaded or not (PreconditionFailed while it has clients and not
        ``force``; PersistenceError when storage refuses); False if it has no managed ledger."""
        loaded = self._loaded.get(str(topic))
        if loaded is not None:
            if _busy(loaded) and not force:
                raise PreconditionFailed("Topic has active producers/subscriptions")
            try:
                await self._close(loaded, CloseReason.DELETED)
            except ManagedLedgerError as exc:
                raise PersistenceError(f"Failed to delete {topic}: {exc}") from exc
        elif await self._ledgers.exists(topic.managed_ledger_name):
            try:
                ledger = await self._ledgers.open(topic.managed_ledger_name, self._settings.ledger_config)
                for listener in self._listeners:
                    await listener.unloaded_topic_deleting(topic, list(ledger.cursors))
                await ledger.delete()
            except ManagedLedgerError as exc:
                raise PersistenceError(f"Failed to delete {topic}: {exc}") from exc
        else:
            return False
        log.info("deleted topic %s", topic)
        return True

    async def close_all(self) -> None:
        """Shutdown: no topic loads any more; every loaded one closes (MOVING), ``close_last`` ones last."""
        self.shutting_down = True
        for topic in sorted(self.topics(), key=lambda t: self._close_last(str(t.name))):
            try:
                await self._close(topic, CloseReason.MOVING, disconnect=False)
            except Exception:
                log.exception("failed to close topic %s", topic.name)

    async def _close(self, topic: PersistentTopic, reason: CloseReason, *, disconnect: bool = True,
                     assigned_url: str | None = None) -> None:
        key = str(topic.name)
        if not topic.begin_closing(reason):
            closing = self._closing.get(key)
            if closing is not None:
                await asyncio.shield(closing)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing[key] = done
        try:
            if disconnect:
                try:
                    await topic.disconnect_clients(consumers=True, assigned_url=assigned_url)
                except Exception:  # the teardown runs all the same: a topic never stays half closed
                    log.exception("%s: closing its clients failed", topic.name)
            await self._teardown(topic, reason)
        finally:
            if self._loaded.get(key) is topic:
                del self._loaded[key]
            del self._closing[key]
            done.set_result(None)

    async def _teardown(self, topic: PersistentTopic, reason: CloseReason) -> None:
        topic.begin_closing(reason)
        for listener in reversed(self._listeners):
            try:
                await listener.topic_closing(topic, reason)
            except Exception:
                log.exception("%s: a listener failed while the topic closed", topic.name)
        await topic.close(reason)


def _busy(topic: PersistentTopic) -> bool:
    return bool(topic.producers or topic.access.waiting or any(s.consumers for s in topic.subscriptions.values()))

