"""Pure parts of geo-replication: names, ClusterData validation, the partitioned sum of replication stats."""

from __future__ import annotations

import pytest

from magnetar.broker.admin.clusters import cluster_data
from magnetar.broker.errors import InvalidRequest
from magnetar.broker.replication.api import (
    ClusterData,
    cursor_name,
    producer_name,
    remote_of_cursor,
    source_of_producer,
)
from magnetar.broker.replication.stats import sum_replication
from magnetar.broker.reserved import is_reserved_cursor


def test_names_round_trip_and_are_reserved() -> None:
    assert cursor_name("b") == "pulsar.repl.b"
    assert remote_of_cursor("pulsar.repl.b") == "b"
    assert remote_of_cursor("sub") is None
    assert is_reserved_cursor(cursor_name("b"))
    name = producer_name("a", "b")
    assert name == "pulsar.repl.a-->b"
    assert source_of_producer(name) == "a"
    assert source_of_producer("a-0-1") is None
    assert source_of_producer("pulsar.repl.") is None


def test_cluster_data_keeps_known_fields_and_checks_url_schemes() -> None:
    body = {"serviceUrl": "http://h:8080", "brokerServiceUrl": "pulsar://h:6650", "brokerServiceUrlTls": "",
            "unknown": "x", "brokerClientTlsEnabled": True}
    assert cluster_data(body) == {"serviceUrl": "http://h:8080", "brokerServiceUrl": "pulsar://h:6650",
                                  "brokerClientTlsEnabled": True}
    with pytest.raises(InvalidRequest):
        cluster_data({"brokerServiceUrl": "http://h:6650"})
    with pytest.raises(InvalidRequest):
        cluster_data({"serviceUrl": 5})
    data = ClusterData.from_json("b", {"brokerServiceUrl": "pulsar://h:1", "serviceUrl": None})
    assert (data.name, data.broker_service_url, data.service_url) == ("b", "pulsar://h:1", "")


def test_partitions_sum_rates_and_backlog_connected_only_if_all_are() -> None:
    def part(backlog: int, connected: bool, delay: int) -> dict[str, dict[str, object]]:
        return {"b": {"msgRateIn": 1.0, "msgThroughputIn": 10.0, "msgRateOut": 2.0, "msgThroughputOut": 20.0,
                      "msgRateExpired": 0.0, "replicationBacklog": backlog, "connected": connected,
                      "replicationDelayInSeconds": delay}}

    total = sum_replication([part(3, True, 1), part(4, False, 7), part(0, True, 2)])
    assert total["b"]["replicationBacklog"] == 7
    assert total["b"]["msgRateOut"] == 6.0
    assert total["b"]["connected"] is False
    assert total["b"]["replicationDelayInSeconds"] == 7
