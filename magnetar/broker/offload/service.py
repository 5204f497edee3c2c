"""The offload service: admin-triggered offloads with their status, and the periodic automatic pass.

Owns, per topic, Pulsar's ``OffloadProcessStatus`` (``NOT_RUN``, ``RUNNING``, ``SUCCESS``, ``ERROR`` with
``lastError`` and ``firstUnoffloadedMessage``) and at most one offload running at a time. The copy itself,
its crash safety and the release of local copies are the ledger layer's (``ManagedLedger.offload_ledger``,
``release_local``); this module decides what and when:

* ``trigger``: the admin's ``PUT .../offload`` with a message id offloads the sealed ledgers before it. The
  request is kept in a managed-ledger property (``policy.REQUEST_PROPERTY``) before the answer and cleared
  once it succeeded, so one cut short (SIGKILL, a failing store) is resumed as a whole by the pass;
* the pass, every ``retentionCheckIntervalInSeconds``, over every loaded topic: persisted requests are
  resumed, interrupted offloads retried (fresh uuid), ledgers beyond the namespace's ``offload_threshold``
  offloaded, and local copies older than ``offload_deletion_lag_ms`` released. Then over the managed ledgers
  that are not loaded (after a restart, or unloaded by the inactive sweep): each stored record is checked
  without loading the topic, and only one with work due is loaded (at most ``UNLOADED_LOADS_PER_PASS_MAX``
  a pass) and left for the inactive sweep to unload.

A failure on one topic is logged with the store's reason, shown in its status, and never stops the rest.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.broker.errors import BrokerError, Conflict, PreconditionFailed
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.offload import policy
from magnetar.broker.offload.stats import offload_read_json
from magnetar.core.clock import Clock
from magnetar.core.periodic import PeriodicPass
from magnetar.ledger.api import (
    LedgerSummary,
    ManagedLedger,
    ManagedLedgerError,
    ManagedLedgerFactory,
    OffloadReadHealth,
    Position,
)
from magnetar.metadata import api as md
from magnetar.storage.offload.api import OffloadSettings

log = logging.getLogger("magnetar.broker.offload")

#: Topics visited per pass, at most.
TOPICS_PER_PASS_MAX = 100_000
#: Topics that are not loaded, loaded by one pass because they have work due, at most.
UNLOADED_LOADS_PER_PASS_MAX = 16


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


SleepS = Callable[[float], Awaitable[None]]


class OffloadDefaults(Protocol):
    """The broker settings the service reads (``BrokerConfig`` has them)."""

    @property
    def offload(self) -> OffloadSettings: ...

    @property
    def retention_check_interval_seconds(self) -> int: ...

    @property
    def managed_ledger_offload_auto_trigger_size_threshold_bytes(self) -> int: ...

    @property
    def managed_ledger_offload_deletion_lag_ms(self) -> int: ...


class LoadedTopic(Protocol):
    @property
    def ledger(self) -> ManagedLedger: ...


class OffloadBroker(Protocol):
    """What the service needs of the broker: its settings, the loaded topics, the namespaces' policies, the
    stored managed ledgers, and loading a topic."""

    @property
    def config(self) -> OffloadDefaults: ...

    @property
    def ledgers(self) -> ManagedLedgerFactory: ...

    def loaded_topics(self) -> Sequence[tuple[NamespaceName, LoadedTopic]]: ...

    async def namespace_policies(self, ns: NamespaceName) -> Mapping[str, Any]: ...

    async def get_topic(self, topic: TopicName, *, create: bool) -> Any: ...


class OffloadService:
    def __init__(self, broker: OffloadBroker, clock: Clock, *, sleep_s: SleepS = asyncio.sleep) -> None:
        """``broker`` offers the settings, the loaded topics, the namespaces' policies, the stored managed
        ledgers and topic loading (:class:`OffloadBroker`)."""
        self._broker = broker
        self._clock = clock
        self._topics: dict[str, TopicOffload] = {}
        self._periodic = PeriodicPass("offload", self.run_once, sleep_s)
        self.passes = 0
        self.loaded_for_offload = 0  # topics the pass loaded because they had work due

    # ---- admin ----------------------------------------------------------------------------------------------

    def status(self, ledger: ManagedLedger | None) -> dict[str, Any]:
        """Pulsar's OffloadProcessStatus JSON (``None``: a topic with no ledger yet, never offloaded); a
        persisted request not resumed yet (after a restart) shows as RUNNING."""
        state = (self._topics.get(ledger.name) if ledger is not None else None) or TopicOffload()
        first = state.first_unoffloaded
        status = state.status
        if (status is OffloadStatus.NOT_RUN and ledger is not None and ledger.offload_enabled
                and policy.requested(ledger.properties)):
            status = OffloadStatus.RUNNING
        return {"status": status.value, "lastError": state.last_error,
                "firstUnoffloadedMessage": {"ledgerId": first.ledger_id, "entryId": first.entry_id,
                                            "partitionIndex": -1},
                **offload_read_json(ledger.offload_reads if ledger is not None else OffloadReadHealth())}

    async def trigger(self, ledger: ManagedLedger, until: Position) -> None:
        """Persist the request, then start offloading the sealed ledgers before ``until``'s ledger; Conflict
        while one is running."""
        if not ledger.offload_enabled:
            raise PreconditionFailed("Offload is not configured on this broker (managedLedgerOffloadDriver)")
        state = self._topics.setdefault(ledger.name, TopicOffload())
        if state.status is OffloadStatus.RUNNING:
            raise Conflict("Offload already running")
        state.status = OffloadStatus.RUNNING  # taken before the await: a second trigger meanwhile conflicts
        try:
            await ledger.set_properties({policy.REQUEST_PROPERTY: policy.encode_request(until)})
        except ManagedLedgerError as exc:
            state.status, state.last_error = OffloadStatus.ERROR, f"the offload request was not stored: {exc}"
            raise
        self._start_request(ledger, state, until)

    def _start_request(self, ledger: ManagedLedger, state: TopicOffload, until: Position) -> None:
        chosen = policy.before(ledger.ledgers(), until) + policy.incomplete(ledger.ledgers())
        self._start(ledger, state, sorted({x.ledger_id for x in chosen}), request=True)

    def _start(self, ledger: ManagedLedger, state: TopicOffload, ledger_ids: list[int], *, request: bool) -> None:
        state.status, state.last_error = OffloadStatus.RUNNING, ""
        state.task = asyncio.get_running_loop().create_task(
            self._offload(ledger, state, ledger_ids, request), name=f"offload {ledger.name}"
        )

    async def _offload(self, ledger: ManagedLedger, state: TopicOffload, ledger_ids: list[int], request: bool) -> None:
        try:
            for ledger_id in ledger_ids:  # oldest first: the local disk frees from the oldest data on
                await ledger.offload_ledger(ledger_id)
            if request:  # done as a whole: nothing to resume
                await ledger.set_properties({policy.REQUEST_PROPERTY: ""})
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
        """One pass: the loaded topics, then the stored managed ledgers that are not loaded."""
        cache: dict[NamespaceName, policy.OffloadPolicies] = {}
        loaded_topics = self._broker.loaded_topics()
        for ns, topic in loaded_topics[:TOPICS_PER_PASS_MAX]:
            await self._visit(ns, topic, cache)
        await self._unloaded_pass({t.ledger.name for _, t in loaded_topics}, cache)
        loaded = {topic.ledger.name for _, topic in self._broker.loaded_topics()}
        for name in [n for n, s in self._topics.items() if n not in loaded and s.task is None]:
            del self._topics[name]  # bounded by the loaded topics
        self.passes += 1

    async def _policies(self, ns: NamespaceName, cache: dict[NamespaceName, policy.OffloadPolicies]
                        ) -> policy.OffloadPolicies:
        policies = cache.get(ns)
        if policies is None:
            config = self._broker.config
            raw = await self._broker.namespace_policies(ns)
            policies = cache[ns] = policy.resolve(raw, config.managed_ledger_offload_auto_trigger_size_threshold_bytes,
                                                  config.managed_ledger_offload_deletion_lag_ms)
        return policies

    async def _visit(self, ns: NamespaceName, topic: LoadedTopic,
                     cache: dict[NamespaceName, policy.OffloadPolicies]) -> None:
        ledger = topic.ledger
        if not ledger.offload_enabled:
            return
        try:
            await self._apply(ledger, await self._policies(ns, cache))
        except (ManagedLedgerError, md.MetadataError) as exc:
            log.warning("offload of %s skipped this pass: %s", ledger.name, exc)

    async def _unloaded_pass(self, loaded: set[str], cache: dict[NamespaceName, policy.OffloadPolicies]) -> None:
        """Managed ledgers that are not loaded: their stored records are checked, and the few with work due
        are loaded (the inactive sweep unloads them again)."""
        try:
            names = await self._broker.ledgers.list_names()
        except (ManagedLedgerError, md.MetadataError) as exc:
            log.warning("offload pass: listing the managed ledgers failed: %s", exc)
            return
        loads = 0
        for name in [n for n in names if n not in loaded][:TOPICS_PER_PASS_MAX]:
            if loads >= UNLOADED_LOADS_PER_PASS_MAX:
                break  # the next pass goes on
            try:
                topic = TopicName.from_managed_ledger_name(name)
                record = await self._broker.ledgers.stored_record(name)
                policies = await self._policies(topic.namespace_name, cache)
                if record is None or not policy.work_due(*record, policies, self._clock.now_ms()):
                    continue
                loaded_topic = await self._broker.get_topic(topic, create=False)
            except (ValueError, BrokerError, ManagedLedgerError, md.MetadataError) as exc:  # e.g. a coordinator log
                log.debug("offload pass: %s not visited: %s", name, exc)
                continue
            loads += 1
            self.loaded_for_offload += 1
            log.info("offload pass: loaded %s (not loaded, offload work due)", topic)
            await self._visit(topic.namespace_name, loaded_topic, cache)

    async def _apply(self, ledger: ManagedLedger, policies: policy.OffloadPolicies) -> None:
        state = self._topics.setdefault(ledger.name, TopicOffload())
        if state.status is OffloadStatus.RUNNING:
            return
        summaries = ledger.ledgers()
        until = policy.requested(ledger.properties)
        if until is not None:  # an admin request cut short (a crash, a failing store): resumed as a whole
            log.info("%s: resuming the requested offload up to %s", ledger.name, until)
            self._start_request(ledger, state, until)
            await self.wait(ledger)
        else:
            due: list[LedgerSummary] = policy.incomplete(summaries) + policy.over_threshold(
                summaries, policies.threshold_bytes)
            if due:
                self._start(ledger, state, sorted({x.ledger_id for x in due}), request=False)
                await self.wait(ledger)
        for summary in policy.due_for_release(ledger.ledgers(), policies.deletion_lag_ms, self._clock.now_ms()):
            try:
                await ledger.release_local(summary.ledger_id)
            except ManagedLedgerError as exc:  # the offloaded copy failed its check: the operator must know
                state.status, state.last_error = OffloadStatus.ERROR, str(exc)
                log.error("%s: local copy of ledger %d kept: %s", ledger.name, summary.ledger_id, exc)
