"""The broker's settings as one frozen value; ``magnetar.config`` builds it from files and flags.

Field names are Pulsar's ``broker.conf`` keys in snake case (the mapping lives in ``magnetar.config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.broker.deletion.config import DeletionConfig
from magnetar.broker.transactions.buffered_writer import BatchingConfig
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.storage.offload.api import OffloadSettings

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    cluster_name: str = "standalone"
    default_number_of_namespace_bundles: int = 4  # defaultNumberOfNamespaceBundles: a namespace's default cut
    advertised_address: str | None = None  # None: answer lookups with the address the client reached
    advertised_listeners: str = ""  # advertisedListeners: name:pulsar://host:port,... (see broker/listeners.py)
    internal_listener_name: str = ""  # internalListenerName: the listener lookups without a name get
    schema_compatibility_strategy: str = "FULL"  # schemaCompatibilityStrategy, when a namespace sets none
    is_allow_auto_update_schema_enabled: bool = True  # isAllowAutoUpdateSchemaEnabled
    schema_validation_enforced: bool = False  # schemaValidationEnforced
    max_message_size: int = 5 * MIB  # maxMessageSize
    max_chunked_message_bytes: int = 512 * MIB  # maxChunkedMessageSizeBytes: a chunked message's total size
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: str = "non-partitioned"  # or "partitioned"
    default_num_partitions: int = 1
    broker_deduplication_enabled: bool = True
    broker_deduplication_entries_interval: int = 1000  # snapshot the dedup state every N entries
    broker_deduplication_snapshot_interval_seconds: float = 120.0  # ... and at most this long after a write
    keep_alive_interval_seconds: float = 30.0
    max_client_name_length: int = 1024  # maxClientNameLength: characters of a producer or consumer name
    max_consumer_metadata_size: int = 1024  # maxConsumerMetadataSize: characters of keys + values
    max_producer_metadata_size: int = 4096  # maxProducerMetadataSize: the same for producers
    broker_delete_inactive_topics_enabled: bool = False  # delete (not only unload) inactive topics
    broker_delete_inactive_topics_frequency_seconds: int = 60  # how often inactive topics are looked for
    broker_delete_inactive_topics_max_inactive_duration_seconds: int = 0  # 0 = the frequency
    broker_delete_inactive_topics_mode: str = "delete_when_no_subscriptions"
    max_topics_per_namespace: int = 0  # maxTopicsPerNamespace: 0 = no limit
    broker_max_connections: int = 0  # brokerMaxConnections: 0 = no limit
    broker_max_connections_per_ip: int = 0  # brokerMaxConnectionsPerIp: 0 = no limit
    http_request_timeout_seconds: float = 30.0  # httpRequestTimeoutSeconds: a request (or a body) must arrive
    max_http_server_connections: int = 2048  # maxHttpServerConnections
    connect_handshake_timeout_seconds: float = 30.0  # close a connection that sends no CONNECT in time
    connection_output_high_water_bytes: int = 4 * MIB  # stop reading / dispatching to a peer above this
    dispatcher_max_read_batch_size: int = 100
    dispatcher_max_read_size_bytes: int = 5 * MIB
    max_pending_publish_requests_per_connection: int = 1000
    max_consumer_permits: int = 1_000_000  # FLOW beyond this is clamped
    max_unacked_messages_per_consumer: int = 50_000  # Shared/Key_Shared; 0 = no limit
    dispatcher_read_failure_backoff_initial_ms: int = 15_000  # wait after a failed read, doubling ...
    dispatcher_read_failure_backoff_max_ms: int = 60_000  # ... up to this
    auto_skip_non_recoverable_data: bool = False  # skip (ack) entries that fail their checksum
    managed_ledger: ManagedLedgerConfig = field(default_factory=ManagedLedgerConfig)
    # retention and TTL (broker/retention.py); a namespace's policies override these
    default_retention_time_minutes: int = 0  # defaultRetentionTimeInMinutes: -1 forever, 0 none
    default_retention_size_mb: int = 0  # defaultRetentionSizeInMB: -1 unlimited, 0 none
    ttl_duration_default_seconds: int = 0  # ttlDurationDefaultInSeconds: 0 = messages never expire
    expose_topic_level_metrics: bool = True  # exposeTopicLevelMetricsInPrometheus: false = per namespace only
    backlog_quota_check_interval_seconds: int = 60  # backlogQuotaCheckIntervalInSeconds
    retention_check_interval_seconds: int = 120  # retentionCheckIntervalInSeconds: trim and expire this often
    # transactions (broker/transactions/): the coordinator(s) and their timeouts
    transaction_coordinator_enabled: bool = True  # transactionCoordinatorEnabled (on in standalone)
    transaction_coordinator_count: int = 1  # transactionCoordinatorCount: partitions of transaction_coordinator_assign
    transaction_timeout_millis: int = 180_000  # transactionTimeoutMillis: when NEW_TXN carries no txn_ttl
    transaction_timeout_max_millis: int = 10_800_000  # transactionTimeoutMaxMillis: a longer txn_ttl is cut to this
    max_consumers_per_subscription: int = 0  # maxConsumersPerSubscription: 0 = no limit
    max_open_transactions_per_connection: int = 1_000  # maxOpenTransactionsPerConnection: 0 = no limit
    max_active_transactions_per_coordinator: int = 0  # maxActiveTransactionsPerCoordinator: 0 = no limit
    transaction_buffer_client_operation_timeout_ms: int = 3_000  # transactionBufferClientOperationTimeoutInMills
    transaction_buffer_snapshot_min_time_ms: int = 5_000  # transactionBufferSnapshotMinTimeInMillis
    transaction_buffer_snapshot_max_transaction_count: int = 1_000  # transactionBufferSnapshotMaxTransactionCount
    transaction_buffer_segmented_snapshot_enabled: bool = False  # transactionBufferSegmentedSnapshotEnabled
    transaction_buffer_snapshot_segment_size: int = 262_144  # transactionBufferSnapshotSegmentSize (bytes)
    # PIP-160: batched writes of the coordinator log and the pending-ack logs (broker/transactions/batching.py)
    transaction_log_batching: BatchingConfig = field(default_factory=BatchingConfig)
    pending_ack_batching: BatchingConfig = field(default_factory=BatchingConfig)
    # tiered storage (broker/offload/): the store, and the defaults of the namespace policies
    offload: OffloadSettings = field(default_factory=OffloadSettings)
    managed_ledger_offload_auto_trigger_size_threshold_bytes: int = -1  # namespace offload_threshold; -1 off
    managed_ledger_offload_deletion_lag_ms: int = 4 * 3600 * 1000  # namespace offload_deletion_lag_ms
    # PIP-186: two-phase ledger deletion (broker/deletion/)
    ledger_deletion: DeletionConfig = field(default_factory=DeletionConfig)
    # geo-replication (broker/replication/)
    replication_producer_queue_size: int = 1000  # replicationProducerQueueSize: entries in flight per replicator
    replication_policy_check_duration_seconds: int = 600  # replicationPolicyCheckDurationSeconds
    # PIP-33 replicated subscriptions (broker/replicated_subscriptions/)
    enable_replicated_subscriptions: bool = True  # enableReplicatedSubscriptions
    replicated_subscriptions_snapshot_frequency_millis: int = 1000  # replicatedSubscriptionsSnapshotFrequencyMillis
    replicated_subscriptions_snapshot_timeout_seconds: int = 30  # replicatedSubscriptionsSnapshotTimeoutSeconds
    replicated_subscriptions_snapshot_max_cached_per_subscription: int = 30  # ...SnapshotMaxCachedPerSubscription
    # compaction (broker/compaction/); a namespace's compaction_threshold overrides the threshold
    broker_service_compaction_threshold_bytes: int = 0  # brokerServiceCompactionThresholdInBytes: 0 = off
    broker_service_compaction_monitor_interval_seconds: int = 60  # brokerServiceCompactionMonitorIntervalInSeconds
