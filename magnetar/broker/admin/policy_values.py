"""Policy values of a namespace as the admin API accepts and shows them: each field's validation (one
setter per field, Pulsar's field names and JSON shapes) and the defaults a namespace's GET fills in."""

from __future__ import annotations

from typing import Any

from magnetar.broker.authorization.policies import AuthPolicies
from magnetar.broker.errors import InvalidRequest, NotAcceptable, PreconditionFailed
from magnetar.broker.policies import BacklogQuota
from magnetar.broker.registry.catalog import PARTITIONS_MAX

#: the policy fields a namespace's GET shows, with Pulsar's defaults
POLICY_DEFAULTS: dict[str, Any] = {
    "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
    "replication_clusters": [],
    "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
    "backlog_quota_map": {},
    "topicDispatchRate": {},
    "subscriptionDispatchRate": {},
    "clusterSubscribeRate": {},
    "publishMaxMessageRate": {},
    "latency_stats_sample_rate": {},
    "message_ttl_in_seconds": None,
    "retention_policies": None,
    "deleted": False,
    "autoTopicCreationOverride": None,
    "compaction_threshold": None,
    "schema_auto_update_compatibility_strategy": "Full",
    "offload_threshold": -1,
    "offload_deletion_lag_ms": None,
}


def check_partitions(partitions: int) -> None:
    if not 0 < partitions <= PARTITIONS_MAX:
        raise NotAcceptable(f"Number of partitions should be more than 0 and at most {PARTITIONS_MAX}")


def string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 1000


def _int_field(value: object, what: str, low: int = -1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        raise InvalidRequest(f"{what} must be an integer >= {low}")
    return value


def _retention(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise InvalidRequest("retention must be an object")
    return {
        "retentionTimeInMinutes": _int_field(value.get("retentionTimeInMinutes", 0), "retentionTimeInMinutes"),
        "retentionSizeInMB": _int_field(value.get("retentionSizeInMB", 0), "retentionSizeInMB"),
    }


def _ttl(value: Any) -> int:
    return _int_field(value, "messageTTL", 0)


def _compaction_threshold(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PreconditionFailed("compactionThreshold must be 0 or greater")
    return value


def _clusters(value: Any) -> list[str]:
    if not string_list(value):
        raise InvalidRequest("replication clusters must be a list of cluster names")
    return list(dict.fromkeys(value))


def _auto_topic_creation(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("allowAutoTopicCreation"), bool):
        raise InvalidRequest("autoTopicCreation needs a boolean allowAutoTopicCreation")
    topic_type = value.get("topicType", "non-partitioned")
    if topic_type not in ("partitioned", "non-partitioned"):
        raise NotAcceptable("topicType must be partitioned or non-partitioned")
    result: dict[str, Any] = {"allowAutoTopicCreation": value["allowAutoTopicCreation"], "topicType": topic_type}
    if topic_type == "partitioned":
        partitions = _int_field(value.get("defaultNumPartitions", 1), "defaultNumPartitions", 1)
        check_partitions(partitions)
        result["defaultNumPartitions"] = partitions
    return result


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest("The body must be true or false")
    return value


def _quota_map(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidRequest("A backlog quota map is a JSON object")
    return {kind: BacklogQuota.parse(quota).rest() for kind, quota in value.items()}


POLICY_SETTERS: dict[str, Any] = {
    "auth_policies": lambda value: AuthPolicies.from_json(value).to_json(),
    "retention_policies": _retention,
    "message_ttl_in_seconds": _ttl,
    "replication_clusters": _clusters,
    "autoTopicCreationOverride": _auto_topic_creation,
    "offload_threshold": lambda v: _int_field(v, "offloadThreshold"),
    "offload_deletion_lag_ms": lambda v: _int_field(v, "offloadDeletionLagMs"),
    "compaction_threshold": _compaction_threshold,
    "deduplicationEnabled": _boolean,
    "encryption_required": _boolean,
    "backlog_quota_map": _quota_map,
}
