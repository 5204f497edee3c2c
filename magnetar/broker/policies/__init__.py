"""Topic-level policies and the effective value of each policy (topic, else namespace, else broker config):
deduplication, retention, message TTL and backlog quotas, and the backlog-quota checks producers meet.

Topic policies live in the metadata store at ``/admin/topic-policies/{tenant}/{ns}/{domain}/{topic}`` with
Pulsar's ``TopicPolicies`` field names (``deduplicationEnabled``, ``retentionPolicies``,
``messageTTLInSeconds``, ``backLogQuotaMap``); a partition uses its partitioned topic's."""

from magnetar.broker.policies.quota import BacklogQuota, QuotaPolicy, backlog_bytes, quota_refusal
from magnetar.broker.policies.store import TopicPolicyStore, effective_dedup, effective_quotas

__all__ = [
    "BacklogQuota",
    "QuotaPolicy",
    "TopicPolicyStore",
    "backlog_bytes",
    "effective_dedup",
    "effective_quotas",
    "quota_refusal",
]
