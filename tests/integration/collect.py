"""Collect messages from listeners of several consumers and wait (bounded) for a count."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import pulsar

WAIT_S = 20.0


@dataclass(frozen=True)
class Got:
    consumer: str
    data: bytes
    key: str
    redelivery_count: int
    message_id: pulsar.MessageId


class Collector:
    def __init__(self, *, ack: bool = True) -> None:
        self.ack = ack
        self.got: list[Got] = []
        self._changed = threading.Condition()

    def listener(self, name: str) -> Callable[[pulsar.Consumer, pulsar.Message], None]:
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            got = Got(name, msg.data(), msg.partition_key(), msg.redelivery_count(), msg.message_id())
            if self.ack:
                consumer.acknowledge(msg)
            with self._changed:
                self.got.append(got)
                self._changed.notify_all()

        return on_message

    def wait_for(self, count: int, timeout_s: float = WAIT_S) -> list[Got]:
        with self._changed:
            ok = self._changed.wait_for(lambda: len(self.got) >= count, timeout_s)
            assert ok, f"received {len(self.got)} of {count} messages"
            return list(self.got)

    def by_consumer(self) -> dict[str, list[Got]]:
        out: dict[str, list[Got]] = {}
        for g in list(self.got):
            out.setdefault(g.consumer, []).append(g)
        return out
