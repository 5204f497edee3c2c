"""Inactive topics leave memory (and, if configured, storage), so loaded topics and their open files
follow what clients use, not everything they ever touched.

Every ``brokerDeleteInactiveTopicsFrequencySeconds`` the sweeper looks at the loaded topics. A topic is
inactive while it has no producer (nor one waiting), no consumer, no publish in flight, no replicator and
no open transaction; one that stayed inactive for ``brokerDeleteInactiveTopicsMaxInactiveDurationSeconds``
is unloaded: closed and forgotten, reloaded from its managed ledger on next use. If
``brokerDeleteInactiveTopicsEnabled`` (Pulsar's key; magnetar's default is false, nothing is deleted
unless asked), it is deleted instead when ``brokerDeleteInactiveTopicsMode`` allows:
``delete_when_no_subscriptions`` (no durable subscription) or ``delete_when_subscriptions_caught_up``
(every subscription has consumed everything). Topics of ``pulsar/system`` are never touched.

After a sweep that unloaded topics, glibc's ``malloc_trim(0)`` hands the freed heap back to the system, so the
broker's RSS follows the topics it holds (without it the allocator keeps the pages for reuse).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import NamespaceName
from magnetar.broker.registry.registry import TopicRegistry
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.transactions.snapshot_topic import is_snapshot_topic
from magnetar.core.clock import Clock
from magnetar.core.periodic import PeriodicPass

log = logging.getLogger("magnetar.broker.inactive")

SYSTEM_NAMESPACE = NamespaceName("pulsar", "system")
MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")
TOPICS_PER_SWEEP_MAX = 100_000


def _load_malloc_trim() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS): the allocator keeps its pages
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def return_free_memory() -> None:
    """Give the heap pages freed by unloaded topics back to the system (glibc only; else nothing)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def is_inactive(topic: PersistentTopic) -> bool:
    if topic.producers or topic.access.waiting or topic.replicators or topic.closed:
        return False
    if any(sub.consumers for sub in topic.subscriptions.values()):
        return False
    if topic.publishes_in_flight:
        return False
    txn = topic.txn
    return txn is None or not txn.buffer.ongoing()


def may_delete(topic: PersistentTopic, mode: str) -> bool:
    durable = [s for s in topic.subscriptions.values() if s.durable]
    if mode == "delete_when_no_subscriptions":
        return not durable
    last = topic.ledger.last_confirmed
    return all(s.cursor.mark_delete_position >= last for s in durable)


class InactiveTopics:
    def __init__(self, registry: TopicRegistry, config: BrokerConfig, clock: Clock) -> None:
        self._registry = registry  # unloads and deletes exactly as the admin API does
        self._clock = clock
        self.interval_s = config.broker_delete_inactive_topics_frequency_seconds
        self.inactive_s = config.broker_delete_inactive_topics_max_inactive_duration_seconds or self.interval_s
        self.delete_enabled = config.broker_delete_inactive_topics_enabled
        self.mode = config.broker_delete_inactive_topics_mode
        self._idle_since_ms: dict[str, int] = {}
        self._periodic = PeriodicPass("inactive-topic sweep", self.sweep)

    def start(self) -> None:
        self._periodic.start(self.interval_s)

    async def stop(self) -> None:
        await self._periodic.stop()

    async def sweep(self) -> int:
        """Unload (or delete) the topics inactive for long enough; returns how many left memory."""
        now_ms = self._clock.now_ms()
        loaded = dict(list(self._registry.loaded.items())[:TOPICS_PER_SWEEP_MAX])
        self._idle_since_ms = {k: v for k, v in self._idle_since_ms.items() if k in loaded}
        gone = 0
        for key, topic in loaded.items():
            system = topic.name.namespace_name == SYSTEM_NAMESPACE or is_snapshot_topic(key)
            if system or not is_inactive(topic):
                self._idle_since_ms.pop(key, None)
                continue
            since = self._idle_since_ms.setdefault(key, now_ms)
            if now_ms - since < self.inactive_s * 1000 or self._registry.loaded.get(key) is not topic:
                continue
            await self._retire(key, topic)
            gone += 1
        if gone:
            return_free_memory()
        return gone

    async def _retire(self, key: str, topic: PersistentTopic) -> None:
        self._idle_since_ms.pop(key, None)
        try:
            if self.delete_enabled and may_delete(topic, self.mode):
                await self._registry.delete(topic.name, force=False)
                log.info("deleted inactive topic %s (%s)", key, self.mode)
            else:
                await self._registry.unload(topic.name)
                log.debug("unloaded inactive topic %s", key)
        except BrokerError as exc:  # became busy meanwhile, or storage refused: try again next sweep
            log.info("inactive topic %s stays loaded: %s", key, exc)
