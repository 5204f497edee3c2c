"""Settings from a ``magnetar.conf`` file (Java properties or TOML) and ``--set key=value`` flags.

Keys are Pulsar's ``broker.conf`` names, so operators find what they know. Keys magnetar does not read are ignored
and summed up in one line (``config_ignored.py``), so a full Pulsar broker.conf can be used as it is; a bad value is
an error naming the key.
Only this module and ``cli.py`` read files or the environment.
"""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from magnetar.app.settings import StandaloneSettings
from magnetar.broker.cluster.listeners import parse_listeners
from magnetar.broker.config import MIB, BrokerConfig
from magnetar.broker.transactions.batching import LogFamily
from magnetar.broker.transactions.batching import problems as batching_problems
from magnetar.config_ignored import Ignored
from magnetar.core import crashpoints
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.metadata.settings import MetadataSettings, SessionExpiredPolicy, check_url
from magnetar.server.auth.settings import SecuritySettings
from magnetar.storage.objectstore.settings import LedgerStoreConfig, parse_ledger_store_url
from magnetar.storage.offload.api import OffloadSettings
from magnetar.storage.offload.profile import ProfileError, apply_profile, parse_profile

log = logging.getLogger("magnetar.config")


class ConfigError(Exception):
    pass


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _int(text: str) -> int:
    return int(text.strip())


def _probability(text: str) -> float:
    value = float(text.strip())
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a probability must be within 0..1, got {value}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 1..65535, or 0 for any free port; anything else is refused (never wrapped)."""
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"a port must be within 1..65535 (0: any free port), got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text.strip())
    if value <= 0:
        raise ValueError(f"must be positive, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be a positive number")
    return value


def _str(text: str) -> str:
    return text.strip()


def _crash_points(text: str) -> str:
    crashpoints.parse(text)  # refuses unknown names and bad counts
    return text.strip()


def _not_negative(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    return value


def _nonempty(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def _opt_port(text: str) -> int | None:
    """A port, or None for an empty value (Pulsar's way to turn a listener off)."""
    return port_number(text) if text.strip() else None


def _opt_str(text: str) -> str | None:
    return text.strip() or None


def _list(text: str) -> tuple[str, ...]:
    """A comma-separated list, as broker.conf writes them."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _listeners(text: str) -> str:
    parse_listeners(text)  # refuse a malformed list at startup, naming the item
    return text.strip()


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


#: Pulsar's names match case-insensitively; google-cloud-storage and azureblob are not offered here
_OFFLOAD_DRIVERS = _choice("", "filesystem", "aws-s3", "s3")

# key -> (section, field, parse, scale)
_KEYS: dict[str, tuple[str, str, Callable[[str], Any], int]] = {
    "bindAddress": ("settings", "bind_address", _str, 1),
    "brokerServicePort": ("settings", "broker_port", _opt_port, 1),
    "webServicePort": ("settings", "web_port", _opt_port, 1),
    "journalSyncData": ("settings", "journal_sync_data", _bool, 1),
    "openFileLimit": ("settings", "open_file_limit", _int, 1),
    "clusterName": ("broker", "cluster_name", _nonempty, 1),
    "defaultNumberOfNamespaceBundles": ("broker", "default_number_of_namespace_bundles", _positive, 1),
    "advertisedAddress": ("broker", "advertised_address", _str, 1),
    "advertisedListeners": ("broker", "advertised_listeners", _listeners, 1),
    "internalListenerName": ("broker", "internal_listener_name", _str, 1),
    "schemaCompatibilityStrategy": ("broker", "schema_compatibility_strategy", _choice(
        "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE",
        "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"), 1),
    "isAllowAutoUpdateSchemaEnabled": ("broker", "is_allow_auto_update_schema_enabled", _bool, 1),
    "isSchemaValidationEnforced": ("broker", "schema_validation_enforced", _bool, 1),
    "schemaValidationEnforced": ("broker", "schema_validation_enforced", _bool, 1),  # magnetar's old spelling
    "maxMessageSize": ("broker", "max_message_size", _int, 1),
    "maxChunkedMessageSizeBytes": ("broker", "max_chunked_message_bytes", _int, 1),
    "allowAutoTopicCreation": ("broker", "allow_auto_topic_creation", _bool, 1),
    "allowAutoTopicCreationType": (
        "broker", "allow_auto_topic_creation_type", _choice("non-partitioned", "partitioned"), 1,
    ),
    "defaultNumPartitions": ("broker", "default_num_partitions", _int, 1),
    "brokerDeduplicationEnabled": ("broker", "broker_deduplication_enabled", _bool, 1),
    "brokerDeduplicationEntriesInterval": ("broker", "broker_deduplication_entries_interval", _int, 1),
    "brokerDeduplicationSnapshotIntervalSeconds": (
        "broker", "broker_deduplication_snapshot_interval_seconds", _int, 1,
    ),
    "keepAliveIntervalSeconds": ("broker", "keep_alive_interval_seconds", _int, 1),
    "maxClientNameLength": ("broker", "max_client_name_length", _int, 1),
    "maxConsumerMetadataSize": ("broker", "max_consumer_metadata_size", _int, 1),
    "maxProducerMetadataSize": ("broker", "max_producer_metadata_size", _int, 1),
    "brokerDeleteInactiveTopicsEnabled": ("broker", "broker_delete_inactive_topics_enabled", _bool, 1),
    "brokerDeleteInactiveTopicsFrequencySeconds": (
        "broker", "broker_delete_inactive_topics_frequency_seconds", _int, 1,
    ),
    "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": (
        "broker", "broker_delete_inactive_topics_max_inactive_duration_seconds", _int, 1,
    ),
    "brokerDeleteInactiveTopicsMode": (
        "broker", "broker_delete_inactive_topics_mode",
        _choice("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"), 1,
    ),
    "maxTopicsPerNamespace": ("broker", "max_topics_per_namespace", _int, 1),
    "brokerMaxConnections": ("broker", "broker_max_connections", _int, 1),
    "brokerMaxConnectionsPerIp": ("broker", "broker_max_connections_per_ip", _int, 1),
    "httpRequestTimeoutSeconds": ("broker", "http_request_timeout_seconds", _int, 1),
    "maxHttpServerConnections": ("broker", "max_http_server_connections", _int, 1),
    "connectHandshakeTimeoutSeconds": ("broker", "connect_handshake_timeout_seconds", _int, 1),
    "connectionOutputHighWaterBytes": ("broker", "connection_output_high_water_bytes", _int, 1),
    "dispatcherMaxReadBatchSize": ("broker", "dispatcher_max_read_batch_size", _int, 1),
    "dispatcherMaxReadSizeBytes": ("broker", "dispatcher_max_read_size_bytes", _int, 1),
    "maxPendingPublishRequestsPerConnection": ("broker", "max_pending_publish_requests_per_connection", _int, 1),
    "maxUnackedMessagesPerConsumer": ("broker", "max_unacked_messages_per_consumer", _int, 1),
    "dispatcherReadFailureBackoffInitialTimeInMs": ("broker", "dispatcher_read_failure_backoff_initial_ms", _int, 1),
    "dispatcherReadFailureBackoffMaxTimeInMs": ("broker", "dispatcher_read_failure_backoff_max_ms", _int, 1),
    "autoSkipNonRecoverableData": ("broker", "auto_skip_non_recoverable_data", _bool, 1),
    "defaultRetentionTimeInMinutes": ("broker", "default_retention_time_minutes", _int, 1),
    "defaultRetentionSizeInMB": ("broker", "default_retention_size_mb", _int, 1),
    "ttlDurationDefaultInSeconds": ("broker", "ttl_duration_default_seconds", _int, 1),
    "exposeTopicLevelMetricsInPrometheus": ("broker", "expose_topic_level_metrics", _bool, 1),
    "backlogQuotaCheckIntervalInSeconds": ("broker", "backlog_quota_check_interval_seconds", _int, 1),
    "retentionCheckIntervalInSeconds": ("broker", "retention_check_interval_seconds", _int, 1),
    "replicationProducerQueueSize": ("broker", "replication_producer_queue_size", _int, 1),
    "replicationPolicyCheckDurationSeconds": ("broker", "replication_policy_check_duration_seconds", _int, 1),
    "enableReplicatedSubscriptions": ("broker", "enable_replicated_subscriptions", _bool, 1),
    "replicatedSubscriptionsSnapshotFrequencyMillis": (
        "broker", "replicated_subscriptions_snapshot_frequency_millis", _int, 1),
    "replicatedSubscriptionsSnapshotTimeoutSeconds": (
        "broker", "replicated_subscriptions_snapshot_timeout_seconds", _int, 1),
    "replicatedSubscriptionsSnapshotMaxCachedPerSubscription": (
        "broker", "replicated_subscriptions_snapshot_max_cached_per_subscription", _int, 1),
    "brokerServiceCompactionThresholdInBytes": ("broker", "broker_service_compaction_threshold_bytes", _int, 1),
    "brokerServiceCompactionMonitorIntervalInSeconds": (
        "broker", "broker_service_compaction_monitor_interval_seconds", _int, 1,
    ),
    "managedLedgerMaxEntriesPerLedger": ("ledger", "max_entries_per_ledger", _int, 1),
    "managedLedgerMaxSizePerLedgerMbytes": ("ledger", "max_size_per_ledger_bytes", _int, MIB),
    "managedLedgerMaxLedgerRolloverTimeMinutes": ("ledger", "max_ledger_rollover_time_ms", _int, 60_000),
    "managedLedgerMinLedgerRolloverTimeMinutes": ("ledger", "min_ledger_rollover_time_ms", _int, 60_000),
    "managedLedgerMaxUnackedRangesToPersist": ("ledger", "max_unacked_ranges_to_persist", _int, 1),
    "managedLedgerCursorPersistIntervalMs": ("ledger", "cursor_persist_interval_ms", _int, 1),
    "managedLedgerDefaultMarkDeleteRateLimit": ("ledger", "mark_delete_rate_limit", _positive_float, 1),
    "transactionCoordinatorEnabled": ("broker", "transaction_coordinator_enabled", _bool, 1),
    "transactionCoordinatorCount": ("broker", "transaction_coordinator_count", _positive, 1),
    "transactionTimeoutMillis": ("broker", "transaction_timeout_millis", _positive, 1),
    "transactionTimeoutMaxMillis": ("broker", "transaction_timeout_max_millis", _int, 1),
    "maxActiveTransactionsPerCoordinator": ("broker", "max_active_transactions_per_coordinator", _int, 1),
    "maxOpenTransactionsPerConnection": ("broker", "max_open_transactions_per_connection", _int, 1),
    "maxConsumersPerSubscription": ("broker", "max_consumers_per_subscription", _int, 1),
    "transactionBufferClientOperationTimeoutInMills": (
        "broker", "transaction_buffer_client_operation_timeout_ms", _positive, 1,
    ),
    "transactionBufferSnapshotMinTimeInMillis": ("broker", "transaction_buffer_snapshot_min_time_ms", _int, 1),
    "transactionBufferSnapshotMaxTransactionCount": (
        "broker", "transaction_buffer_snapshot_max_transaction_count", _positive, 1,
    ),
    "transactionBufferSegmentedSnapshotEnabled": ("broker", "transaction_buffer_segmented_snapshot_enabled", _bool, 1),
    "transactionBufferSnapshotSegmentSize": ("broker", "transaction_buffer_snapshot_segment_size", _positive, 1),
    **{
        f"{prefix}{suffix}": (section, name, parse, 1)
        for prefix, section in (
            ("transactionLogBatchedWrite", "transaction_log_batching"),
            ("transactionPendingAckBatchedWrite", "pending_ack_batching"),
        )
        for suffix, name, parse in (
            ("Enabled", "enabled", _bool),
            ("MaxRecords", "max_records", _int),
            ("MaxSize", "max_bytes", _int),
            ("MaxDelayInMillis", "max_delay_ms", _int),
        )
    },
    # security (magnetar.server.auth)
    "brokerServicePortTls": ("security", "broker_port_tls", _opt_port, 1),
    "webServicePortTls": ("security", "web_port_tls", _opt_port, 1),
    "tlsCertificateFilePath": ("security", "tls_certificate_file", _str, 1),
    "tlsKeyFilePath": ("security", "tls_key_file", _str, 1),
    "tlsTrustCertsFilePath": ("security", "tls_trust_certs_file", _str, 1),
    "tlsRequireTrustedClientCertOnConnect": ("security", "tls_require_trusted_client_cert", _bool, 1),
    "tlsAllowInsecureConnection": ("security", "tls_allow_insecure_connection", _bool, 1),
    "tlsProtocols": ("security", "tls_protocols", _list, 1),
    "tlsCiphers": ("security", "tls_ciphers", _list, 1),
    "tlsCertRefreshCheckDurationSec": ("security", "tls_cert_refresh_check_seconds", _int, 1),
    "authenticationEnabled": ("security", "authentication_enabled", _bool, 1),
    "authenticationProviders": ("security", "authentication_providers", _list, 1),
    "authenticationRefreshCheckSeconds": ("security", "authentication_refresh_check_seconds", _int, 1),
    "anonymousUserRole": ("security", "anonymous_user_role", _opt_str, 1),
    "authenticateMetricsEndpoint": ("security", "authenticate_metrics_endpoint", _bool, 1),
    "tokenSecretKey": ("security", "token_secret_key", _str, 1),
    "tokenPublicKey": ("security", "token_public_key", _str, 1),
    "tokenPublicAlg": ("security", "token_public_alg", _str, 1),
    "tokenAuthClaim": ("security", "token_auth_claim", _str, 1),
    "tokenAudienceClaim": ("security", "token_audience_claim", _str, 1),
    "tokenAudience": ("security", "token_audience", _str, 1),
    "basicAuthConf": ("security", "basic_auth_conf", _str, 1),
    "authorizationEnabled": ("security", "authorization_enabled", _bool, 1),
    "superUserRoles": ("security", "super_user_roles", _list, 1),
    # tiered storage: Pulsar's generic names and the older s3ManagedLedgerOffload* ones
    "managedLedgerOffloadDriver": ("offload", "driver", lambda t: _OFFLOAD_DRIVERS(t.lower()), 1),
    "managedLedgerOffloadBucket": ("offload", "bucket", _str, 1),
    "s3ManagedLedgerOffloadBucket": ("offload", "bucket", _str, 1),
    "managedLedgerOffloadRegion": ("offload", "region", _str, 1),
    "s3ManagedLedgerOffloadRegion": ("offload", "region", _str, 1),
    "managedLedgerOffloadServiceEndpoint": ("offload", "service_endpoint", _str, 1),
    "s3ManagedLedgerOffloadServiceEndpoint": ("offload", "service_endpoint", _str, 1),
    "managedLedgerOffloadMaxBlockSizeInBytes": ("offload", "max_block_size_bytes", _int, 1),
    "s3ManagedLedgerOffloadMaxBlockSizeInBytes": ("offload", "max_block_size_bytes", _int, 1),
    "managedLedgerOffloadReadBufferSizeInBytes": ("offload", "read_buffer_size_bytes", _int, 1),
    "s3ManagedLedgerOffloadReadBufferSizeInBytes": ("offload", "read_buffer_size_bytes", _int, 1),
    "managedLedgerOffloadReadCacheSizeInBytes": ("offload", "read_cache_size_bytes", _int, 1),
    "managedLedgerOffloadKeyPrefix": ("offload", "key_prefix", _str, 1),
    "fileSystemURI": ("offload", "filesystem_uri", _str, 1),
    "fileSystemProfilePath": ("offload", "filesystem_profile_path", _str, 1),
    "managedLedgerOffloadAutoTriggerSizeThresholdBytes": (
        "broker", "managed_ledger_offload_auto_trigger_size_threshold_bytes", _int, 1,
    ),
    "managedLedgerOffloadDeletionLagMs": ("broker", "managed_ledger_offload_deletion_lag_ms", _int, 1),
    # the metadata store (magnetar/metadata/settings.py): embedded SQLite, or ZooKeeper for a cluster
    "metadataStoreUrl": ("metadata", "store_url", check_url, 1),
    "configurationMetadataStoreUrl": ("metadata", "configuration_store_url", check_url, 1),
    "metadataStoreSessionTimeoutMillis": ("metadata", "session_timeout_ms", _positive, 1),
    "metadataStoreOperationTimeoutSeconds": ("metadata", "operation_timeout_s", _positive, 1),
    "zookeeperSessionExpiredPolicy": ("metadata", "session_expired_policy",
                                      lambda t: SessionExpiredPolicy(t.strip().lower()), 1),
    # where ledgers live: embedded: (files under the data directory) or s3://BUCKET[/PREFIX]
    "ledgerStoreUrl": ("ledger_store", "url", parse_ledger_store_url, 1),
    "ledgerStoreServiceEndpoint": ("ledger_store", "service_endpoint", _str, 1),
    "ledgerStoreRegion": ("ledger_store", "region", _str, 1),
    "ledgerStoreRequestTimeoutMillis": ("ledger_store", "request_timeout_ms", _positive, 1),
    "ledgerStoreFlushMaxDelayMillis": ("ledger_store", "flush_max_delay_ms", _not_negative, 1),
    "ledgerStoreFlushMaxBytes": ("ledger_store", "flush_max_bytes", _positive, 1),
    "ledgerStoreReadCacheSizeBytes": ("ledger_store", "read_cache_bytes", _not_negative, 1),
}
_KEYS.update({
    # fault injection for the crash tests (never set in production): storage deletes fail at random
    "magnetarTestingStorageDeleteFailureProbability": ("settings", "storage_delete_failure_probability",
                                                       _probability, 1),
    # fsyncs of ledger files fail with EIO at random (a disk that cannot be trusted any more)
    "magnetarTestingFsyncFailureProbability": ("settings", "fsync_failure_probability", _probability, 1),
    # aimed kills: the process SIGKILLs itself at these named points (magnetar/core/crashpoints.py)
    "magnetarTestingCrashPoints": ("settings", "crash_points", _crash_points, 1),
    "topicTwoPhaseDeletionEnabled": ("ledger_deletion", "enabled", _bool, 1),
    "twoPhaseDeletionLedgerDeletionParallelism": ("ledger_deletion", "parallelism", _int, 1),
    "twoPhaseDeletionReconsumeLaterInSeconds": ("ledger_deletion", "reconsume_later_s", _int, 1),
    "twoPhaseDeletionMaxRetryDeleteCount": ("ledger_deletion", "max_retry_count", _int, 1),
})
_NESTED_BROKER_SECTIONS = ("transaction_log_batching", "pending_ack_batching", "ledger_deletion")


def known_keys() -> list[str]:
    return sorted(_KEYS)


def key_targets() -> dict[str, tuple[str, str, int]]:
    """Where each key goes: (section, field, scale), for the generated reference (``config_reference.py``)."""
    return {key: (section, name, scale) for key, (section, name, _, scale) in _KEYS.items()}


def read_file(path: Path) -> dict[str, str]:
    """Key/value pairs of a properties file (``key=value``, ``#`` comments) or a TOML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in data.items()}
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected key=value, got {raw!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _with_profile(offload: OffloadSettings, explicit: Mapping[str, Any]) -> OffloadSettings:
    """``fileSystemProfilePath``'s files (comma-separated, later ones win) applied to the filesystem driver."""
    props: dict[str, str] = {}
    for path in [p.strip() for p in offload.filesystem_profile_path.split(",") if p.strip()]:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"fileSystemProfilePath: cannot read {path}: {exc}") from exc
        try:
            props.update(parse_profile(data, path))
        except ProfileError as exc:
            raise ConfigError(f"fileSystemProfilePath: {exc}") from exc
    try:
        return apply_profile(offload, props, explicit.keys(), offload.filesystem_profile_path)
    except ProfileError as exc:
        raise ConfigError(f"fileSystemProfilePath: {exc}") from exc


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        pairs[key.strip()] = value
    return pairs


def build_settings(values: Mapping[str, str], base: StandaloneSettings | None = None) -> StandaloneSettings:
    """Apply Pulsar-named ``values`` on top of ``base`` (defaults when None)."""
    base = base or StandaloneSettings()
    changes: dict[str, dict[str, Any]] = {"settings": {}, "broker": {}, "ledger": {}, "security": {}, "offload": {},
                                          "metadata": {}, "ledger_store": {}}
    changes.update({section: {} for section in _NESTED_BROKER_SECTIONS})
    ignored = Ignored.of(key for key, text in values.items() if key not in _KEYS and text != "")
    if ignored.summary():
        log.info("%s", ignored.summary())
        log.debug("ignored: %s", ignored.keys())
    if ignored.warning():
        log.warning("%s", ignored.warning())
    for key, text in values.items():
        if key not in _KEYS:
            continue  # an empty value, or one of the keys summed up above
        section, name, parse, scale = _KEYS[key]
        if text.strip() == "" and name == "advertised_address":
            changes[section][name] = None
            continue
        try:
            value = parse(text)
        except ValueError as exc:
            raise ConfigError(f"bad value for {key}: {exc}") from exc
        changes[section][name] = value * scale if scale != 1 else value
    ledger: ManagedLedgerConfig = dataclasses.replace(base.broker.managed_ledger, **changes["ledger"])
    for section in _NESTED_BROKER_SECTIONS:
        changes["broker"][section] = dataclasses.replace(getattr(base.broker, section), **changes[section])
    offload: OffloadSettings = dataclasses.replace(base.broker.offload, **changes["offload"])
    if offload.driver == "filesystem" and offload.filesystem_profile_path:
        offload = _with_profile(offload, changes["offload"])
    broker: BrokerConfig = dataclasses.replace(base.broker, managed_ledger=ledger, offload=offload,
                                               **changes["broker"])
    wrong = batching_problems(
        {LogFamily.TRANSACTION_LOG: broker.transaction_log_batching, LogFamily.PENDING_ACK: broker.pending_ack_batching}
    )
    if wrong:
        raise ConfigError("; ".join(wrong))
    security: SecuritySettings = dataclasses.replace(base.security, **changes["security"])
    try:
        security.provider_methods()
    except ValueError as exc:
        raise ConfigError(f"bad value for authenticationProviders: {exc}") from exc
    metadata: MetadataSettings = dataclasses.replace(base.metadata, **changes["metadata"])
    wrong = metadata.problems()
    if wrong:
        raise ConfigError("; ".join(wrong))
    ledger_store: LedgerStoreConfig = dataclasses.replace(base.ledger_store, **changes["ledger_store"])
    return dataclasses.replace(base, broker=broker, security=security, metadata=metadata, ledger_store=ledger_store,
                               **changes["settings"])
