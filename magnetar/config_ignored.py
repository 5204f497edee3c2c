"""What a Pulsar configuration key that magnetar ignores belongs to, for the one startup line that says so.

A Pulsar ``broker.conf`` or ``standalone.conf`` works as it is: magnetar reads the keys it has and ignores the rest.
The rest falls into parts of Pulsar magnetar does not have (its storage, metadata and process are its own: no
BookKeeper, no ZooKeeper, no functions worker, no JVM) and Pulsar features magnetar lacks, each named so an operator
knows what a setting will not do. ``tests/unit/test_config_keys.py`` checks that every key of Pulsar's conf files is
either read by magnetar or placed here. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: parts of Pulsar that magnetar does not have: (name, key prefixes or whole keys)
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("BookKeeper", (
        "bookkeeper", "bookie", "managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
        "managedLedgerDefaultAckQuorum", "managedLedgerDigestType", "managedLedgerCache", "managedLedgerCursor",
        "managedLedgerMinimumBacklog", "managedLedgerMaxBacklogBetweenCursorsForCaching",
        "managedLedgerReadEntryTimeout",
        "managedLedgerAddEntryTimeout", "managedLedgerMetadataOperationsTimeout", "managedLedgerMaxReadsInFlight",
        "managedLedgerNewEntriesCheckDelay", "managedLedgerInactiveLedgerRolloverTime", "managedLedgerStatsPeriod",
        "managedLedgerPrometheusStats", "managedLedgerTraceTaskExecution", "managedLedgerDefaultMarkDeleteRateLimit",
        "managedLedgerMaxUnackedRangesToPersistIn", "managedLedgerUnackedRangesOpenCacheSetEnabled",
        "persistentUnackedRangesWithMultipleEntriesEnabled", "lazyCursorRecovery", "dbStorage_", "journalMaxGroupWait",
        "ledgerStorageClass", "nettyMaxFrameSizeBytes", "flushInterval", "diskUsage", "allowLoopback", "gcWaitTime",
        "strictBookieAffinityEnabled", "enableRunBookie", "managedLedgerDataReadPriority",
        "managedLedgerOffloadPrefetchRounds",
    )),
    ("ZooKeeper and the metadata store", (
        "zookeeper", "zooKeeper", "globalZookeeperServers", "configurationStoreServers", "metadataStore",
        "configurationMetadataStore", "metadataSyncEventTopic", "configurationMetadataSyncEventTopic",
    )),
    ("the functions worker and package management", ("functionsWorker", "enablePackagesManagement", "packages")),
    ("the load manager and namespace bundles", (
        "loadBalance", "loadManagerClassName", "supportedNamespaceBundleSplit",
        "defaultNamespaceBundleSplitAlgorithm", "namespaceBundleUnloadingTimeoutMs", "lowerBoundarySheddingEnabled",
        "preferLaterVersions", "failureDomainsEnabled", "isRunningStandalone",
    )),
    ("the WebSocket proxy", ("webSocket",)),
    ("the JVM, Netty and Java plug-ins", (
        "numIOThreads", "numAcceptorThreads", "numOrderedExecutorThreads", "numHttpServerThreads",
        "numExecutorThreadPoolSize", "numCacheExecutorThreadPoolSize", "numWorkerThreadsForNonPersistentTopic",
        "managedLedgerNumSchedulerThreads", "managedLedgerOffloadMaxThreads", "enableBusyWait",
        "skipBrokerShutdownOnOOM",
        "httpServerThreadPoolQueueSize", "httpServerAcceptQueueSize", "tlsProvider", "webServiceTlsProvider",
        "tlsEnabledWithKeyStore", "tlsKeyStore", "tlsTrustStore", "brokerClient", "topicFactoryClassName",
        "delayedDeliveryTrackerFactoryClassName", "transactionMetadataStoreProviderClassName",
        "schemaRegistryStorageClassName", "schemaRegistryCompatibilityCheckers", "authorizationProvider",
        "offloadersDirectory", "narExtractionDirectory", "jvmGCMetricsLoggerClassName", "brokerShutdownTimeoutMs",
        "maxMessagePublishBufferSizeInMB", "messagePublishBufferCheckIntervalInMillis", "maxConcurrentLookupRequest",
        "maxConcurrentTopicLoadRequest", "maxConcurrentNonPersistentMessagePerConnection", "statusFilePath",
        "tlsEnabled", "replicationTlsEnabled", "brokerServicePurgeInactiveFrequencyInSeconds",
        "replicationConnectionsPerBroker", "replicatorPrefix", "dispatcherDispatchMessagesInSubscriptionThread",
        "transactionBufferClientMaxConcurrentRequests", "transactionPendingAckLogIndexMinLag",
        "enablePersistentTopics", "enableNonPersistentTopics", "bindAddresses", "haProxyProtocolEnabled",
        "tlsHostnameVerificationEnabled", "webServiceTlsProtocols", "webServiceTlsCiphers",
    )),
)

#: Pulsar features magnetar does not implement: (feature, key prefixes or whole keys)
FEATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("publish rate limits", ("brokerPublisherThrottling", "topicPublisherThrottling", "maxPublishRatePerTopic",
                             "preciseTopicPublishRateLimiterEnable")),
    ("dispatch rate limits", ("dispatchThrottling", "preciseDispatcherFlowControl",
                              "dispatcherReadFailureBackoffMandatoryStopTimeInMs", "dispatcherMinReadBatchSize",
                              "dispatcherMaxRoundRobinBatchSize")),
    ("subscribe rate limits", ("subscribeThrottlingRatePerConsumer", "subscribeRatePeriodPerConsumerInSecond")),
    ("per-topic producer, consumer and subscription limits", (
        "maxProducersPerTopic", "maxConsumersPerTopic", "maxSubscriptionsPerTopic",
        "maxSameAddress", "maxUnackedMessagesPerSubscription", "maxUnackedMessagesPerBroker",
        "maxNumPartitionsPerPartitionedTopic", "maxTenants", "maxNamespacesPerTenant")),
    ("subscription expiry and auto-creation switches", (
        "subscriptionExpirationTimeMinutes", "subscriptionExpiryCheckIntervalInMinutes",
        "allowAutoSubscriptionCreation", "subscriptionTypesEnabled", "subscriptionKeySharedEnable",
        "subscriptionKeySharedUseConsistentHashing", "subscriptionKeySharedConsistentHashingReplicaPoints",
        "subscriptionRedeliveryTrackerEnabled", "unblockStuckSubscriptionEnabled",
        "activeConsumerFailoverDelayTimeMillis",
        "subscriptionBacklogScan", "subscriptionPatternMaxLength", "enableBrokerSideSubscriptionPatternEvaluation")),
    ("broker-wide backlog quota defaults", ("backlogQuotaDefault", "backlogQuotaCheckEnabled")),
    ("delayed-delivery tuning", ("delayedDelivery", "isDelayedDeliveryDeliverAtTimeStrict")),
    ("entry filters", ("entryFilter", "allowOverrideEntryFilters")),
    ("system-topic based topic policies", ("systemTopic", "topicLevelPoliciesEnabled")),
    ("Athenz, SASL and proxy-role authentication", (
        "athenzDomainNames", "saslJaas", "proxyRoles", "authenticateOriginalAuthData",
        "authorizationAllowWildcardsMatching")),
    ("HTTP request limits", ("httpMaxRequestSize", "httpMaxRequestHeaderSize", "httpRequestsLimitEnabled",
                             "httpRequestsMaxPerSecond", "disableHttpDebugMethods", "maxConcurrentHttpRequests")),
    ("enforced producer encryption", ("encryptionRequireOnProducer",)),
    ("client version checks", ("clientLibraryVersionCheckEnabled",)),
    ("optional metrics and stats", (
        "exposeConsumerLevelMetrics", "exposeProducerLevelMetrics", "exposeManagedLedgerMetrics",
        "exposeManagedCursorMetrics", "exposeBundlesMetrics", "exposePreciseBacklog", "exposePublisherStats",
        "metricsBufferResponse", "metricsServletTimeoutMs", "splitTopicAndPartitionLabelInPrometheus",
        "aggregatePublisherStatsByProducerName", "statsUpdate", "replicationMetricsEnabled")),
    ("other Pulsar broker settings", (
        "brokerDeduplicationMaxNumberOfProducers", "brokerDeduplicationProducerInactivityTimeoutMinutes",
        "brokerDeduplicationSnapshotFrequencyInSeconds", "brokerDeleteInactivePartitionedTopicMetadataEnabled",
        "forceDeleteTenantAllowed", "forceDeleteNamespaceAllowed", "messageExpiryCheckIntervalInMinutes",
        "maxMessageSizeCheckIntervalInSeconds", "acknowledgmentAtBatchIndexLevelEnabled", "topicFencingTimeoutSeconds",
        "brokerServiceCompactionPhaseOneLoopTimeInSeconds", "managedLedgerOffloadThresholdInSeconds",
        "managedLedgerOffloadThresholdInBytes", "managedLedgerOffloadDeletionLagInMillis", "bootstrapNamespaces",
        "clusterMigrationCheckDurationSeconds", "gcsManagedLedgerOffload",
    )),
)


def _owner(key: str, table: tuple[tuple[str, tuple[str, ...]], ...]) -> str | None:
    for name, prefixes in table:
        if key.startswith(prefixes):
            return name
    return None


@dataclass
class Ignored:
    """The keys a configuration gave that magnetar does not read, sorted into parts, features and unknown."""

    parts: dict[str, list[str]] = field(default_factory=dict)
    features: dict[str, list[str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, keys: Iterable[str]) -> Ignored:
        ignored = cls()
        ignored.parts = {name: [] for name, _ in PARTS}
        ignored.features = {name: [] for name, _ in FEATURES}
        for key in sorted(keys):
            part = _owner(key, PARTS)
            feature = None if part else _owner(key, FEATURES)
            if part:
                ignored.parts[part].append(key)
            elif feature:
                ignored.features[feature].append(key)
            else:
                ignored.unknown.append(key)
        ignored.parts = {name: keys for name, keys in ignored.parts.items() if keys}
        ignored.features = {name: keys for name, keys in ignored.features.items() if keys}
        return ignored

    def summary(self) -> str:
        """One INFO line (empty when nothing was ignored); unknown keys are left to ``warning()``."""
        parts = sum(len(keys) for keys in self.parts.values())
        features = sum(len(keys) for keys in self.features.values())
        if not parts and not features:
            return ""
        text = [f"ignoring {parts + features} Pulsar configuration keys"]
        if parts:
            text.append(f"{parts} for parts magnetar does not have ("
                        + ", ".join(f"{name}: {len(keys)}" for name, keys in self.parts.items()) + ")")
        if features:
            text.append(f"{features} for Pulsar features magnetar lacks ("
                        + ", ".join(f"{name}: {len(keys)}" for name, keys in self.features.items()) + ")")
        return "; ".join(text) + " (the keys: debug log; docs/reference/configuration.md)"

    def keys(self) -> str:
        """Every ignored key by what it belongs to, for the DEBUG line after the summary."""
        groups = {**self.parts, **self.features}
        return "; ".join(f"{name}: {', '.join(keys)}" for name, keys in groups.items())

    def warning(self) -> str:
        """One WARNING line for keys that are neither magnetar's nor Pulsar's known ones (often a misspelling)."""
        if not self.unknown:
            return ""
        return f"ignoring {len(self.unknown)} unknown configuration keys: {', '.join(self.unknown)}"
