"""Which configuration keys are magnetar's own, which are older spellings, and what each key means: the facts the
generated configuration reference (docs/reference/configuration.md) prints beside the key table of ``config.py``.

``tests/unit/test_config_keys.py`` keeps this in step with the table: every key read is Pulsar's (checked against a
stored list of Pulsar's key names) or listed here as magnetar's own, and every key has a meaning.
"""

from __future__ import annotations

import enum

#: keys Pulsar does not have: magnetar's own settings, PIP-186's proposed keys (never merged), test-only faults
MAGNETAR_KEYS = frozenset({
    "connectHandshakeTimeoutSeconds", "connectionOutputHighWaterBytes", "httpRequestTimeoutSeconds",
    "maxChunkedMessageSizeBytes", "maxClientNameLength", "maxProducerMetadataSize", "openFileLimit",
    "managedLedgerCursorPersistIntervalMs", "managedLedgerOffloadKeyPrefix", "managedLedgerOffloadReadCacheSizeInBytes",
    "transactionCoordinatorCount", "transactionTimeoutMillis", "transactionTimeoutMaxMillis",
    "maxOpenTransactionsPerConnection",
    "topicTwoPhaseDeletionEnabled", "twoPhaseDeletionLedgerDeletionParallelism", "twoPhaseDeletionMaxRetryDeleteCount",
    "twoPhaseDeletionReconsumeLaterInSeconds", "magnetarTestingCrashPoints", "magnetarTestingFsyncFailureProbability",
    "magnetarTestingStorageDeleteFailureProbability",
    "ledgerStoreUrl", "ledgerStoreServiceEndpoint", "ledgerStoreRegion", "ledgerStoreRequestTimeoutMillis",
    "ledgerStoreFlushMaxDelayMillis", "ledgerStoreFlushMaxBytes", "ledgerStoreReadCacheSizeBytes",
})

#: older spellings still read: alias -> the key to write
ALIASES = {
    "schemaValidationEnforced": "isSchemaValidationEnforced",
}

#: what each key means, by topic; a key that writes the same setting as one listed here (an alias, Pulsar's older
#: ``s3...`` offload names) is shown in its row
MEANINGS: dict[str, dict[str, str]] = {
    "Listeners and the process": {
        "bindAddress": "address both listeners bind (also `--bind-address`)",
        "brokerServicePort": "binary-protocol port (also `--broker-port`); 0 = any free port; empty = no plain "
                             "listener",
        "webServicePort": "HTTP port of the admin API, lookups and `/metrics` (also `--web-port`); 0 = any free port; "
                          "empty = no plain listener",
        "clusterName": "this broker's cluster; must not be empty",
        "advertisedAddress": "host in lookup answers; unset = the address the client reached (`localhost` on "
                             "loopback)",
        "advertisedListeners": "`name:pulsar://host:port,...`: the URLs lookups answer per listener name",
        "internalListenerName": "the listener a client naming none gets",
        "journalSyncData": "fsync before a send is receipted (group commit); `false` = written to the OS only",
        "openFileLimit": "ledger files held open; the least recently used idle ones are closed",
        "keepAliveIntervalSeconds": "ping idle clients this often; close after a missed answer",
    },
    "Topics, producers and consumers": {
        "maxMessageSize": "largest message; frames may be 10 KiB larger",
        "maxChunkedMessageSizeBytes": "largest chunked message (all its chunks)",
        "allowAutoTopicCreation": "create a topic on its first producer, consumer or lookup",
        "allowAutoTopicCreationType": "`non-partitioned` or `partitioned`",
        "defaultNumPartitions": "partitions of an auto-created partitioned topic",
        "brokerDeduplicationEnabled": "drop resends of a sequence id already stored for a producer name",
        "brokerDeduplicationEntriesInterval": "snapshot the deduplication state every this many entries",
        "brokerDeduplicationSnapshotIntervalSeconds": "... and at most this long after a write",
        "maxClientNameLength": "characters of a producer or consumer name",
        "maxConsumerMetadataSize": "characters of a consumer's metadata (keys + values)",
        "maxProducerMetadataSize": "characters of a producer's metadata (keys + values)",
        "maxPendingPublishRequestsPerConnection": "sends in flight per connection before the broker stops reading it",
        "maxUnackedMessagesPerConsumer": "Shared/Key_Shared consumers stop receiving at this many unacked messages; "
                                         "0 = no limit",
        "dispatcherMaxReadBatchSize": "entries one dispatch read takes",
        "dispatcherMaxReadSizeBytes": "bytes one dispatch read takes",
        "dispatcherReadFailureBackoffInitialTimeInMs": "after a failed read (any storage) a subscription waits this "
                                                       "long, doubling ...",
        "dispatcherReadFailureBackoffMaxTimeInMs": "... up to this; a good read resets it",
        "autoSkipNonRecoverableData": "skip (acknowledge) entries that fail their checksum instead of waiting",
        "brokerDeleteInactiveTopicsEnabled": "delete inactive topics (magnetar's default: only unload them)",
        "brokerDeleteInactiveTopicsFrequencySeconds": "how often inactive topics are looked for",
        "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": "inactive this long before unload/delete; 0 = the "
                                                                "frequency",
        "brokerDeleteInactiveTopicsMode": "`delete_when_no_subscriptions` or `delete_when_subscriptions_caught_up`",
        "maxTopicsPerNamespace": "topics per namespace (a partitioned topic counts its partitions); 0 = no limit",
    },
    "Schemas": {
        "schemaCompatibilityStrategy": "for namespaces that set none: `FULL`, `BACKWARD`, `FORWARD`, their "
                                       "`_TRANSITIVE` forms, `ALWAYS_COMPATIBLE`, `ALWAYS_INCOMPATIBLE`",
        "isAllowAutoUpdateSchemaEnabled": "clients may register new schema versions (namespace default)",
        "isSchemaValidationEnforced": "refuse producers without a schema on topics with one (namespace default)",
    },
    "Retention, quotas and compaction": {
        "defaultRetentionTimeInMinutes": "keep consumed ledgers this long; 0 = trim at once, -1 = forever. "
                                         "**A topic with no subscription counts as consumed**",
        "defaultRetentionSizeInMB": "keep up to this much consumed data; 0 = none, -1 = unlimited",
        "ttlDurationDefaultInSeconds": "messages older than this are acknowledged for every subscription; 0 = never",
        "retentionCheckIntervalInSeconds": "how often retention, TTL and automatic offload run",
        "backlogQuotaCheckIntervalInSeconds": "how often producers of topics over a blocking backlog quota are closed",
        "brokerServiceCompactionThresholdInBytes": "compact a topic once this many bytes follow its compaction "
                                                   "horizon; 0 = never (a namespace's `compactionThreshold` "
                                                   "overrides)",
        "brokerServiceCompactionMonitorIntervalInSeconds": "how often topics are checked against the threshold",
    },
    "Managed ledgers": {
        "managedLedgerMaxEntriesPerLedger": "roll over to a new ledger after this many entries ...",
        "managedLedgerMaxSizePerLedgerMbytes": "... or this many MiB ...",
        "managedLedgerMaxLedgerRolloverTimeMinutes": "... or this long",
        "managedLedgerMinLedgerRolloverTimeMinutes": "no rollover before a ledger is this old",
        "managedLedgerMaxUnackedRangesToPersist": "individually acknowledged ranges a cursor persists",
        "managedLedgerCursorPersistIntervalMs": "acks are persisted within this time: at most this much of acks is "
                                                "redelivered after a crash",
        "managedLedgerDefaultMarkDeleteRateLimit": "cursor writes per second per cursor where the metadata store is "
                                                   "shared (ZooKeeper), which stretches the persist interval to "
                                                   "1000 ms / this",
    },
    "Ledger storage": {
        "ledgerStoreUrl": "`embedded:` (ledger files under the data directory) or `s3://BUCKET[/PREFIX]` (ledgers "
                          "in an S3-compatible object store, shared by a cluster's brokers)",
        "ledgerStoreServiceEndpoint": "endpoint of an S3-compatible service; empty: AWS's for the region",
        "ledgerStoreRegion": "region; empty: the AWS credential chain's",
        "ledgerStoreRequestTimeoutMillis": "connect and read timeout of one object-store request",
        "ledgerStoreFlushMaxDelayMillis": "longest wait of an entry before its chunk is written",
        "ledgerStoreFlushMaxBytes": "largest chunk written in one request",
        "ledgerStoreReadCacheSizeBytes": "cache of chunks read back",
    },
    "Metadata store": {
        "metadataStoreUrl": "empty: the embedded SQLite store in the data directory; `zk:host:port[,host:port]/chroot`"
                            ": ZooKeeper (see docs/zookeeper.md)",
        "configurationMetadataStoreUrl": "the configuration store (tenants, namespaces, clusters); empty: the same "
                                         "store",
        "metadataStoreSessionTimeoutMillis": "ZooKeeper session timeout",
        "metadataStoreOperationTimeoutSeconds": "a metadata operation that takes longer fails",
        "zookeeperSessionExpiredPolicy": "`reconnect` (keep serving, open a new session) or `shutdown`",
    },
    "Cluster (`magnetar broker`)": {
        "defaultNumberOfNamespaceBundles": "hash ranges a new namespace is cut into; each is owned by one broker "
                                           "(see the Cluster guide)",
    },
    "Connections and HTTP": {
        "connectionOutputHighWaterBytes": "queued output per connection before the broker stops reading it",
        "connectHandshakeTimeoutSeconds": "a connection that sends no CONNECT in time is closed",
        "brokerMaxConnections": "binary-protocol connections; 0 = no limit",
        "brokerMaxConnectionsPerIp": "binary-protocol connections per client address; 0 = no limit",
        "httpRequestTimeoutSeconds": "an HTTP request (or its body) must arrive within this",
        "maxHttpServerConnections": "HTTP connections; the longest idle ones are closed beyond it",
        "exposeTopicLevelMetricsInPrometheus": "`false`: `/metrics` per namespace only",
    },
    "Transactions": {
        "transactionCoordinatorEnabled": "run the transaction coordinator(s)",
        "transactionCoordinatorCount": "coordinators (partitions of `transaction_coordinator_assign`)",
        "transactionTimeoutMillis": "a transaction's timeout when the client sends none",
        "transactionTimeoutMaxMillis": "a longer client timeout is cut to this (3 hours); 0 = no cap",
        "maxConsumersPerSubscription": "consumers on one subscription; SUBSCRIBE past it: ConsumerBusy; 0 = no limit",
        "maxOpenTransactionsPerConnection": "transactions one connection may have open at once (NEW_TXN past it: "
                                            "NotAllowed); 0 = no limit",
        "maxActiveTransactionsPerCoordinator": "open transactions per coordinator; 0 = no limit",
        "transactionBufferClientOperationTimeoutInMills": "the coordinator's wait for one partition or subscription "
                                                          "to end a transaction",
        "transactionBufferSnapshotMinTimeInMillis": "least time between two snapshots of a topic's aborted "
                                                    "transactions",
        "transactionBufferSnapshotMaxTransactionCount": "aborts after which a snapshot is taken at once",
        "transactionBufferSegmentedSnapshotEnabled": "PIP-178: snapshots as segments of the "
                                                     "`__transaction_buffer_snapshot` topic",
        "transactionBufferSnapshotSegmentSize": "bytes of aborted ids per snapshot segment",
        "transactionLogBatchedWriteEnabled": "PIP-160: batch the coordinator log's records",
        "transactionLogBatchedWriteMaxRecords": "records per batch (at least 10 when enabled)",
        "transactionLogBatchedWriteMaxSize": "bytes per batch (at least 131072 when enabled)",
        "transactionLogBatchedWriteMaxDelayInMillis": "longest wait of a batch's first record",
        "transactionPendingAckBatchedWriteEnabled": "PIP-160: batch the pending-ack logs' records",
        "transactionPendingAckBatchedWriteMaxRecords": "records per batch (at least 10 when enabled)",
        "transactionPendingAckBatchedWriteMaxSize": "bytes per batch (at least 131072 when enabled)",
        "transactionPendingAckBatchedWriteMaxDelayInMillis": "longest wait of a batch's first record",
    },
    "Geo-replication": {
        "replicationProducerQueueSize": "entries a replicator has in flight to one remote cluster",
        "replicationPolicyCheckDurationSeconds": "how often replication policies are re-read",
        "enableReplicatedSubscriptions": "PIP-33: `false` ignores `replicate_subscription_state`",
        "replicatedSubscriptionsSnapshotFrequencyMillis": "how often a topic with a replicated subscription starts a "
                                                          "snapshot",
        "replicatedSubscriptionsSnapshotTimeoutSeconds": "a snapshot missing an answer this long is dropped",
        "replicatedSubscriptionsSnapshotMaxCachedPerSubscription": "snapshots a subscription keeps in memory",
    },
    "Tiered storage": {
        "managedLedgerOffloadDriver": "`filesystem`, `aws-s3` or `s3`; unset = no offload",
        "managedLedgerOffloadBucket": "the bucket",
        "managedLedgerOffloadRegion": "the region",
        "managedLedgerOffloadServiceEndpoint": "endpoint of an S3-compatible service (path-style addressing)",
        "managedLedgerOffloadMaxBlockSizeInBytes": "largest block of an offloaded ledger",
        "managedLedgerOffloadReadBufferSizeInBytes": "bytes per ranged read",
        "managedLedgerOffloadReadCacheSizeInBytes": "block cache for reads of offloaded ledgers",
        "managedLedgerOffloadKeyPrefix": "prefix of every object key",
        "fileSystemURI": "the directory of the `filesystem` driver (a path or `file://`)",
        "fileSystemProfilePath": "Hadoop XML profile(s) of the `filesystem` driver, comma-separated",
        "managedLedgerOffloadAutoTriggerSizeThresholdBytes": "default of a namespace's `offload_threshold`; -1 = off",
        "managedLedgerOffloadDeletionLagMs": "default of a namespace's `offload_deletion_lag_ms`; -1 = keep local "
                                             "copies",
    },
    "Two-phase ledger deletion (PIP-186)": {
        "topicTwoPhaseDeletionEnabled": "drop ledgers through the `__ledger_deletion` topic; `false` = one phase",
        "twoPhaseDeletionLedgerDeletionParallelism": "partitions of the deletion topic",
        "twoPhaseDeletionReconsumeLaterInSeconds": "wait before a failed deletion is tried again",
        "twoPhaseDeletionMaxRetryDeleteCount": "tries before a deletion goes to the dead-letter topic",
    },
    "Security": {
        "brokerServicePortTls": "TLS binary-protocol port (Pulsar uses 6651)",
        "webServicePortTls": "HTTPS port (Pulsar uses 8443)",
        "tlsCertificateFilePath": "the broker's certificate (PEM)",
        "tlsKeyFilePath": "the broker's private key (PEM)",
        "tlsTrustCertsFilePath": "CAs of client certificates; set: clients may present one",
        "tlsRequireTrustedClientCertOnConnect": "refuse handshakes without a trusted client certificate",
        "tlsAllowInsecureConnection": "do not ask clients for certificates",
        "tlsProtocols": "e.g. `TLSv1.3,TLSv1.2`; empty = the library's",
        "tlsCiphers": "OpenSSL cipher names; empty = the library's",
        "tlsCertRefreshCheckDurationSec": "reload changed certificate files this often",
        "authenticationEnabled": "authenticate clients",
        "authenticationProviders": "`org.apache.pulsar.broker.authentication.AuthenticationProviderToken`, `...Tls`, "
                                   "`...Basic` (or `token`, `tls`, `basic`)",
        "authenticationRefreshCheckSeconds": "how often expiring credentials are checked and challenged",
        "anonymousUserRole": "role of clients without credentials; unset = refused",
        "authenticateMetricsEndpoint": "`/metrics` needs credentials",
        "tokenSecretKey": "HS256 secret (`file:`, `data:`, `env:`)",
        "tokenPublicKey": "RS256/ES256 public key (`file:`, `data:`, `env:`)",
        "tokenPublicAlg": "algorithm of `tokenPublicKey`",
        "tokenAuthClaim": "the claim that names the role",
        "tokenAudienceClaim": "the audience claim; unset = no audience check",
        "tokenAudience": "the audience this broker accepts",
        "basicAuthConf": "htpasswd file: a path, `file:`, `data:` or base64 text",
        "authorizationEnabled": "check permissions",
        "superUserRoles": "comma-separated roles that may do everything",
    },
    "For tests only (never in production)": {
        "magnetarTestingStorageDeleteFailureProbability": "storage deletes fail at random",
        "magnetarTestingFsyncFailureProbability": "fsyncs of ledger files fail with EIO at random",
        "magnetarTestingCrashPoints": "the process SIGKILLs itself at these named points "
                                      "(`magnetar/core/crashpoints.py`)",
    },
}


#: defaults that are not plain values, as a user writes them
SHOWN_DEFAULTS = {
    "ledgerStoreUrl": "`embedded:`",
}


def _default_text(value: object) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or value == "" or value == ():
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple):
        return "`" + ",".join(str(v) for v in value) + "`"
    if isinstance(value, str):
        return f"`{value}`"
    if not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a plain value: give the key's default text in SHOWN_DEFAULTS")
    return str(value)


def defaults() -> dict[str, str]:
    """Each key's default as the reference prints it (in the key's own unit)."""
    from magnetar.app.settings import StandaloneSettings
    from magnetar.config import key_targets

    settings = StandaloneSettings()
    broker = settings.broker
    sections: dict[str, object] = {"settings": settings, "broker": broker, "ledger": broker.managed_ledger,
                                   "security": settings.security, "offload": broker.offload}
    shown = {}
    for key, (section, name, scale) in key_targets().items():
        owner = sections.get(section) or getattr(settings, section, None) or getattr(broker, section)
        value = getattr(owner, name)
        if key in SHOWN_DEFAULTS:
            shown[key] = SHOWN_DEFAULTS[key]
        else:
            shown[key] = _default_text(value / scale if scale != 1 and isinstance(value, int | float) else value)
    return shown


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference_markdown() -> str:
    """The configuration reference: every key by topic with its default and meaning, then the Pulsar keys that
    are ignored and why. Generated into docs/reference/configuration.md when the site is built."""
    from magnetar.config import key_targets
    from magnetar.config_ignored import FEATURES, PARTS

    targets = key_targets()
    shown = defaults()
    out: list[str] = []
    for title, keys in MEANINGS.items():
        out += [f"## {title}", "", "| key | default | meaning |", "|---|---|---|"]
        for key, meaning in keys.items():
            same = [k for k in targets if k != key and targets[k][:2] == targets[key][:2]]
            names = ", ".join(f"`{k}`" for k in [key, *same])
            notes = []
            if key in MAGNETAR_KEYS:
                notes.append("magnetar's own key")
            notes += [f"`{k}` is read too (older spelling)" for k in same if k in ALIASES]
            extra = f" ({'; '.join(notes)})" if notes else ""
            out.append(f"| {names} | {_cell(shown[key])} | {_cell(meaning)}{_cell(extra)} |")
        out.append("")
    out += ["## Pulsar keys magnetar ignores", "",
            "A Pulsar `broker.conf` or `standalone.conf` can be used as it is: these keys are accepted and ignored, "
            "and summed up in one line at startup (the keys themselves at DEBUG). Keys are matched by these prefixes.",
            "", "| belongs to | keys (prefixes) |", "|---|---|"]
    for kind, table in (("a part magnetar does not have", PARTS), ("a Pulsar feature magnetar lacks", FEATURES)):
        for name, prefixes in table:
            out.append(f"| {name} ({kind}) | {_cell(', '.join(f'`{p}`' for p in prefixes))} |")
    out.append("")
    return "\n".join(out)
