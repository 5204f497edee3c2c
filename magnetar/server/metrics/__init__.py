"""Prometheus metrics with Pulsar's names and labels, collected from the broker at scrape time: one module
per area (``topics``: per topic and subscription; ``broker``: connections, ledgers and namespace-level
aggregation; ``txn``, ``txn_log``, ``txn_topic``: transactions; ``deletion``: PIP-186; ``replication`` and
``replicated_subscriptions``: geo-replication and PIP-33), joined by ``registry``."""
