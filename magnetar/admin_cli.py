"""``magnetar admin ...``: the common ``pulsar-admin`` verbs, over the admin HTTP API at ``--admin-url``.

Groups and verbs keep pulsar-admin's names and flags (``topics create-partitioned-topic -p 4 NAME``,
``namespaces set-retention --time 1h --size 1G NS``...). Lists print one item a line and objects as indented
JSON, as pulsar-admin does. Exit codes: 0 done, 1 refused by the broker or unreachable, 2 bad usage.
Plain ``urllib``: no client library, one request per verb.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from magnetar.admin_conn import AdminConnection, ConnectionSettingsError, add_connection_options, connection_from_args
from magnetar.admin_messages import format_message
from magnetar.audit_cli import add_audit_parser
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import NamespaceName, TopicName

TIMEOUT_S = 30.0
RESPONSE_BYTES_MAX = 64 * 1024 * 1024
_UNITS_MIN = {"m": 1, "h": 60, "d": 1440, "w": 10080, "y": 525600}
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNITS_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
_UNITS_BYTES = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
#: offload-status --wait polls this often, at most this many times
OFFLOAD_POLL_S = 1.0
OFFLOAD_POLLS_MAX = 3600


class UsageError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    body: Any = None
    query: dict[str, str] | None = None
    raw: bool = False  # the answer is bytes (peek), not JSON


@dataclass(frozen=True, slots=True)
class HttpError(Exception):
    status: int
    reason: str


def _request(conn: AdminConnection, call: Call) -> tuple[int, bytes, dict[str, str]]:
    url = conn.url.rstrip("/") + call.path
    if call.query:
        url += "?" + urllib.parse.urlencode(call.query)
    data = json.dumps(call.body).encode() if call.body is not None else None
    req = urllib.request.Request(url, data=data, method=call.method, headers=conn.headers)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=conn.context) as resp:
            return resp.status, resp.read(RESPONSE_BYTES_MAX), dict(resp.headers.items())
    except urllib.error.HTTPError as exc:
        body = exc.read(RESPONSE_BYTES_MAX)
        try:
            reason = str(json.loads(body).get("reason", body.decode(errors="replace")))
        except (ValueError, AttributeError):
            reason = body.decode(errors="replace") or exc.reason
        raise HttpError(exc.code, reason) from None


# ---- names and values --------------------------------------------------------------------------------


def topic_path(name: str) -> str:
    try:
        t = TopicName.parse(name)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
    return f"/admin/v2/{t.domain}/{t.tenant}/{t.namespace}/{urllib.parse.quote(t.local_name, safe='')}"


def ns_path(name: str) -> str:
    try:
        ns = NamespaceName.parse(name)
    except BrokerError as exc:
        raise UsageError(str(exc)) from exc
    return f"/admin/v2/namespaces/{ns.tenant}/{ns.namespace}"


def _amount(text: str, units: Mapping[str, float], what: str) -> int:
    match = re.fullmatch(r"(-?\d+)([A-Za-z]?)", text.strip())
    if match is None or (match.group(2) and match.group(2).lower() not in units):
        raise UsageError(f"Invalid {what}: {text!r}")
    value = int(match.group(1))
    if value < 0:
        return -1
    factor = units[match.group(2).lower()] if match.group(2) else next(iter(units.values()))
    return int(value * factor)


def message_id(text: str) -> dict[str, int]:
    if text == "latest":
        return {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1, "partitionIndex": -1}
    if text == "earliest":
        return {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
    match = re.fullmatch(r"(-?\d+):(-?\d+)(?::(-?\d+))?", text)
    if match is None:
        raise UsageError(f"Invalid message id {text!r}: use latest, earliest or ledgerId:entryId")
    return {"ledgerId": int(match.group(1)), "entryId": int(match.group(2)),
            "partitionIndex": int(match.group(3) or -1)}


def _force(args: argparse.Namespace) -> dict[str, str]:
    return {"force": "true"} if args.force else {}


# ---- verbs: each builds one Call from its arguments ----------------------------------------------------

Spec = tuple[tuple[str, ...], dict[str, Any]]
Build = Callable[[argparse.Namespace], "Call | list[Call]"]
PEEK_MAX = 1000


@dataclass(frozen=True, slots=True)
class Verb:
    group: str
    names: tuple[str, ...]
    specs: tuple[Spec, ...]
    build: Build
    help: str


NAME: Spec = (("name",), {})
TOPIC: Spec = (("topic",), {"help": "topic name: persistent://tenant/ns/t, tenant/ns/t or t"})
NS: Spec = (("namespace",), {"help": "tenant/namespace"})
TENANT: Spec = (("tenant",), {})
FORCE: Spec = (("-f", "--force"), {"action": "store_true"})
SUB: Spec = (("-s", "--subscription"), {"required": True})
PARTS: Spec = (("-p", "--partitions"), {"type": int, "required": True})
ROLES: Spec = (("-r", "--admin-roles"), {"default": ""})
CLUSTERS: Spec = (("-c", "--allowed-clusters"), {"default": ""})


def _split(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _tenant_body(a: argparse.Namespace) -> dict[str, list[str]]:
    return {"adminRoles": _split(a.admin_roles), "allowedClusters": _split(a.allowed_clusters) or ["standalone"]}


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


def _retention(a: argparse.Namespace) -> dict[str, int]:
    return {"retentionTimeInMinutes": _amount(a.time, _UNITS_MIN, "retention time"),
            "retentionSizeInMB": _amount(a.size, _UNITS_MB, "retention size")}


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
    return Call("POST", f"{base}/{max(0, _now_ms() - _amount(a.time, _UNITS_S, 'time') * 1000)}")


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
             lambda a: Call("DELETE", _sub(a), query=_force(a)), "delete a subscription"),
        Verb(g, ("skip",), (TOPIC, SUB, (("-n", "--count"), {"type": int, "required": True})),
             lambda a: Call("POST", _sub(a, f"/skip/{a.count}")), "skip n messages"),
        Verb(g, ("clear-backlog",), (TOPIC, SUB), lambda a: Call("POST", _sub(a, "/skip_all")), "skip everything"),
        Verb(g, ("reset-cursor",), (TOPIC, SUB, (("-t", "--time"), {}), (("-m", "--messageId"), {})), _reset,
             "reset the cursor to a time ago (-t 10m) or to a message id (-m L:E)"),
        Verb(g, ("expire-messages",), (TOPIC, SUB, (("-t", "--expireTime"), {"required": True})),
             lambda a: Call("POST", _sub(a, f"/expireMessages/{_amount(a.expireTime, _UNITS_S, 'time')}")),
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
             "batch the coordinator log's writes (PIP-160); new coordinator logs use it"),
        Verb("transactions", ("set-pending-ack-batch-log",), specs,
             lambda a: Call("POST", f"{base}/pendingAckLog", body(a)),
             "batch the pending-ack logs' writes (PIP-160); new stores use it"),
        Verb("transactions", ("get-batch-log",), (), lambda a: Call("GET", base),
             "batching settings and writer counts of both logs"),
    ]


def _offload(a: argparse.Namespace) -> Call:
    """pulsar-admin's rule: keep the newest ``--size-threshold`` bytes, offload the ledgers before them."""
    from magnetar.broker.offload.policy import threshold_message_id

    threshold = _amount(a.size_threshold, _UNITS_BYTES, "size threshold")
    _, body, _ = _request(a.admin_conn, Call("GET", topic_path(a.topic) + "/internalStats"))
    ledgers = [(int(x["ledgerId"]), int(x["size"])) for x in json.loads(body).get("ledgers", [])]
    until = threshold_message_id(ledgers, threshold)
    if until is None:
        raise UsageError(f"Nothing to offload: the topic holds at most {threshold} bytes")
    print(f"Offload triggered for {a.topic} for messages before {until.ledger_id}:{until.entry_id}:-1")
    return Call("PUT", topic_path(a.topic) + "/offload", {"ledgerId": until.ledger_id, "entryId": until.entry_id,
                                                          "partitionIndex": -1})


def _offload_status(a: argparse.Namespace) -> list[Call]:
    import time

    for _ in range(OFFLOAD_POLLS_MAX if a.wait_complete else 1):
        _, body, _ = _request(a.admin_conn, Call("GET", topic_path(a.topic) + "/offload"))
        status = json.loads(body)
        if status.get("status") != "RUNNING" or not a.wait_complete:
            break
        time.sleep(OFFLOAD_POLL_S)  # the broker offers no push: pulsar-admin polls too
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
    """pulsar-admin's ``transactions coordinator-stats``, ``transaction-metadata``, ``slow-transactions``."""
    base = "/admin/v3/transactions"
    tc: Spec = (("-c", "--coordinator-id"), {"type": int, "help": "one coordinator (default: all)"})

    def which(a: argparse.Namespace) -> dict[str, str] | None:
        return None if a.coordinator_id is None else {"coordinatorId": str(a.coordinator_id)}

    return [
        Verb("transactions", ("coordinator-stats",), (tc,),
             lambda a: Call("GET", f"{base}/coordinatorStats", query=which(a)), "stats of the coordinators"),
        Verb("transactions", ("transaction-metadata",), (
            (("-m", "--most-sig-bits"), {"type": int, "required": True}),
            (("-l", "--least-sig-bits"), {"type": int, "required": True})),
             lambda a: Call("GET", f"{base}/transactionMetadata/{a.most_sig_bits}/{a.least_sig_bits}"),
             "metadata of one transaction"),
        Verb("transactions", ("slow-transactions",), (
            (("-t", "--time"), {"required": True, "help": "open longer than this (e.g. 30s, 5m)"}), tc),
             lambda a: Call("GET", f"{base}/slowTransactions/{_amount(a.time, _UNITS_S, 'time') * 1000}",
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
             lambda a: Call("POST", f"{perms(ns_path(a.namespace))}/{_q(a.role)}", _split(a.actions)),
             "grant actions on the namespace to a role"),
        Verb("namespaces", ("revoke-permission",), (NS, role),
             lambda a: Call("DELETE", f"{perms(ns_path(a.namespace))}/{_q(a.role)}"), "revoke a role's permissions"),
        Verb("namespaces", ("permissions-subscription",), (NS,),
             lambda a: Call("GET", perms(ns_path(a.namespace)) + "/subscription"), "roles per restricted subscription"),
        Verb("namespaces", ("grant-subscription-permission",), (NS, sub, roles),
             lambda a: Call("POST", f"{perms(ns_path(a.namespace))}/subscription/{_q(a.subscription)}",
                            _split(a.roles)), "allow roles on a subscription"),
        Verb("namespaces", ("revoke-subscription-permission",), (NS, sub, role),
             lambda a: Call("DELETE", f"{perms(ns_path(a.namespace))}/{_q(a.subscription)}/{_q(a.role)}"),
             "remove a role from a subscription"),
        Verb("topics", ("permissions",), (TOPIC,), lambda a: Call("GET", perms(topic_path(a.topic))),
             "the topic's permissions (with the namespace's)"),
        Verb("topics", ("grant-permission",), (TOPIC, role, actions),
             lambda a: Call("POST", f"{perms(topic_path(a.topic))}/{_q(a.role)}", _split(a.actions)),
             "grant actions on the topic to a role"),
        Verb("topics", ("revoke-permission",), (TOPIC, role),
             lambda a: Call("DELETE", f"{perms(topic_path(a.topic))}/{_q(a.role)}"),
             "revoke a role's topic permissions"),
    ]


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


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
         lambda a: Call("DELETE", f"/admin/v2/tenants/{a.tenant}", query=_force(a)), "delete a tenant"),
    Verb("namespaces", ("list",), (TENANT,), lambda a: Call("GET", f"/admin/v2/namespaces/{a.tenant}"),
         "list a tenant's namespaces"),
    Verb("namespaces", ("create",), (NS,), lambda a: Call("PUT", ns_path(a.namespace)), "create a namespace"),
    Verb("namespaces", ("delete",), (NS, FORCE), lambda a: Call("DELETE", ns_path(a.namespace), query=_force(a)),
         "delete a namespace"),
    Verb("namespaces", ("policies",), (NS,), lambda a: Call("GET", ns_path(a.namespace)), "get the policies"),
    Verb("namespaces", ("topics",), (NS,), lambda a: Call("GET", ns_path(a.namespace) + "/topics"), "list topics"),
    *_policy_verbs("retention", "/retention", ((("-t", "--time"), {"required": True}),
                                               (("-s", "--size"), {"required": True})), _retention),
    *_policy_verbs("message-ttl", "/messageTTL", ((("-ttl", "--messageTTL"), {"type": int, "required": True}),),
                   lambda a: a.messageTTL),
    *_policy_verbs("compaction-threshold", "/compactionThreshold",
                   ((("-t", "--threshold"), {"required": True}),),
                   lambda a: _amount(a.threshold, _UNITS_BYTES, "size"), "PUT"),
    *_policy_verbs("clusters", "/replication", ((("-c", "--clusters"), {"required": True}),),
                   lambda a: _split(a.clusters)),
    *_policy_verbs("auto-topic-creation", "/autoTopicCreation", (
        (("-e", "--enable"), {"action": "store_true"}), (("-d", "--disable"), {"action": "store_true"}),
        (("-t", "--type"), {"default": "non-partitioned", "choices": ["partitioned", "non-partitioned"]}),
        (("-n", "--num-partitions"), {"type": int, "default": 1})), _auto_topic),
    Verb("namespaces", ("set-offload-threshold",), (NS, (("-s", "--size"), {"required": True})),
         lambda a: Call("PUT", ns_path(a.namespace) + "/offloadThreshold",
                        _amount(a.size, _UNITS_BYTES, "size")), "bytes kept on local disk before offload (-1 off)"),
    Verb("namespaces", ("get-offload-threshold",), (NS,),
         lambda a: Call("GET", ns_path(a.namespace) + "/offloadThreshold"), "get the offload threshold"),
    Verb("namespaces", ("set-offload-deletion-lag",), (NS, (("-l", "--lag"), {"required": True})),
         lambda a: Call("PUT", ns_path(a.namespace) + "/offloadDeletionLagMs", _amount(a.lag, _UNITS_MS, "lag")),
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
    Verb("topics", ("delete",), (TOPIC, FORCE), lambda a: Call("DELETE", topic_path(a.topic), query=_force(a)),
         "delete a topic"),
    Verb("topics", ("delete-partitioned-topic",), (TOPIC, FORCE),
         lambda a: Call("DELETE", topic_path(a.topic) + "/partitions", query=_force(a)), "delete a partitioned topic"),
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
         lambda a: Call("POST", topic_path(a.topic) + "/replication", _split(a.clusters)),
         "set the topic's replication clusters"),
    Verb("topics", ("get-replication-clusters",), (TOPIC,), _t("/replication"), "the topic's replication clusters"),
    Verb("topics", ("remove-replication-clusters",), (TOPIC,), _t("/replication", "DELETE"),
         "remove the topic's replication clusters (the namespace's apply)"),
    Verb("topics", ("terminate",), (TOPIC,), _t("/terminate", "POST"), "terminate a topic"),
    Verb("topics", ("offload",), (TOPIC, (("-s", "--size-threshold"), {"required": True})), _offload,
         "offload the ledgers before the newest --size-threshold bytes (10M, 1G...)"),
    Verb("topics", ("offload-status",), (TOPIC, (("-w", "--wait-complete"), {"action": "store_true"})),
         _offload_status, "status of the last offload"),
    Verb("topics", ("compact",), (TOPIC,), _t("/compaction", "PUT"), "start compacting a topic"),
    Verb("topics", ("compaction-status",), (TOPIC,), _t("/compaction"), "status of a topic's compaction"),
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


# ---- parser and runner -------------------------------------------------------------------------------


def add_admin_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``admin`` with its groups and verbs to the ``magnetar`` parser."""
    admin = verbs.add_parser("admin", help="manage a broker like pulsar-admin")
    add_connection_options(admin)
    groups = admin.add_subparsers(dest="group", required=True)
    parsers: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    from magnetar.admin_policies import policy_verbs  # these build on this module's Verb and Call
    from magnetar.admin_schemas import schema_verbs

    for v in [*VERBS, *schema_verbs(), *policy_verbs()]:
        if v.group not in parsers:
            parsers[v.group] = groups.add_parser(v.group).add_subparsers(dest="admin_verb", required=True)
        p = parsers[v.group].add_parser(v.names[0], aliases=list(v.names[1:]), help=v.help)
        for flags, options in v.specs:
            p.add_argument(*flags, **options)
        p.set_defaults(admin_build=v.build)
    add_audit_parser(groups)


def _print(status: int, body: bytes, headers: dict[str, str], raw: bool) -> None:
    if raw:
        print(format_message(headers, body))
        return
    if status == 204 or not body.strip():
        return
    try:
        value = json.loads(body)
    except ValueError:
        print(body.decode(errors="replace"))
        return
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        for item in value:
            print(item)
    else:
        print(json.dumps(value, indent=2))


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb; 0 done, 1 refused or unreachable, 2 bad usage."""
    if getattr(args, "audit_run", None) is not None:
        code = int(args.audit_run(args))
        if code >= 0:
            return code
        fix = {"fix": "true"} if args.fix else None
        args.admin_build = lambda a: Call("POST" if fix else "GET", "/admin/v2/broker-stats/ledger-audit", query=fix)
    conn = AdminConnection()
    try:
        conn = args.admin_conn = connection_from_args(args)  # verbs that first read something use it too
        built = args.admin_build(args)
        for number, call in enumerate(built if isinstance(built, list) else [built]):
            try:
                status, body, headers = _request(conn, call)
            except HttpError as exc:
                if call.raw and number > 0 and exc.status == 404:
                    break  # peek -n N: print what exists, as pulsar-admin does, when fewer are there
                raise
            _print(status, body, headers, call.raw)
    except (UsageError, ConnectionSettingsError) as exc:
        print(f"magnetar admin: {exc}", file=sys.stderr)
        return 2
    except HttpError as exc:
        print(f"{exc.reason}\n\nReason: HTTP {exc.status} {exc.reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"magnetar admin: cannot reach {conn.url}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="magnetar")
    add_admin_parser(parser.add_subparsers(dest="verb", required=True))
    return run_admin(parser.parse_args(["admin", *(argv or [])]))
