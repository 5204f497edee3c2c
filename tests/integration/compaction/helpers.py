"""Compaction helpers for the integration tests: trigger through the admin API and wait on the broker's log."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pulsar

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess

COMPACTION_TIMEOUT_S = 60.0
RECEIVE_TIMEOUT_MS = 5000


def topic_path(topic: str) -> str:
    tenant, namespace, local = topic.removeprefix("persistent://").split("/", 2)
    return f"/admin/v2/persistent/{tenant}/{namespace}/{urllib.parse.quote(local, safe='')}"


def finished(log: str, topic: str) -> int:
    return log.count(f"{topic}: compacted ") + log.count(f"{topic}: compaction failed")


def compact(broker: BrokerProcess, topic: str) -> None:
    """Compact ``topic`` through ``PUT .../compaction`` and wait (on the log) until it succeeded."""
    before = finished(broker.log_text(), topic)
    status, body = call(broker.web_url, "PUT", topic_path(topic) + "/compaction")
    assert status == 204, body
    assert broker.wait_for(lambda log: finished(log, topic) > before, COMPACTION_TIMEOUT_S)
    assert compaction_status(broker, topic) == {"status": "SUCCESS", "lastError": ""}


def compaction_status(broker: BrokerProcess, topic: str) -> Any:
    status, body = call(broker.web_url, "GET", topic_path(topic) + "/compaction")
    assert status == 200, body
    return body


def read_all(reader: pulsar.Reader, limit: int = 10_000) -> list[pulsar.Message]:
    """Everything the reader has now (has_message_available asks the broker); at most ``limit``."""
    out = []
    for _ in range(limit):
        if not reader.has_message_available():
            return out
        out.append(reader.read_next(RECEIVE_TIMEOUT_MS))
    raise AssertionError(f"more than {limit} messages")


def key_values(messages: list[pulsar.Message]) -> list[tuple[str, bytes]]:
    return [(m.partition_key(), m.data()) for m in messages]
