"""Which configuration keys are magnetar's own, which are older spellings, and what each key means: the facts the
generated configuration reference (docs/reference/configuration.md) prints beside the key table of ``config.py``.

``tests/unit/test_config_keys.py`` keeps this in step with the table: every key read is Pulsar's (checked against a
stored list of Pulsar's key names) or listed here as magnetar's own, and every key has a meaning.
"""

from __future__ import annotations

#: keys Pulsar does not have: magnetar's own settings, PIP-186's proposed keys (never merged), test-only faults
MAGNETAR_KEYS = frozenset({
    "connectHandshakeTimeoutSeconds", "connectionOutputHighWaterBytes", "httpRequestTimeoutSeconds",
    "maxChunkedMessageSizeBytes", "maxClientNameLength", "maxProducerMetadataSize", "openFileLimit",
    "managedLedgerCursorPersistIntervalMs", "managedLedgerOffloadKeyPrefix", "managedLedgerOffloadReadCacheSizeInBytes",
    "transactionCoordinatorCount", "transactionTimeoutMillis", "transactionTimeoutMaxMillis",
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
