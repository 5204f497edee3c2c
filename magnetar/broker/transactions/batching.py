"""PIP-160's switch: the batching settings of the coordinator log and of the pending-ack logs, live.

The seed proposes changing them at runtime through the admin API (Pulsar never built it): a log store
takes the setting current when it is created (``new_*_writer``), so a switch reaches stores created after
it, and existing logs replay whatever mix of plain and batched entries they hold. Each family keeps one
:class:`WriterMetrics` shared by all its writers, exported as Pulsar's ``pulsar_txn_tc_bufferedwriter_*``
and ``pulsar_txn_pending_ack_store_bufferedwriter_*`` series.
"""

from __future__ import annotations

import dataclasses
import enum

from magnetar.broker.errors import InvalidRequest
from magnetar.broker.transactions.buffered_writer import BatchingConfig, BufferedWriter, LogLedger, WriterMetrics
from magnetar.protocol.txn_log_batch import LogKind


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


def problems(configs: dict[LogFamily, BatchingConfig]) -> list[str]:
    """Every invalid setting, each naming its key (empty when all are valid)."""
    return [p for family, config in configs.items() for p in config.problems(family.key_prefix)]


class BatchedLogSwitch:
    def __init__(self, transaction_log: BatchingConfig, pending_ack: BatchingConfig) -> None:
        self.configs: dict[LogFamily, BatchingConfig] = {
            LogFamily.TRANSACTION_LOG: transaction_log,
            LogFamily.PENDING_ACK: pending_ack,
        }
        self.metrics: dict[LogFamily, WriterMetrics] = {family: WriterMetrics() for family in LogFamily}

    def update(self, family: LogFamily, **changes: object) -> BatchingConfig:
        """Apply ``changes`` (fields of BatchingConfig) to ``family``; refuses an invalid result whole."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(BatchingConfig)}
        if unknown:
            raise InvalidRequest(f"unknown batching settings: {sorted(unknown)}")
        candidate = dataclasses.replace(self.configs[family], **changes)  # type: ignore[arg-type]
        wrong = candidate.problems(family.key_prefix)
        if wrong:
            raise InvalidRequest("; ".join(wrong))
        self.configs[family] = candidate
        return candidate

    def new_writer(self, family: LogFamily, ledger: LogLedger) -> BufferedWriter:
        """A writer for a log store being created now, with the family's current setting."""
        return BufferedWriter(ledger, family.kind, self.configs[family], self.metrics[family])
