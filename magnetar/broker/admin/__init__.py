"""The admin API's use cases, on top of the registry and every feature (Pulsar's admin REST resources as
plain async methods that raise the broker's errors; the HTTP layer maps them to statuses). Knows no HTTP.

- ``broker_admin``: :class:`BrokerAdmin`: clusters, tenants, namespaces and their policies, topics (create,
  partitions, unload, delete, terminate, last message id); ``policy_values``: validating policy values;
- ``subscriptions``: list, create at a position, delete, skip, reset, expire, peek;
- ``permissions``: grants and revocations; ``clusters``: clusters and topic-level replication clusters;
- ``stats``: topic, subscription and internal stats as Pulsar's JSON.
"""
