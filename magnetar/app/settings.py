"""What ``magnetar standalone`` is configured with, one frozen value composed of per-area groups: the process's
own (data directory, listening address and ports, storage durability, test-only faults), the broker's
(:class:`~magnetar.broker.config.BrokerConfig`, itself grouped: managed ledger, transactions, offload,
deletion), security's (:class:`~magnetar.server.auth.settings.SecuritySettings`), the metadata store's
(:class:`~magnetar.metadata.settings.MetadataSettings`) and the ledger store's
(:class:`~magnetar.storage.objectstore.settings.LedgerStoreConfig`: a data directory or an S3 bucket).
``magnetar.config`` builds it from files and flags; nothing else reads those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from magnetar.broker.config import BrokerConfig
from magnetar.metadata.settings import MetadataSettings
from magnetar.server.auth import SecuritySettings
from magnetar.storage.objectstore.settings import LedgerStoreConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class StandaloneSettings:
    data_dir: Path = Path("data")
    bind_address: str = "0.0.0.0"
    broker_port: int | None = 6650  # None: no plain listener (TLS only)
    web_port: int | None = 8080
    journal_sync_data: bool = True
    open_file_limit: int = 1024  # openFileLimit: sealed ledger files kept open between reads
    storage_delete_failure_probability: float = 0.0  # tests only: storage deletes fail at random
    fsync_failure_probability: float = 0.0  # tests only: ledger fsyncs fail with EIO at random
    crash_points: str = ""  # tests only: the process SIGKILLs itself at these points (magnetar.core.crashpoints)
    cluster_mode: bool = False  # ``magnetar broker``: one broker of a cluster (shared metadata and ledger stores)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    metadata: MetadataSettings = field(default_factory=MetadataSettings)
    ledger_store: LedgerStoreConfig = field(default_factory=LedgerStoreConfig)  # ledgerStoreUrl and friends
