"""The parts of one broker as the composition root built them: what the network edges are handed.

Every service in this record was given its own collaborators when it was built (``magnetar.app.broker``);
none of them reads this record. The edges (``server/binary``, ``server/http``, ``server/metrics``) and the
admin use cases (``broker/admin``) read it to reach what a request needs. The process that owns the broker
fills the late parts (``txn_coordinators`` and ``txn_registry`` once the coordinators run,
``ledger_deletion`` once PIP-186's service runs); nothing else is ever assigned here.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.broker.cluster.lookup import Lookup
from magnetar.broker.cluster.ownership import Ownership
from magnetar.broker.cluster.parts import ClusterParts
from magnetar.broker.compaction import CompactionService
from magnetar.broker.config import BrokerConfig
from magnetar.broker.connections import ConnectionCounts
from magnetar.broker.deletion.service import LedgerDeletionService
from magnetar.broker.nonpersistent import NonPersistentTopics
from magnetar.broker.offload.service import OffloadService
from magnetar.broker.policies.retention import RetentionService
from magnetar.broker.policies.service import PolicyService
from magnetar.broker.registry.catalog import TopicCatalog
from magnetar.broker.registry.inactive import InactiveTopics
from magnetar.broker.registry.registry import TopicRegistry
from magnetar.broker.replication.service import ReplicationService
from magnetar.broker.replication.subscriptions.service import ReplicatedSubscriptions
from magnetar.broker.schema import SchemaRegistry
from magnetar.broker.topic.producer import ProducerNames
from magnetar.broker.transactions.api import TxnParticipants, TxnRegistry
from magnetar.broker.transactions.batching import BatchedLogSwitch
from magnetar.broker.transactions.coordinators import TransactionCoordinatorService
from magnetar.broker.transactions.segmented_snapshot import SwitchedSnapshotStore
from magnetar.core.clock import Clock
from magnetar.ledger.api import ManagedLedgerFactory
from magnetar.metadata import api as md
from magnetar.resources import MetadataResources


@dataclass(slots=True, kw_only=True, eq=False)
class Broker:
    config: BrokerConfig
    clock: Clock
    metadata: md.MetadataStore
    resources: MetadataResources  # the metadata store's records (magnetar.resources): keys and JSON in one place
    ledgers: ManagedLedgerFactory
    started_ms: int
    connections: ConnectionCounts  # counted by the binary listener, read by /metrics
    producer_names: ProducerNames  # names for producers that chose none
    # topics: what exists, who owns it, the loaded ones and their lifecycle
    catalog: TopicCatalog
    ownership: Ownership
    lookup: Lookup
    registry: TopicRegistry
    inactive_topics: InactiveTopics
    # features
    policies: PolicyService  # topic policies, effective dedup, backlog quotas
    retention: RetentionService
    schemas: SchemaRegistry
    non_persistent: NonPersistentTopics
    offload: OffloadService
    replication: ReplicationService
    replicated_subscriptions: ReplicatedSubscriptions
    compaction: CompactionService | None  # None without a store for compacted ledgers
    # transactions
    txn_log_batching: BatchedLogSwitch  # PIP-160: the writers of the coordinator log and pending-ack logs
    txn_snapshots: SwitchedSnapshotStore  # PIP-178: transaction-buffer snapshots
    txn_participants: TxnParticipants  # what a coordinator calls to end a transaction on this broker's topics
    txn_coordinators: TransactionCoordinatorService | None = None  # late: the coordinators, once they run
    txn_registry: TxnRegistry | None = None  # late: what topics ask before a transactional SEND or ACK
    ledger_deletion: LedgerDeletionService | None = None  # late: PIP-186's two-phase deletion, when it runs
    cluster: ClusterParts | None = None  # a cluster broker's membership, bundle ownership and moves
