"""The common ``pulsar-admin`` verbs of ``magnetar admin``: clusters, tenants, namespaces (and their retention,
TTL, compaction, replication, auto-creation, offload and permission policies), topics, subscriptions, offload,
compaction, replicated subscriptions, transactions and PIP-186's ledger verbs. Each verb builds its HTTP
call(s) from its arguments; ``base`` sends them."""

from __future__ import annotations

import argparse
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from magnetar.cli.admin.base import (
    CLUSTERS,
    FORCE,
    NAME,
    NS,
    PARTS,
    ROLES,
    SUB,
    TENANT,
    TOPIC,
    UNITS_BYTES,
    UNITS_MS,
    UNITS_S,
    Build,
    Call,
    HttpError,
    Spec,
    UsageError,
    Verb,
    amount,
    force,
    message_id,
    ns_path,
    q,
    request,
    retention_body,
    split_list,
    topic_path,
)

PEEK_MAX = 1000
#: offload-status --wait polls this often, at most this many times
OFFLOAD_POLL_S = 1.0
OFFLOAD_POLLS_MAX = 3600


def _tenant_body(a: argparse.Namespace) -> dict[str, list[str]]:
    return {"adminRoles": split_list(a.admin_roles),
            "allowedClusters": split_list(a.allowed_clusters) or ["standalone"]}


CLUSTER_URLS: tuple[Spec, ...] = (
    (("--url",), {"default": "", "help": "admin HTTP URL (serviceUrl)"}),
    (("--url-secure",), {"default": "", "help": "admin HTTPS URL (serviceUrlTls)"}),
    (("--broker-url",), {"default": "", "help": "binary protocol URL (brokerServiceUrl)"}),
    (("--broker-url-secure",), {"default": "", "help": "binary protocol TLS URL (brokerServiceUrlTls)"}),
)


def _cluster(a: argparse.Namespace, method: str) -> Call:
    body = {"serviceUrl": a.url, "serviceUrlTls": a.url_secure, "brokerServiceUrl": a.broker_url,
            "brokerServiceUrlTls": a.broker_url_secure}
    return Call(method, f"/admin/v2/clusters/{urllib.parse.quote(a.name, safe='')}",
                {k: v for k, v in body.items() if v})


def _auto_topic(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"allowAutoTopicCreation": a.enable and not a.disable, "topicType": a.type}
    if a.type == "partitioned":
        body["defaultNumPartitions"] = a.num_partitions
    return body


def _reset(a: argparse.Namespace) -> Call:
    base = f"{topic_path(a.topic)}/subscription/{urllib.parse.quote(a.subscription, safe='')}/resetcursor"
    if a.messageId is not None:
        return Call("POST", base, message_id(a.messageId))
    if a.time is None:
        raise UsageError("reset-cursor needs --time or --messageId")
    return Call("POST", f"{base}/{max(0, _now_ms() - amount(a.time, UNITS_S, 'time') * 1000)}")


def _peek(a: argparse.Namespace) -> list[Call]:
    if not 1 <= a.count <= PEEK_MAX:
        raise UsageError(f"--count must be between 1 and {PEEK_MAX}")
    return [Call("GET", _sub(a, f"/position/{i}"), raw=True) for i in range(1, a.count + 1)]


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _sub(a: argparse.Namespace, suffix: str = "") -> str:
    return f"{topic_path(a.topic)}/subscription/{urllib.parse.quote(a.subscription, safe='')}{suffix}"


def _policy_verbs(
    cmd: str, suffix: str, specs: tuple[Spec, ...], body: Callable[[argparse.Namespace], Any], method: str = "POST"
) -> list[Verb]:
    return [
        Verb("namespaces", (f"set-{cmd}",), (NS, *specs),
             lambda a: Call(method, ns_path(a.namespace) + suffix, body(a)), f"set the {cmd} policy"),
        Verb("namespaces", (f"get-{cmd}",), (NS,), lambda a: Call("GET", ns_path(a.namespace) + suffix),
             f"get the {cmd} policy"),
        Verb("namespaces", (f"remove-{cmd}",), (NS,), lambda a: Call("DELETE", ns_path(a.namespace) + suffix),
             f"remove the {cmd} policy"),
    ]


def _subscription_verbs(group: str) -> list[Verb]:
    g = group
    short = g == "subscriptions"  # the subscriptions group also takes the short names
    peek_n: Spec = (("-n", "--count"), {"type": int, "default": 1})
    return [
        Verb(g, ("subscriptions", "list") if g == "subscriptions" else ("subscriptions",), (TOPIC,),
             lambda a: Call("GET", topic_path(a.topic) + "/subscriptions"), "list subscriptions"),
        Verb(g, ("create-subscription", "create") if short else ("create-subscription",),
             (TOPIC, SUB, (("-m", "--messageId"), {"default": "latest"})),
             lambda a: Call("PUT", _sub(a), message_id(a.messageId)), "create a subscription"),
        Verb(g, ("unsubscribe", "delete") if short else ("unsubscribe",), (TOPIC, SUB, FORCE),
             lambda a: Call("DELETE", _sub(a), query=force(a)), "delete a subscription"),
        Verb(g, ("skip",), (TOPIC, SUB, (("-n", "--count"), {"type": int, "required": True})),
             lambda a: Call("POST", _sub(a, f"/skip/{a.count}")), "skip n messages"),
        Verb(g, ("clear-backlog",), (TOPIC, SUB), lambda a: Call("POST", _sub(a, "/skip_all")), "skip everything"),
        Verb(g, ("reset-cursor",), (TOPIC, SUB, (("-t", "--time"), {}), (("-m", "--messageId"), {})), _reset,
             "reset the cursor to a time ago (-t 10m) or to a message id (-m L:E)"),
        Verb(g, ("expire-messages",), (TOPIC, SUB, (("-t", "--expireTime"), {"required": True})),
             lambda a: Call("POST", _sub(a, f"/expireMessages/{amount(a.expireTime, UNITS_S, 'time')}")),
             "expire messages older than the time"),
        Verb(g, ("peek-messages", "peek") if short else ("peek-messages",), (TOPIC, SUB, peek_n), _peek,
             "peek the first unacknowledged messages"),
    ]


def _batch_log_verbs() -> list[Verb]:
    """PIP-160's runtime switch: ``transactions set-tc-batch-log``, ``set-pending-ack-batch-log``, ``get-batch-log``."""
    base = "/admin/v3/transactions/batchedLog"
    specs: tuple[Spec, ...] = (
        (("--enable",), {"required": True, "choices": ["true", "false"], "help": "batch the log's writes"}),
        (("--max-records",), {"type": int, "help": "flush at this many records"}),
        (("--max-size",), {"type": int, "help": "flush at this many bytes"}),
        (("--max-delay-ms",), {"type": int, "help": "flush when the oldest record waited this long"}),
    )

    def body(a: argparse.Namespace) -> dict[str, Any]:
        fields = {"maxRecords": a.max_records, "maxSize": a.max_size, "maxDelayInMillis": a.max_delay_ms}
        return {"enabled": a.enable == "true", **{k: v for k, v in fields.items() if v is not None}}

    return [
        Verb("transactions", ("set-tc-batch-log",), specs,
             lambda a: Call("POST", f"{base}/transactionLog", body(a)),
             "batch the coordinator logs' writes (PIP-160): stored; running logs switch at their next write"),
        Verb("transactions", ("set-pending-ack-batch-log",), specs,
             lambda a: Call("POST", f"{base}/pendingAckLog", body(a)),
             "batch the pending-ack logs' writes (PIP-160): stored; running logs switch at their next write"),
        Verb("transactions", ("get-batch-log",), (), lambda a: Call("GET", base),
             "batching settings and writer counts of both logs"),
    ]


def _offload(a: argparse.Namespace) -> Call:
    """pulsar-admin's rule: keep the newest ``--size-threshold`` bytes, offload the ledgers before them."""
    from magnetar.broker.offload.policy import threshold_message_id

    threshold = amount(a.size_threshold, UNITS_BYTES, "size threshold")
    _, body, _ = request(a.admin_conn, Call("GET", topic_path(a.topic) + "/internalStats"))
    ledgers = [(int(x["ledgerId"]), int(x["size"])) for x in json.loads(body).get("ledgers", [])]
    until = threshold_message_id(ledgers, threshold)
    if until is None:
        raise UsageError(f"Nothing to offload: the topic holds at most {threshold} bytes")
    print(f"Offload triggered for {a.topic} for messages before {until.ledger_id}:{until.entry_id}:-1")
    return Call("PUT", topic_path(a.topic) + "/offload", {"ledgerId": until.ledger_id, "entryId": until.entry_id,
                                                          "partitionIndex": -1})


def _polled(a: argparse.Namespace, suffix: str) -> dict[str, Any]:
    """The topic's offload or compaction status; with ``--wait-complete`` asked again until it is not RUNNING."""
    import time

    for _ in range(OFFLOAD_POLLS_MAX if a.wait_complete else 1):
        _, body, _ = request(a.admin_conn, Call("GET", topic_path(a.topic) + suffix))
        status: dict[str, Any] = json.loads(body)
        if status.get("status") != "RUNNING" or not a.wait_complete:
            break
        time.sleep(OFFLOAD_POLL_S)  # the broker offers no push: pulsar-admin polls too
    return status


def _compaction_status(a: argparse.Namespace) -> list[Call]:
    print(json.dumps(_polled(a, "/compaction"), indent=2))
    return []


def _offload_status(a: argparse.Namespace) -> list[Call]:
    status = _polled(a, "/offload")
    state = status.get("status")
    if status.get("offloadReadError"):
        print(f"Reads from the offload store are failing: {status['offloadReadError']}")
    if state == "SUCCESS":
        first = status.get("firstUnoffloadedMessage", {})
        print(f"Offload was a success\nFirst unoffloaded message: {first.get('ledgerId')}:{first.get('entryId')}")
    elif state == "ERROR":
        raise HttpError(500, f"Error in offload: {status.get('lastError')}")
    elif state == "RUNNING":
        print("Offload still running")
    else:
        print("Offload has not been run for this topic")
    return []


def _coordinator_verbs() -> list[Verb]:
    """pulsar-admin's ``transactions coordinator-stats``, ``coordinator-internal-stats``,
    ``pending-ack-internal-stats``, ``transaction-metadata``, ``slow-transactions``."""
    base = "/admin/v3/transactions"
    tc: Spec = (("-c", "--coordinator-id"), {"type": int, "help": "one coordinator (default: all)"})
    metadata: Spec = (("-m", "--metadata"), {"action": "store_true", "help": "with ledger metadata"})

    def which(a: argparse.Namespace) -> dict[str, str] | None:
        return None if a.coordinator_id is None else {"coordinatorId": str(a.coordinator_id)}

    def pending_ack(a: argparse.Namespace) -> Call:
        path = topic_path(a.topic)
        if not path.startswith("/admin/v2/persistent/"):
            raise UsageError("Pending acks exist on persistent topics only")
        path = path.removeprefix("/admin/v2/persistent/")
        return Call("GET", f"{base}/pendingAckInternalStats/{path}/{urllib.parse.quote(a.subscription, safe='')}",
                    query={"metadata": "true"} if a.metadata else None)

    return [
        Verb("transactions", ("coordinator-stats",), (tc,),
             lambda a: Call("GET", f"{base}/coordinatorStats", query=which(a)), "stats of the coordinators"),
        Verb("transactions", ("coordinator-internal-stats",), (
            (("-c", "--coordinator-id"), {"type": int, "required": True}), metadata),
             lambda a: Call("GET", f"{base}/coordinatorInternalStats/{a.coordinator_id}",
                            query={"metadata": "true"} if a.metadata else None),
             "internal stats of a coordinator's log (its managed ledger)"),
        Verb("transactions", ("pending-ack-internal-stats",), (
            (("-t", "--topic"), {"required": True}), (("-s", "--sub-name"), {"required": True, "dest": "subscription"}),
            metadata),
             pending_ack, "internal stats of a subscription's pending-ack log (its managed ledger)"),
        Verb("transactions", ("transaction-metadata",), (
            (("-m", "--most-sig-bits"), {"type": int, "required": True}),
            (("-l", "--least-sig-bits"), {"type": int, "required": True})),
             lambda a: Call("GET", f"{base}/transactionMetadata/{a.most_sig_bits}/{a.least_sig_bits}"),
             "metadata of one transaction"),
        Verb("transactions", ("slow-transactions",), (
            (("-t", "--time"), {"required": True, "help": "open longer than this (e.g. 30s, 5m)"}), tc),
             lambda a: Call("GET", f"{base}/slowTransactions/{amount(a.time, UNITS_S, 'time') * 1000}",
                            query=which(a)),
             "transactions open longer than --time"),
    ]


def _permission_verbs() -> list[Verb]:
    role: Spec = (("--role",), {"required": True})
    actions: Spec = (("--actions",), {"required": True, "help": "comma-separated: produce,consume,functions,..."})
    sub: Spec = (("--subscription",), {"required": True})
    roles: Spec = (("--roles",), {"required": True, "help": "comma-separated roles"})

    def perms(path: str) -> str:
        return path + "/permissions"

    return [
        Verb("namespaces", ("permissions",), (NS,), lambda a: Call("GET", perms(ns_path(a.namespace))),
             "the namespace's permissions by role"),
        Verb("namespaces", ("grant-permission",), (NS, role, actions),
             lambda a: Call("POST", f"{perms(ns_path(a.namespace))}/{q(a.role)}", split_list(a.actions)),
             "grant actions on the namespace to a role"),
        Verb("namespaces", ("revoke-permission",), (NS, role),
             lambda a: Call("DELETE", f"{perms(ns_path(a.namespace))}/{q(a.role)}"), "revoke a role's permissions"),
        Verb("namespaces", ("permissions-subscription",), (NS,),
             lambda a: Call("GET", perms(ns_path(a.namespace)) + "/subscription"), "roles per restricted subscription"),
        Verb("namespaces", ("grant-subscription-permission",), (NS, sub, roles),
             lambda a: Call("POST", f"{perms(ns_path(a.namespace))}/subscription/{q(a.subscription)}",
                            split_list(a.roles)), "allow roles on a subscription"),
        Verb("namespaces", ("revoke-subscription-permission",), (NS, sub, role),
             lambda a: Call("DELETE", f"{perms(ns_path(a.namespace))}/{q(a.subscription)}/{q(a.role)}"),
             "remove a role from a subscription"),
        Verb("topics", ("permissions",), (TOPIC,), lambda a: Call("GET", perms(topic_path(a.topic))),
             "the topic's permissions (with the namespace's)"),
        Verb("topics", ("grant-permission",), (TOPIC, role, actions),
             lambda a: Call("POST", f"{perms(topic_path(a.topic))}/{q(a.role)}", split_list(a.actions)),
             "grant actions on the topic to a role"),
        Verb("topics", ("revoke-permission",), (TOPIC, role),
             lambda a: Call("DELETE", f"{perms(topic_path(a.topic))}/{q(a.role)}"),
             "revoke a role's topic permissions"),
    ]


def _t(suffix: str, method: str = "GET") -> Build:
    return lambda a: Call(method, topic_path(a.topic) + suffix)


VERBS: list[Verb] = [
    Verb("clusters", ("list",), (), lambda a: Call("GET", "/admin/v2/clusters"), "list clusters"),
    Verb("clusters", ("get",), (NAME,), lambda a: Call("GET", f"/admin/v2/clusters/{a.name}"), "get a cluster"),
    Verb("clusters", ("create",), (NAME, *CLUSTER_URLS), lambda a: _cluster(a, "PUT"), "register a cluster"),
    Verb("clusters", ("update",), (NAME, *CLUSTER_URLS), lambda a: _cluster(a, "POST"), "update a cluster's URLs"),
    Verb("clusters", ("delete",), (NAME,), lambda a: Call("DELETE", f"/admin/v2/clusters/{a.name}"),
         "delete a cluster"),
    Verb("tenants", ("list",), (), lambda a: Call("GET", "/admin/v2/tenants"), "list tenants"),
    Verb("tenants", ("get",), (TENANT,), lambda a: Call("GET", f"/admin/v2/tenants/{a.tenant}"), "get a tenant"),
    Verb("tenants", ("create",), (TENANT, ROLES, CLUSTERS),
         lambda a: Call("PUT", f"/admin/v2/tenants/{a.tenant}", _tenant_body(a)), "create a tenant"),
    Verb("tenants", ("update",), (TENANT, ROLES, CLUSTERS),
         lambda a: Call("POST", f"/admin/v2/tenants/{a.tenant}", _tenant_body(a)), "update a tenant"),
    Verb("tenants", ("delete",), (TENANT, FORCE),
         lambda a: Call("DELETE", f"/admin/v2/tenants/{a.tenant}", query=force(a)), "delete a tenant"),
    Verb("namespaces", ("list",), (TENANT,), lambda a: Call("GET", f"/admin/v2/namespaces/{a.tenant}"),
         "list a tenant's namespaces"),
    Verb("namespaces", ("create",), (NS,), lambda a: Call("PUT", ns_path(a.namespace)), "create a namespace"),
    Verb("namespaces", ("delete",), (NS, FORCE), lambda a: Call("DELETE", ns_path(a.namespace), query=force(a)),
         "delete a namespace"),
    Verb("namespaces", ("policies",), (NS,), lambda a: Call("GET", ns_path(a.namespace)), "get the policies"),
    Verb("namespaces", ("topics",), (NS,), lambda a: Call("GET", ns_path(a.namespace) + "/topics"), "list topics"),
    *_policy_verbs("retention", "/retention", ((("-t", "--time"), {"required": True}),
                                               (("-s", "--size"), {"required": True})), retention_body),
    *_policy_verbs("message-ttl", "/messageTTL", ((("-ttl", "--messageTTL"), {"type": int, "required": True}),),
                   lambda a: a.messageTTL),
    *_policy_verbs("compaction-threshold", "/compactionThreshold",
                   ((("-t", "--threshold"), {"required": True}),),
                   lambda a: amount(a.threshold, UNITS_BYTES, "size"), "PUT"),
    *_policy_verbs("clusters", "/replication", ((("-c", "--clusters"), {"required": True}),),
                   lambda a: split_list(a.clusters)),
    *_policy_verbs("auto-topic-creation", "/autoTopicCreation", (
        (("-e", "--enable"), {"action": "store_true"}), (("-d", "--disable"), {"action": "store_true"}),
        (("-t", "--type"), {"default": "non-partitioned", "choices": ["partitioned", "non-partitioned"]}),
        (("-n", "--num-partitions"), {"type": int, "default": 1})), _auto_topic),
    Verb("namespaces", ("set-offload-threshold",), (NS, (("-s", "--size"), {"required": True})),
         lambda a: Call("PUT", ns_path(a.namespace) + "/offloadThreshold",
                        amount(a.size, UNITS_BYTES, "size")), "bytes kept on local disk before offload (-1 off)"),
    Verb("namespaces", ("get-offload-threshold",), (NS,),
         lambda a: Call("GET", ns_path(a.namespace) + "/offloadThreshold"), "get the offload threshold"),
    Verb("namespaces", ("set-offload-deletion-lag",), (NS, (("-l", "--lag"), {"required": True})),
         lambda a: Call("PUT", ns_path(a.namespace) + "/offloadDeletionLagMs", amount(a.lag, UNITS_MS, "lag")),
         "how long after offload the local copy is deleted (10m, 4h...)"),
    Verb("namespaces", ("get-offload-deletion-lag",), (NS,),
         lambda a: Call("GET", ns_path(a.namespace) + "/offloadDeletionLagMs"), "get the offload deletion lag"),
    Verb("namespaces", ("clear-offload-deletion-lag",), (NS,),
         lambda a: Call("DELETE", ns_path(a.namespace) + "/offloadDeletionLagMs"), "use the broker's default lag"),
    Verb("topics", ("list",), (NS,), lambda a: Call("GET", ns_path(a.namespace).replace("namespaces", "persistent")),
         "list topics"),
    Verb("topics", ("list-partitioned-topics",), (NS,),
         lambda a: Call("GET", ns_path(a.namespace).replace("namespaces", "persistent") + "/partitioned"),
         "list partitioned topics"),
    Verb("topics", ("create",), (TOPIC,), _t("", "PUT"), "create a non-partitioned topic"),
    Verb("topics", ("create-partitioned-topic",), (TOPIC, PARTS),
         lambda a: Call("PUT", topic_path(a.topic) + "/partitions", a.partitions), "create a partitioned topic"),
    Verb("topics", ("update-partitioned-topic",), (TOPIC, PARTS),
         lambda a: Call("POST", topic_path(a.topic) + "/partitions", a.partitions), "increase the partitions"),
    Verb("topics", ("get-partitioned-topic-metadata",), (TOPIC,), _t("/partitions"), "the partition count"),
    Verb("topics", ("delete",), (TOPIC, FORCE), lambda a: Call("DELETE", topic_path(a.topic), query=force(a)),
         "delete a topic"),
    Verb("topics", ("delete-partitioned-topic",), (TOPIC, FORCE),
         lambda a: Call("DELETE", topic_path(a.topic) + "/partitions", query=force(a)), "delete a partitioned topic"),
    Verb("topics", ("stats",), (TOPIC,), _t("/stats"), "topic stats"),
    Verb("topics", ("stats-internal", "internal-stats"), (TOPIC,), _t("/internalStats"), "internal stats"),
    Verb("topics", ("partitioned-stats",), (TOPIC, (("--per-partition",), {"action": "store_true"})),
         lambda a: Call("GET", topic_path(a.topic) + "/partitioned-stats",
                        query={"perPartition": "true"} if a.per_partition else None), "partitioned topic stats"),
    Verb("topics", ("partitioned-stats-internal",), (TOPIC,), _t("/partitioned-internalStats"),
         "partitioned internal stats"),
    Verb("topics", ("last-message-id",), (TOPIC,), _t("/lastMessageId"), "the last message id"),
    Verb("topics", ("unload",), (TOPIC,), _t("/unload", "PUT"), "unload a topic"),
    Verb("topics", ("set-replication-clusters",), (TOPIC, (("-c", "--clusters"), {"required": True})),
         lambda a: Call("POST", topic_path(a.topic) + "/replication", split_list(a.clusters)),
         "set the topic's replication clusters"),
    Verb("topics", ("get-replication-clusters",), (TOPIC,), _t("/replication"), "the topic's replication clusters"),
    Verb("topics", ("remove-replication-clusters",), (TOPIC,), _t("/replication", "DELETE"),
         "remove the topic's replication clusters (the namespace's apply)"),
    Verb("topics", ("terminate",), (TOPIC,), _t("/terminate", "POST"), "terminate a topic"),
    Verb("topics", ("offload",), (TOPIC, (("-s", "--size-threshold"), {"required": True})), _offload,
         "offload the ledgers before the newest --size-threshold bytes (10M, 1G...)"),
    Verb("topics", ("offload-status",), (TOPIC, (("-w", "--wait-complete"), {"action": "store_true"})),
         _offload_status, "status of the last offload"),
    Verb("topics", ("compact",), (TOPIC,),
         lambda a: Call("PUT", topic_path(a.topic) + "/compaction", done=f"Topic compaction requested for {a.topic}"),
         "start compacting a topic"),
    Verb("topics", ("compaction-status",), (TOPIC, (("-w", "--wait-complete"), {"action": "store_true"})),
         _compaction_status, "status of a topic's compaction (-w: wait until it is not running)"),
    Verb("topics", ("set-replicated-subscription-status",),
         (TOPIC, SUB, (("-e", "--enable"), {"action": "store_true"}), (("-d", "--disable"), {"action": "store_true"})),
         lambda a: Call("POST", _sub(a, "/replicatedSubscriptionStatus"), not a.disable and a.enable),
         "turn a subscription's replicated state on (--enable) or off (--disable)"),
    Verb("topics", ("get-replicated-subscription-status",), (TOPIC, SUB),
         lambda a: Call("GET", _sub(a, "/replicatedSubscriptionStatus")), "whether a subscription is replicated"),
    *_subscription_verbs("topics"),
    *_subscription_verbs("subscriptions"),
    *_permission_verbs(),
    *_batch_log_verbs(),
    *_coordinator_verbs(),
    Verb("broker-stats", ("inflight-deletions",), (),
         lambda a: Call("GET", "/admin/v2/broker-stats/inflight-deletions"),
         "estimated ledger deletions in flight (PIP-186)"),
    Verb("topics", ("delete-ledger",), (TOPIC, (("-l", "--ledger-id"), {"type": int, "required": True})),
         lambda a: Call("DELETE", topic_path(a.topic) + f"/ledger/{a.ledger_id}", {}),
         "delete one of the topic's ledgers if the topic no longer uses it (PIP-186)"),
]


