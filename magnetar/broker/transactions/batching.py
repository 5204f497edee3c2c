"""PIP-160's switch: the batching settings of the coordinator logs and of the pending-ack logs, live and kept.

The seed asks for "dynamic enable or disable" through the admin API (Pulsar never built the route; its
``transactionLogBatchedWrite*`` keys are dynamic configuration). A change applies to every log of the
family at its next write, the running coordinator logs and the existing subscriptions' pending-ack logs
included (:meth:`BufferedWriter.reconfigure`), and to logs created later; replay reads whatever mix of plain
and batched entries a log holds. The change is stored first as dynamic configuration, as Pulsar's ``brokers
update-dynamic-config`` does: one metadata record of Pulsar's key names and string values
(``magnetar.resources.configuration``), written compare-and-set, read at startup over what ``broker.conf`` said, so
it survives a restart. Each family keeps one :class:`WriterMetrics` shared by all its writers, exported
as Pulsar's ``pulsar_txn_tc_bufferedwriter_*`` and ``pulsar_txn_pending_ack_store_bufferedwriter_*`` series.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import weakref
from collections.abc import Callable
from typing import Final

from magnetar.broker.errors import InvalidRequest, PersistenceError, PreconditionFailed
from magnetar.broker.transactions.buffered_writer import (
    BatchingConfig,
    BufferedWriter,
    LogLedger,
    SleepMs,
    WriterMetrics,
)
from magnetar.metadata.api import NEW_KEY, BadVersion, MetadataError, MetadataStore
from magnetar.protocol.txn_log_batch import LogKind
from magnetar.resources.configuration import DynamicConfigResources

log = logging.getLogger("magnetar.txn.batching")

STORE_ATTEMPTS_MAX: Final = 8  # compare-and-set rounds against concurrent writers of the record
#: Pulsar's key suffix -> BatchingConfig field (the prefix names the family)
KEY_SUFFIXES: Final = {"Enabled": "enabled", "MaxRecords": "max_records", "MaxSize": "max_bytes",
                       "MaxDelayInMillis": "max_delay_ms"}


class LogFamily(enum.Enum):
    """The two kinds of log PIP-160 batches, with their config-key and metric prefixes."""

    TRANSACTION_LOG = ("transactionLogBatchedWrite", "pulsar_txn_tc", LogKind.TRANSACTION)
    PENDING_ACK = ("transactionPendingAckBatchedWrite", "pulsar_txn_pending_ack_store", LogKind.PENDING_ACK)

    @property
    def key_prefix(self) -> str:
        return self.value[0]

    @property
    def metric_prefix(self) -> str:
        return self.value[1]

    @property
    def kind(self) -> LogKind:
        return self.value[2]


#: the keys Pulsar's ``brokers update-dynamic-config`` can change here -> (family, BatchingConfig field)
DYNAMIC_KEYS: Final = {family.key_prefix + suffix: (family, field)
                       for family in LogFamily for suffix, field in KEY_SUFFIXES.items()}


def problems(configs: dict[LogFamily, BatchingConfig]) -> list[str]:
    """Every invalid setting, each naming its key (empty when all are valid)."""
    return [p for family, config in configs.items() for p in config.problems(family.key_prefix)]


def to_dynamic(family: LogFamily, config: BatchingConfig) -> dict[str, str]:
    """The family's settings as dynamic-configuration entries (Pulsar's key names, string values)."""
    return {family.key_prefix + suffix: _text(getattr(config, field)) for suffix, field in KEY_SUFFIXES.items()}


def from_dynamic(family: LogFamily, values: dict[str, str], base: BatchingConfig) -> BatchingConfig:
    """``base`` with what ``values`` says for the family; raises ValueError for a value that is not one."""
    changes: dict[str, object] = {}
    for suffix, field in KEY_SUFFIXES.items():
        text = values.get(family.key_prefix + suffix)
        if text is None:
            continue
        if field == "enabled":
            if text.lower() not in ("true", "false"):
                raise ValueError(f"{family.key_prefix + suffix}={text!r} is not true or false")
            changes[field] = text.lower() == "true"
        else:
            changes[field] = int(text)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class BatchedLogSwitch:
    def __init__(self, transaction_log: BatchingConfig, pending_ack: BatchingConfig,
                 metadata: MetadataStore | None = None, *, sleep_ms: SleepMs | None = None) -> None:
        self.configs: dict[LogFamily, BatchingConfig] = {
            LogFamily.TRANSACTION_LOG: transaction_log,
            LogFamily.PENDING_ACK: pending_ack,
        }
        self._conf = dict(self.configs)  # what broker.conf said: a deleted dynamic key falls back to it
        self.metrics: dict[LogFamily, WriterMetrics] = {family: WriterMetrics() for family in LogFamily}
        self._writers: dict[LogFamily, weakref.WeakSet[BufferedWriter]] = {f: weakref.WeakSet() for f in LogFamily}
        self._metadata = DynamicConfigResources(metadata) if metadata is not None else None
        self._sleep_ms = sleep_ms  # the writers' delay on an injected clock (simulations)

    def candidate(self, family: LogFamily, **changes: object) -> BatchingConfig:
        """The family's settings with ``changes`` (fields of BatchingConfig); refuses an invalid result whole."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(BatchingConfig)}
        if unknown:
            raise InvalidRequest(f"unknown batching settings: {sorted(unknown)}")
        candidate = dataclasses.replace(self.configs[family], **changes)  # type: ignore[arg-type]
        wrong = candidate.problems(family.key_prefix)
        if wrong:
            raise InvalidRequest("; ".join(wrong))
        return candidate

    async def update(self, family: LogFamily, **changes: object) -> BatchingConfig:
        """Store the new settings as dynamic configuration, then switch every log of the family to them."""
        config = self.candidate(family, **changes)
        await self._store(to_dynamic(family, config))
        self.apply(family, config)
        return config

    async def set_key(self, name: str, value: str) -> None:
        """Pulsar's ``brokers update-dynamic-config`` for one key: stored, then every log of its family follows."""
        family, field = _dynamic_key(name, "update")
        try:
            config = from_dynamic(family, {name: value}, self.configs[family])
        except ValueError as exc:
            raise PreconditionFailed(f"Invalid dynamic-config value: {exc}") from exc
        wrong = config.problems(family.key_prefix)
        if wrong:
            raise PreconditionFailed("Invalid dynamic-config value: " + "; ".join(wrong))
        await self._store({name: _text(getattr(config, field))})
        self.apply(family, config)

    async def delete_key(self, name: str) -> None:
        """Pulsar's ``brokers delete-dynamic-config``: the stored value goes and broker.conf's applies again."""
        family, field = _dynamic_key(name, "delete")
        await self._rewrite(lambda values: values.pop(name, None))
        self.apply(family, dataclasses.replace(self.configs[family], **{field: getattr(self._conf[family], field)}))

    async def stored(self) -> dict[str, str]:
        """The dynamic configuration as stored (``brokers get-all-dynamic-config``)."""
        if self._metadata is None:
            return {}
        record = await self._metadata.get()
        return dict(record.value) if record is not None else {}

    def apply(self, family: LogFamily, config: BatchingConfig) -> None:
        """Switch the family now: live writers at their next write, new ones from creation."""
        self.configs[family] = config
        for writer in list(self._writers[family]):
            writer.reconfigure(config)

    async def load(self) -> None:
        """Apply the stored dynamic configuration (it wins over broker.conf, as in Pulsar). A stored value
        that is not valid is reported and left out: the broker starts with what broker.conf says."""
        if self._metadata is None:
            return
        try:
            record = await self._metadata.get()
        except ValueError as exc:
            log.warning("dynamic configuration at %s unreadable (%s): using broker.conf", self._metadata.key, exc)
            return
        if record is None:
            return
        values = record.value
        for family in LogFamily:
            try:
                config = from_dynamic(family, values, self.configs[family])
            except ValueError as exc:
                log.warning("dynamic configuration: %s; keeping broker.conf's %s* settings", exc, family.key_prefix)
                continue
            wrong = config.problems(family.key_prefix)
            if wrong:
                log.warning("dynamic configuration: %s; keeping broker.conf's settings", "; ".join(wrong))
                continue
            if config != self.configs[family]:
                log.info("dynamic configuration: %s* = %s", family.key_prefix, config)
            self.apply(family, config)

    async def _store(self, entries: dict[str, str]) -> None:
        await self._rewrite(lambda values: values.update(entries))

    async def _rewrite(self, change: Callable[[dict[str, str]], object]) -> None:
        if self._metadata is None:
            return
        for _ in range(STORE_ATTEMPTS_MAX):  # bounded compare-and-set retries against concurrent writers
            try:
                record = await self._metadata.get()
                values = dict(record.value) if record is not None else {}
                change(values)
                await self._metadata.put(values, NEW_KEY if record is None else record.version)
                return
            except BadVersion:
                continue
            except (MetadataError, ValueError) as exc:
                raise PersistenceError(f"cannot store the dynamic configuration: {exc}") from exc
        raise PersistenceError(f"cannot store the dynamic configuration: {self._metadata.key} kept changing")

    def new_writer(self, family: LogFamily, ledger: LogLedger) -> BufferedWriter:
        """A writer for a log store being created now, following the family's setting from now on."""
        writer = BufferedWriter(ledger, family.kind, self.configs[family], self.metrics[family],
                                sleep_ms=self._sleep_ms)
        self._writers[family].add(writer)
        return writer


def _dynamic_key(name: str, verb: str) -> tuple[LogFamily, str]:
    if name not in DYNAMIC_KEYS:  # Pulsar's answer for any key it cannot change at runtime
        raise PreconditionFailed(f"Can't {verb} non-dynamic configuration")
    return DYNAMIC_KEYS[name]

