"""A recording TxnParticipants for coordinator tests (the real one ends txns on topics)."""

from __future__ import annotations

import asyncio

from magnetar.broker.errors import ServiceNotReady
from magnetar.broker.transactions.api import TxnAction, TxnId


class FakeParticipants:
    """Records every end call; fails the next ``fail_next`` calls (or all while ``failing``)."""

    def __init__(self) -> None:
        self.partition_calls: list[tuple[str, TxnId, TxnAction]] = []
        self.subscription_calls: list[tuple[str, str, TxnId, TxnAction]] = []
        self.failing = False
        self.fail_next = 0
        self.called = asyncio.Event()

    def _maybe_fail(self) -> None:
        self.called.set()
        if self.failing:
            raise ServiceNotReady("participant unavailable")
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ServiceNotReady("participant briefly unavailable")

    async def end_txn_on_partition(self, topic: str, txn: TxnId, action: TxnAction) -> None:
        self._maybe_fail()
        self.partition_calls.append((topic, txn, action))

    async def end_txn_on_subscription(self, topic: str, subscription: str, txn: TxnId, action: TxnAction) -> None:
        self._maybe_fail()
        self.subscription_calls.append((topic, subscription, txn, action))
