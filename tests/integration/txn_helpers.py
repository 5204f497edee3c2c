"""What an official-client consumer is given, for the transaction isolation tests (bounded waits only)."""

from __future__ import annotations

import pulsar
import pytest

RECEIVE_MS = 10_000
QUIET_MS = 500  # how long "nothing more arrives" is watched for (a bound on a negative check)


def receive_all(consumer: pulsar.Consumer, count: int, timeout_ms: int = RECEIVE_MS) -> list[bytes]:
    """The next ``count`` messages' payloads, each acknowledged."""
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=timeout_ms)
        consumer.acknowledge(msg)
        out.append(msg.data())
    return out


def assert_quiet(consumer: pulsar.Consumer) -> None:
    with pytest.raises(pulsar.Timeout):
        msg = consumer.receive(timeout_millis=QUIET_MS)
        raise AssertionError(f"unexpected message {msg.data()!r}")
