"""Each new ``magnetar admin`` verb builds the request pulsar-admin would send (method, path, body, query);
the integration tests run a few of them end to end."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from magnetar.cli.admin import add_admin_parser
from magnetar.cli.admin.base import Call
from magnetar.cli.admin.messages import format_message, hex_dump
from magnetar.protocol import pb
from magnetar.protocol.batch import build_batch

T = "persistent://public/default/t"
TP = "/admin/v2/persistent/public/default/t"
NSP = "/admin/v2/namespaces/public/default"


def built(*argv: str) -> Any:
    parser = argparse.ArgumentParser()
    add_admin_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["admin", *argv])
    return args.admin_build(args)


@pytest.mark.parametrize(("argv", "expected"), [
    (("namespaces", "set-deduplication", "public/default", "--enable"), Call("POST", NSP + "/deduplication", True)),
    (("namespaces", "get-deduplication", "public/default"), Call("GET", NSP + "/deduplication")),
    (("namespaces", "remove-deduplication", "public/default"), Call("DELETE", NSP + "/deduplication")),
    (("namespaces", "set-backlog-quota", "public/default", "-l", "10M", "-p", "producer_exception"),
     Call("POST", NSP + "/backlogQuota", {"limitSize": 10 * 1024**2, "limitTime": -1, "policy": "producer_exception"},
          query={"backlogQuotaType": "destination_storage"})),
    (("namespaces", "get-backlog-quotas", "public/default"), Call("GET", NSP + "/backlogQuotaMap")),
    (("namespaces", "remove-backlog-quota", "public/default"), Call("DELETE", NSP + "/backlogQuota")),
    (("namespaces", "unload", "public/default"), Call("PUT", NSP + "/unload")),
    (("topics", "set-deduplication", T, "--disable"), Call("POST", TP + "/deduplicationEnabled", False)),
    (("topics", "set-retention", T, "-t", "1h", "-s", "1G"),
     Call("POST", TP + "/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024})),
    (("topics", "get-retention", T), Call("GET", TP + "/retention")),
    (("topics", "set-message-ttl", T, "-t", "30"), Call("POST", TP + "/messageTTL", query={"messageTTL": "30"})),
    (("topics", "remove-message-ttl", T), Call("DELETE", TP + "/messageTTL")),
    (("topics", "set-backlog-quota", T, "-l", "1K", "-lt", "1h", "-p", "producer_request_hold"),
     Call("POST", TP + "/backlogQuota", {"limitSize": 1024, "limitTime": 3600, "policy": "producer_request_hold"},
          query={"backlogQuotaType": "destination_storage"})),
    (("topics", "examine-message", T, "-i", "earliest", "-m", "3"),
     Call("GET", TP + "/examinemessage", raw=True, query={"initialPosition": "earliest", "messagePosition": "3"})),
    (("topics", "get-message-by-id", T, "-l", "5", "-e", "7"), Call("GET", TP + "/ledger/5/entry/7", raw=True)),
    (("topics", "lookup", T), Call("GET", "/lookup/v2/topic/persistent/public/default/t")),
    (("brokers", "list", "standalone"), Call("GET", "/admin/v2/brokers/standalone")),
    (("brokers", "leader-broker"), Call("GET", "/admin/v2/brokers/leaderBroker")),
    (("broker-stats", "load-report"), Call("GET", "/admin/v2/broker-stats/load-report")),
    (("broker-stats", "monitoring-metrics"), Call("GET", "/admin/v2/broker-stats/metrics")),
    (("schemas", "get", T, "-v", "2"), Call("GET", "/admin/v2/schemas/public/default/t/schema/2")),
    (("namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "full"),
     Call("PUT", NSP + "/schemaCompatibilityStrategy", "FULL")),
])
def test_verb_builds_pulsars_request(argv: tuple[str, ...], expected: Call) -> None:
    assert built(*argv) == expected


def test_hex_dump_and_message_printing() -> None:
    dump = hex_dump(b"hello\x00\xff" * 3)
    assert "|00000000| 68 65 6c 6c 6f 00 ff 68 65 6c 6c 6f 00 ff 68 65 |hello..hello..he|" in dump
    assert "|00000010| 6c 6c 6f 00 ff" in dump
    text = format_message({"X-Pulsar-Message-ID": "3:4", "X-Pulsar-PROPERTY-k": "v", "X-Pulsar-Key": "key"}, b"ab")
    assert text.startswith("Message ID: 3:4") and '"k": "v"' in text and "Key: key" in text
    singles = [(pb.SingleMessageMetadata(payload_size=2, partition_key=f"k{i}"), f"m{i}".encode()) for i in range(2)]
    batch = format_message({"X-Pulsar-Message-ID": "3:5", "X-Pulsar-num-batch-message": "2"}, build_batch(singles))
    assert "Batch Message ID: 3:5:0" in batch and "Batch Message ID: 3:5:1" in batch and "Key: k1" in batch
