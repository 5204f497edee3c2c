"""``magnetar admin`` verbs for deduplication and backlog-quota policies (namespace and topic), topic-level
retention and TTL, namespace unload, reading one message, lookup, and the broker endpoints (dynamic configuration
included) — pulsar-admin's names and flags."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from magnetar.cli.admin.base import (
    NS,
    TOPIC,
    UNITS_BYTES,
    UNITS_S,
    Call,
    Spec,
    UsageError,
    Verb,
    amount,
    ns_path,
    retention_body,
    split_list,
    topic_path,
)

ENABLE: tuple[Spec, ...] = ((("-e", "--enable"), {"action": "store_true"}),
                            (("-d", "--disable"), {"action": "store_true"}))
QUOTA: tuple[Spec, ...] = (
    (("-l", "--limit"), {"default": "-1", "help": "backlog size limit, e.g. 10M, 2G (-1: none)"}),
    (("-lt", "--limitTime"), {"default": "-1", "help": "backlog age limit, e.g. 30m (-1: none)"}),
    (("-p", "--policy"), {"required": True, "help": "producer_request_hold, producer_exception or "
                                                    "consumer_backlog_eviction"}),
    (("-t", "--type"), {"default": "destination_storage", "choices": ["destination_storage", "message_age"]}),
)
CONFIG = "/admin/v2/brokers/configuration"
CONFIG_NAME: Spec = (("--config",), {"required": True, "help": "the key, e.g. transactionLogBatchedWriteEnabled"})
RETENTION: tuple[Spec, ...] = ((("-t", "--time"), {"required": True}), (("-s", "--size"), {"required": True}))


def _switch(a: argparse.Namespace) -> bool:
    if a.enable == a.disable:
        raise UsageError("give exactly one of --enable or --disable")
    return bool(a.enable)


def _quota(a: argparse.Namespace) -> dict[str, Any]:
    return {"limitSize": amount(a.limit, UNITS_BYTES, "limit"),
            "limitTime": amount(a.limitTime, UNITS_S, "limitTime"), "policy": a.policy.lower()}


def _level_verbs(group: str, spec: Spec, path: Any) -> list[Verb]:
    """set/get/remove-deduplication and the backlog-quota verbs, for namespaces or topics."""
    dedup = "/deduplication" if group == "namespaces" else "/deduplicationEnabled"
    return [
        Verb(group, ("set-deduplication",), (spec, *ENABLE), lambda a: Call("POST", path(a) + dedup, _switch(a)),
             "enable or disable deduplication"),
        Verb(group, ("get-deduplication",), (spec,), lambda a: Call("GET", path(a) + dedup), "get deduplication"),
        Verb(group, ("remove-deduplication",), (spec,), lambda a: Call("DELETE", path(a) + dedup),
             "remove the deduplication policy"),
        Verb(group, ("set-backlog-quota",), (spec, *QUOTA),
             lambda a: Call("POST", path(a) + "/backlogQuota", _quota(a), query={"backlogQuotaType": a.type}),
             "set the backlog quota"),
        Verb(group, ("get-backlog-quotas",), (spec,), lambda a: Call("GET", path(a) + "/backlogQuotaMap"),
             "get the backlog quotas"),
        Verb(group, ("remove-backlog-quota",), (spec,), lambda a: Call("DELETE", path(a) + "/backlogQuota"),
             "remove the backlog quota"),
    ]


def _lookup(a: argparse.Namespace) -> Call:
    return Call("GET", topic_path(a.topic).replace("/admin/v2/", "/lookup/v2/topic/", 1))


BUNDLE_OPTION: Spec = (("-b", "--bundle"), {"default": "", "help": "one bundle, 0xLOWER_0xUPPER"})


def _unload(a: argparse.Namespace) -> Call:
    if not a.bundle:
        return Call("PUT", ns_path(a.namespace) + "/unload")
    query = {"destinationBroker": a.destinationBroker} if a.destinationBroker else None
    return Call("PUT", f"{ns_path(a.namespace)}/{a.bundle}/unload", query=query)


def _split(a: argparse.Namespace) -> Call:
    query = {"unload": "true" if a.unload else "false"}
    if a.split_algorithm_name:
        query["splitAlgorithmName"] = a.split_algorithm_name
    body = split_list(a.split_boundaries) or None
    return Call("PUT", f"{ns_path(a.namespace)}/{a.bundle}/split", body=body, query=query)


def _bundle_range(a: argparse.Namespace) -> Call:
    return Call("GET", topic_path(a.topic).replace("/admin/v2/", "/lookup/v2/topic/", 1) + "/bundle")  # text


def policy_verbs() -> list[Verb]:
    def ns(a: argparse.Namespace) -> str:
        return ns_path(a.namespace)

    def tp(a: argparse.Namespace) -> str:
        return topic_path(a.topic)

    return [
        *_level_verbs("namespaces", NS, ns),
        *_level_verbs("topics", TOPIC, tp),
        Verb("namespaces", ("unload",), (NS, BUNDLE_OPTION, (("-d", "--destinationBroker"), {"default": ""})),
             _unload, "unload the namespace, or one bundle (a cluster moves it to another broker)"),
        Verb("namespaces", ("bundles",), (NS,), lambda a: Call("GET", ns(a) + "/bundles"),
             "the namespace's bundles (boundaries)"),
        Verb("namespaces", ("split-bundle",), (
            NS, (("-b", "--bundle"), {"required": True, "help": "0xLOWER_0xUPPER"}),
            (("-u", "--unload"), {"action": "store_true", "help": "unload the pieces after the split"}),
            (("-san", "--split-algorithm-name"), {"default": "", "help": "range_equally_divide (default), "
                                                  "topic_count_equally_divide, specified_positions_divide"}),
            (("--split-boundaries",), {"default": "", "help": "positions for specified_positions_divide"})),
            _split, "split a bundle"),
        Verb("topics", ("bundle-range",), (TOPIC,), _bundle_range, "the namespace bundle the topic belongs to"),
        Verb("brokers", ("namespaces",), ((("cluster",), {}), (("--url",), {"required": True,
                                                                             "help": "the broker, host:port"})),
             lambda a: Call("GET", f"/admin/v2/brokers/{a.cluster}/{a.url}/ownedNamespaces"),
             "the bundles a broker owns"),
        Verb("topics", ("set-retention",), (TOPIC, *RETENTION), lambda a: Call("POST", tp(a) + "/retention",
                                                                             retention_body(a)), "set retention"),
        Verb("topics", ("get-retention",), (TOPIC,), lambda a: Call("GET", tp(a) + "/retention"), "get retention"),
        Verb("topics", ("remove-retention",), (TOPIC,), lambda a: Call("DELETE", tp(a) + "/retention"),
             "remove retention"),
        Verb("topics", ("set-message-ttl",), (TOPIC, (("-t", "--ttl"), {"type": int, "required": True})),
             lambda a: Call("POST", tp(a) + "/messageTTL", query={"messageTTL": str(a.ttl)}), "set the TTL (s)"),
        Verb("topics", ("get-message-ttl",), (TOPIC,), lambda a: Call("GET", tp(a) + "/messageTTL"), "get the TTL"),
        Verb("topics", ("remove-message-ttl",), (TOPIC,), lambda a: Call("DELETE", tp(a) + "/messageTTL"),
             "remove the TTL"),
        Verb("topics", ("examine-message",), (TOPIC, (("-i", "--initialPosition"), {"default": "latest",
                                                                                  "choices": ["latest", "earliest"]}),
                                              (("-m", "--messagePosition"), {"type": int, "default": 1})),
             lambda a: Call("GET", tp(a) + "/examinemessage", raw=True,
                            query={"initialPosition": a.initialPosition, "messagePosition": str(a.messagePosition)}),
             "print the nth message from the earliest or latest"),
        Verb("topics", ("get-message-by-id",), (TOPIC, (("-l", "--ledgerId"), {"type": int, "required": True}),
                                                (("-e", "--entryId"), {"type": int, "required": True})),
             lambda a: Call("GET", tp(a) + f"/ledger/{a.ledgerId}/entry/{a.entryId}", raw=True),
             "print a message by its id"),
        Verb("topics", ("lookup",), (TOPIC,), _lookup, "the broker serving the topic"),
        Verb("brokers", ("list",), ((("cluster",), {}),), lambda a: Call("GET", f"/admin/v2/brokers/{a.cluster}"),
             "the cluster's active brokers"),
        Verb("brokers", ("leader-broker",), (), lambda a: Call("GET", "/admin/v2/brokers/leaderBroker"),
             "the leader broker"),
        Verb("brokers", ("version",), (), lambda a: Call("GET", "/admin/v2/brokers/version"),
             "this broker's version"),
        Verb("brokers", ("healthcheck",), (), lambda a: Call("GET", "/admin/v2/brokers/health"), "health check"),
        Verb("brokers", ("list-dynamic-config",), (), lambda a: Call("GET", CONFIG),
             "the configuration keys that can change at runtime"),
        Verb("brokers", ("get-all-dynamic-config",), (), lambda a: Call("GET", CONFIG + "/values"),
             "the dynamic configuration as stored (it wins over broker.conf)"),
        Verb("brokers", ("update-dynamic-config",), (CONFIG_NAME, (("--value",), {"required": True})),
             lambda a: Call("POST", f"{CONFIG}/{quote(a.config, safe='')}/{quote(a.value, safe='')}"),
             "store a dynamic configuration value: applied at once and at every start"),
        Verb("brokers", ("delete-dynamic-config",), (CONFIG_NAME,),
             lambda a: Call("DELETE", f"{CONFIG}/{quote(a.config, safe='')}"),
             "remove a stored dynamic configuration value: broker.conf's applies again"),
        Verb("broker-stats", ("load-report",), (), lambda a: Call("GET", "/admin/v2/broker-stats/load-report"),
             "this broker's load report"),
        Verb("broker-stats", ("monitoring-metrics",), (), lambda a: Call("GET", "/admin/v2/broker-stats/metrics"),
             "broker metrics per namespace"),
        Verb("broker-stats", ("topics",), (), lambda a: Call("GET", "/admin/v2/broker-stats/topics"),
             "stats of every loaded topic"),
    ]
