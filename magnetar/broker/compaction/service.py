"""The compaction service: one compaction at a time per topic, its status, and the threshold monitor.

Owns each loaded topic's :class:`CompactedTopic` (attached when the topic loads; a compaction a crash
interrupted runs again then), the admin trigger and status (Pulsar's ``LongRunningProcessStatus``:
``NOT_RUN``, ``RUNNING``, ``SUCCESS``, ``ERROR`` with ``lastError``), the ``compaction`` block of topic stats
and the ``pulsar_compaction_*`` values, and the task that, every ``brokerServiceCompactionMonitorIntervalInSeconds``,
compacts topics whose bytes after the horizon reach the namespace's ``compaction_threshold`` (else
``brokerServiceCompactionThresholdInBytes``; 0 disables).

A topic listener: a topic's view is attached (and plugged into its extensions) when it loads, and
detached when it closes, its compacted ledgers deleted with the topic when it is deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from magnetar.broker.compaction.compactor import CompactionResult, compact
from magnetar.broker.compaction.deleter import (
    CompactedLedgerDeleter,
    DirectDeleter,
    TwoPhaseDeleter,
    compacted_ledger_in_use,
)
from magnetar.broker.compaction.txn import TxnFilter
from magnetar.broker.compaction.view import CompactedTopic, CompactionRecord
from magnetar.broker.errors import Conflict
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.topic.listener import TopicListener
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.topic.state import CloseReason
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedger
from magnetar.ledger.deletion import DeletionQueue, LedgerComponent
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.api import MetadataStore
from magnetar.storage.api import LedgerStore

log = logging.getLogger("magnetar.broker.compaction")

TOPICS_PER_PASS_MAX = 100_000
THRESHOLD_POLICY = "compaction_threshold"

PolicyReader = Callable[[NamespaceName], Awaitable[Mapping[str, Any]]]
#: the transaction filter of a loaded topic (None: no transactions there); the composition root supplies it
TxnFilterOf = Callable[[PersistentTopic], TxnFilter | None]
SleepS = Callable[[float], Awaitable[None]]


def _no_txn_filter(_topic: PersistentTopic) -> TxnFilter | None:
    return None


class CompactionService(TopicListener):
    def __init__(
        self,
        store: LedgerStore,
        clock: Clock,
        policies: PolicyReader,
        *,
        txn_filter_of: TxnFilterOf = _no_txn_filter,
        threshold_bytes: int = 0,
        monitor_interval_s: float = 60.0,
        max_message_size: int = 5 * 1024 * 1024,
        sleep_s: SleepS = asyncio.sleep,
    ) -> None:
        self.store = store
        self._clock = clock
        self._policies = policies
        self._txn_filter_of = txn_filter_of
        self._views: dict[str, CompactedTopic] = {}  # the loaded topics' views, by topic name
        self.threshold_bytes = threshold_bytes
        self._monitor_interval_s = monitor_interval_s
        self._max_message_size = max_message_size
        self._sleep_s = sleep_s
        self.txn_filter: TxnFilter | None = None  # the transaction buffer plugs in here
        self._deleter: CompactedLedgerDeleter = DirectDeleter(store)
        self._running: dict[str, asyncio.Task[CompactionResult | None]] = {}
        self._monitor: asyncio.Task[None] | None = None

    # ---- topics --------------------------------------------------------------------------------------

    async def topic_loaded(self, topic: PersistentTopic) -> None:
        view = await self.attach(str(topic.name), topic.ledger, self._txn_filter_of(topic))
        self._views[str(topic.name)] = view
        topic.extensions.attach_compacted(view)

    async def topic_closing(self, topic: PersistentTopic, reason: CloseReason) -> None:
        view = self._views.get(str(topic.name))
        if view is None or topic.compacted is not view:
            return
        del self._views[str(topic.name)]
        topic.extensions.attach_compacted(None)
        await self.detach(view, delete=reason is CloseReason.DELETED)

    def view(self, topic: str) -> CompactedTopic | None:
        """The compacted view of a loaded topic."""
        return self._views.get(topic)

    def views(self) -> list[tuple[NamespaceName, CompactedTopic]]:
        return [(TopicName.parse(name).namespace_name, view) for name, view in list(self._views.items())]

    async def attach(self, name: str, ledger: ManagedLedger, txn: TxnFilter | None = None) -> CompactedTopic:
        """``txn``: the topic's transaction filter (aborted entries, open transactions), if it has one."""
        topic = CompactedTopic(name, ledger, self.store, max_message_size=self._max_message_size,
                               txn=txn or self.txn_filter, deleter=self._deleter)
        await topic.recover()
        if topic.needs_rerun:
            self.trigger(topic)
        return topic

    def use_two_phase_deletion(self, queue: DeletionQueue, ledgers: LedgerFactory, metadata: MetadataStore) -> None:
        """PIP-186: compacted ledgers leave through the deletion topics; the deletion service asks the
        ``__compaction`` cursor whether one is still used."""
        self._deleter = TwoPhaseDeleter(queue)
        for view in self._views.values():
            view.deleter = self._deleter
        ledgers.set_component_owner(LedgerComponent.COMPACTED_LEDGER,
                                    lambda request: compacted_ledger_in_use(metadata, request))

    async def detach(self, topic: CompactedTopic, *, delete: bool) -> None:
        """The topic is unloaded (or deleted, with its compacted ledgers)."""
        task = self._running.pop(topic.name, None)
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        if delete:
            await topic.delete_all()

    # ---- running -------------------------------------------------------------------------------------

    def is_running(self, topic: CompactedTopic) -> bool:
        task = self._running.get(topic.name)
        return task is not None and not task.done()

    def trigger(self, topic: CompactedTopic) -> asyncio.Task[CompactionResult | None]:
        """Start a compaction in the background (Conflict if one is running)."""
        if self.is_running(topic):
            raise Conflict("Compaction already in progress")
        topic.record.status = "RUNNING"
        task = asyncio.get_running_loop().create_task(self._run(topic), name=f"compaction {topic.name}")
        self._running[topic.name] = task
        return task

    async def _run(self, topic: CompactedTopic) -> CompactionResult | None:
        record = topic.record
        try:
            result = await compact(topic, self._clock)
        except asyncio.CancelledError:
            record.status, record.last_error = "ERROR", "Compaction was cancelled (topic unloaded)"
            raise
        except Exception as exc:  # any failure is reported through the status, never lost in a task
            log.warning("%s: compaction failed: %s", topic.name, exc, exc_info=True)
            record.status, record.last_error = "ERROR", f"{type(exc).__name__}: {exc}"
            record.failed += 1
            record.failed_timestamp_ms = self._clock.now_ms()
            return None
        record.status, record.last_error = "SUCCESS", ""
        record.succeeded += 1
        record.succeed_timestamp_ms = self._clock.now_ms()
        record.duration_ms = result.duration_ms
        record.removed_event_count = result.removed
        record.removed_total += result.removed
        record.compacted_entries = result.view.entries
        topic.needs_rerun = False
        return result

    # ---- the threshold monitor -----------------------------------------------------------------------

    def start(self) -> None:
        if self._monitor is None and self._monitor_interval_s > 0:
            self._monitor = asyncio.get_running_loop().create_task(self._watch(), name="magnetar-compaction")

    async def stop(self) -> None:
        tasks = [t for t in (self._monitor, *self._running.values()) if t is not None]
        self._monitor = None
        self._running.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _watch(self) -> None:
        while True:  # lives as long as the broker; one pass per interval
            await self._sleep_s(self._monitor_interval_s)
            try:
                await self.check_thresholds()
            except Exception:  # a bug must not end automatic compaction for the broker's life
                log.exception("compaction threshold check failed")

    async def threshold_of(self, namespace: NamespaceName) -> int:
        value = (await self._policies(namespace)).get(THRESHOLD_POLICY)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return self.threshold_bytes

    async def check_thresholds(self) -> list[str]:
        """Start a compaction on every loaded topic past its threshold; returns their names."""
        started = []
        cache: dict[NamespaceName, int] = {}
        for namespace, topic in self.views()[:TOPICS_PER_PASS_MAX]:
            if namespace not in cache:
                cache[namespace] = await self.threshold_of(namespace)
            threshold = cache[namespace]
            if threshold > 0 and not self.is_running(topic) and topic.backlog_bytes() >= threshold:
                log.info("%s: %d bytes after the horizon reach the threshold %d: compacting", topic.name,
                         topic.backlog_bytes(), threshold)
                self.trigger(topic)
                started.append(topic.name)
        return started


# ---- what admin and metrics show ------------------------------------------------------------------------


def status_json(record: CompactionRecord) -> dict[str, Any]:
    """Pulsar's LongRunningProcessStatus."""
    return {"status": record.status, "lastError": record.last_error}


def stats_json(record: CompactionRecord) -> dict[str, Any]:
    """The ``compaction`` block of topic stats."""
    return {
        "lastCompactionRemovedEventCount": record.removed_event_count,
        "lastCompactionSucceedTimestamp": record.succeed_timestamp_ms,
        "lastCompactionFailedTimestamp": record.failed_timestamp_ms,
        "lastCompactionDurationTimeInMills": record.duration_ms,
    }


def compacted_ledger_json(topic: CompactedTopic | None) -> dict[str, Any]:
    """The ``compactedLedger`` block of internal stats."""
    view = topic.view if topic is not None else None
    if view is None:
        return {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False, "underReplicated": False}
    return {"ledgerId": view.ledger_id, "entries": view.entries, "size": -1, "offloaded": False,
            "underReplicated": False}


#: Pulsar's per-topic compaction metrics (gauges, as Pulsar exposes them): name -> help
METRICS: dict[str, str] = {
    "pulsar_compaction_removed_event_count": "Messages compaction removed",
    "pulsar_compaction_succeed_count": "Compactions that succeeded",
    "pulsar_compaction_failed_count": "Compactions that failed",
    "pulsar_compaction_duration_time_in_mills": "Duration of the last compaction (ms)",
    "pulsar_compaction_compacted_entries_count": "Entries in the compacted ledger",
}


def metric_values(record: CompactionRecord) -> dict[str, float]:
    return {
        "pulsar_compaction_removed_event_count": record.removed_total,
        "pulsar_compaction_succeed_count": record.succeeded,
        "pulsar_compaction_failed_count": record.failed,
        "pulsar_compaction_duration_time_in_mills": record.duration_ms,
        "pulsar_compaction_compacted_entries_count": record.compacted_entries,
    }
