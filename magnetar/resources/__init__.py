"""magnetar.resources: the only code that spells metadata keys and decodes their JSON (Pulsar's
PulsarResources). Everything the broker keeps in the metadata store, by kind:

- ``tenants``: ``/admin/policies/<tenant>``, a :class:`TenantInfo`;
- ``namespaces``: ``/admin/policies/<tenant>/<namespace>``, the namespace's :class:`Policies`;
- ``clusters``: ``/admin/clusters/<name>``, a :class:`ClusterData`;
- ``topics``: ``/admin/partitioned-topics/...`` (a :class:`PartitionedTopicMetadata`) and
  ``/admin/topic-policies/...`` (a topic's own policies);
- ``schemas``: ``/schemas/<tenant>/<namespace>/<local>`` (the schema registry's format);
- ``transactions``: ``/magnetar/txn-buffer-snapshots/<topic>`` (the snapshot's format);
- ``configuration``: ``/admin/configuration``, the dynamic configuration (PIP-160's batching switch);
- ``ownership``: ``/loadbalance/brokers/...``, ``/namespace/...``, ``/admin/local-policies/...`` (keys only,
  for the cluster issues).

The managed ledger's and cursors' records (``/managed-ledgers/...``) are the ledger package's own and stay
there. Writes are compare-and-set when the caller names a version, and the metadata layer's errors
(``BadVersion``, ``NotFound``, ``MetadataError``) go back to the caller unchanged: each caller decides what a
conflict means for it. Tenants' and namespaces' records are cached, kept current by the store's watch.

Sits between ``metadata`` (below) and ``broker`` (above); knows nothing of topics beyond their names' parts.
"""

from __future__ import annotations

from magnetar.metadata.api import MetadataStore
from magnetar.resources._names import NamespaceRef, TopicRef
from magnetar.resources._records import Versioned
from magnetar.resources.clusters import ClusterData, ClusterResources
from magnetar.resources.namespaces import NamespaceResources, Policies
from magnetar.resources.schemas import SchemaResources
from magnetar.resources.tenants import TenantInfo, TenantResources
from magnetar.resources.topics import PartitionedTopicMetadata, PartitionedTopicResources, TopicPolicyResources

__all__ = [
    "ClusterData",
    "ClusterResources",
    "MetadataResources",
    "NamespaceRef",
    "NamespaceResources",
    "PartitionedTopicMetadata",
    "PartitionedTopicResources",
    "Policies",
    "SchemaResources",
    "TenantInfo",
    "TenantResources",
    "TopicPolicyResources",
    "TopicRef",
    "Versioned",
]


class MetadataResources:
    """One per broker over its metadata store: every kind of record, each through its own resource."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.clusters = ClusterResources(store)
        self.tenants = TenantResources(store)
        self.namespaces = NamespaceResources(store)
        self.partitioned_topics = PartitionedTopicResources(store)
        self.topic_policies = TopicPolicyResources(store)
        self.schemas = SchemaResources(store)

    async def close(self) -> None:
        """Stop watching the store (the caches empty); the store itself is its owner's to close."""
        self.tenants.close()
        self.namespaces.close()
