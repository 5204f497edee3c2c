"""The offload service: admin-triggered offloads with their status, and the periodic automatic pass.

Owns, per topic, Pulsar's ``OffloadProcessStatus`` (``NOT_RUN``, ``RUNNING``, ``SUCCESS``, ``ERROR`` with
``lastError`` and ``firstUnoffloadedMessage``) and at most one offload running at a time. The copy itself,
its crash safety and the release of local copies are the ledger layer's (``ManagedLedger.offload_ledger``,
``release_local``); this module decides what and when:

* ``trigger``: the admin's ``PUT .../offload`` with a message id offloads the sealed ledgers before it;
* the pass, every ``retentionCheckIntervalInSeconds``, over every loaded topic: interrupted offloads are
  retried (fresh uuid), ledgers beyond the namespace's ``offload_threshold`` are offloaded, and local copies
  older than ``offload_deletion_lag_ms`` are released.

A failure on one topic is logged with the store's reason, shown in its status, and never stops the rest.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Any

from magnetar.broker.errors import Conflict, PreconditionFailed
from magnetar.broker.names import NamespaceName
from magnetar.broker.offload import policy
from magnetar.broker.periodic import PeriodicPass
from magnetar.broker.retention import RetentionTopics, SleepS, namespace_policies
from magnetar.broker.stats import offload_read_json
from magnetar.clock import Clock
from magnetar.ledger.api import LedgerSummary, ManagedLedger, ManagedLedgerError, OffloadReadHealth, Position
from magnetar.metadata import api as md

log = logging.getLogger("magnetar.broker.offload")

#: Topics visited per pass, at most.
TOPICS_PER_PASS_MAX = 100_000


class OffloadStatus(enum.Enum):
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


@dataclass(slots=True)
class TopicOffload:
    status: OffloadStatus = OffloadStatus.NOT_RUN
    last_error: str = ""
    first_unoffloaded: Position = field(default_factory=lambda: Position(-1, -1))
    task: asyncio.Task[None] | None = None


class OffloadService:
    def __init__(self, broker: RetentionTopics, clock: Clock, *, sleep_s: SleepS = asyncio.sleep) -> None:
        """``broker`` offers what the retention task needs too: config, metadata, the loaded topics."""
        self._broker = broker
        self._clock = clock
        self._topics: dict[str, TopicOffload] = {}
        self._periodic = PeriodicPass("offload", self.run_once, sleep_s)
        self.passes = 0

    # ---- admin ----------------------------------------------------------------------------------------------

    def status(self, ledger: ManagedLedger | None) -> dict[str, Any]:
        """Pulsar's OffloadProcessStatus JSON (``None``: a topic with no ledger yet, never offloaded)."""
        state = (self._topics.get(ledger.name) if ledger is not None else None) or TopicOffload()
        first = state.first_unoffloaded
        return {"status": state.status.value, "lastError": state.last_error,
                "firstUnoffloadedMessage": {"ledgerId": first.ledger_id, "entryId": first.entry_id,
                                            "partitionIndex": -1},
                **offload_read_json(ledger.offload_reads if ledger is not None else OffloadReadHealth())}

    def trigger(self, ledger: ManagedLedger, until: Position) -> None:
        """Start offloading the sealed ledgers before ``until``'s ledger; Conflict while one is running."""
        if not ledger.offload_enabled:
            raise PreconditionFailed("Offload is not configured on this broker (managedLedgerOffloadDriver)")
        state = self._topics.setdefault(ledger.name, TopicOffload())
        if state.status is OffloadStatus.RUNNING:
            raise Conflict("Offload already running")
        chosen = policy.before(ledger.ledgers(), until) + policy.incomplete(ledger.ledgers())
        self._start(ledger, state, sorted({x.ledger_id for x in chosen}))

    def _start(self, ledger: ManagedLedger, state: TopicOffload, ledger_ids: list[int]) -> None:
        state.status, state.last_error = OffloadStatus.RUNNING, ""
        state.task = asyncio.get_running_loop().create_task(
            self._offload(ledger, state, ledger_ids), name=f"offload {ledger.name}"
        )

    async def _offload(self, ledger: ManagedLedger, state: TopicOffload, ledger_ids: list[int]) -> None:
        try:
            for ledger_id in ledger_ids:  # oldest first: the local disk frees from the oldest data on
                await ledger.offload_ledger(ledger_id)
        except ManagedLedgerError as exc:
            state.status, state.last_error = OffloadStatus.ERROR, str(exc)
            log.error("%s: offload failed: %s", ledger.name, exc)
        except Exception as exc:  # a bug: shown as an error, never a silent stop
            state.status, state.last_error = OffloadStatus.ERROR, f"{type(exc).__name__}: {exc}"
            log.exception("%s: offload failed", ledger.name)
        else:
            state.status = OffloadStatus.SUCCESS
        finally:
            state.first_unoffloaded = policy.first_unoffloaded(ledger.ledgers())
            state.task = None

    async def wait(self, ledger: ManagedLedger) -> None:
        """Until the running offload of ``ledger`` (if any) ends."""
        state = self._topics.get(ledger.name)
        task = state.task if state is not None else None
        if task is not None:
            await asyncio.wait([task])

    # ---- the periodic pass ----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._broker.config.offload.enabled:
            self._periodic.start(self._broker.config.retention_check_interval_seconds)

    async def stop(self) -> None:
        await self._periodic.stop()
        tasks = [s.task for s in self._topics.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def run_once(self) -> None:
        """One pass over the loaded topics: retry, offload by threshold, release by deletion lag."""
        config = self._broker.config
        cache: dict[NamespaceName, policy.OffloadPolicies] = {}
        for ns, topic in self._broker.loaded_topics()[:TOPICS_PER_PASS_MAX]:
            ledger = topic.ledger
            if not ledger.offload_enabled:
                continue
            try:
                policies = cache.get(ns)
                if policies is None:
                    raw = await namespace_policies(self._broker.metadata, ns)
                    policies = cache[ns] = policy.resolve(
                        raw, config.managed_ledger_offload_auto_trigger_size_threshold_bytes,
                        config.managed_ledger_offload_deletion_lag_ms,
                    )
                await self._apply(ledger, policies)
            except (ManagedLedgerError, md.MetadataError) as exc:
                log.warning("offload of %s skipped this pass: %s", ledger.name, exc)
        loaded = {topic.ledger.name for _, topic in self._broker.loaded_topics()}
        for name in [n for n, s in self._topics.items() if n not in loaded and s.task is None]:
            del self._topics[name]  # bounded by the loaded topics
        self.passes += 1

    async def _apply(self, ledger: ManagedLedger, policies: policy.OffloadPolicies) -> None:
        state = self._topics.setdefault(ledger.name, TopicOffload())
        if state.status is OffloadStatus.RUNNING:
            return
        summaries = ledger.ledgers()
        due: list[LedgerSummary] = policy.incomplete(summaries) + policy.over_threshold(summaries,
                                                                                         policies.threshold_bytes)
        if due:
            self._start(ledger, state, sorted({x.ledger_id for x in due}))
            await self.wait(ledger)
        for summary in policy.due_for_release(ledger.ledgers(), policies.deletion_lag_ms, self._clock.now_ms()):
            try:
                await ledger.release_local(summary.ledger_id)
            except ManagedLedgerError as exc:  # the offloaded copy failed its check: the operator must know
                state.status, state.last_error = OffloadStatus.ERROR, str(exc)
                log.error("%s: local copy of ledger %d kept: %s", ledger.name, summary.ledger_id, exc)

