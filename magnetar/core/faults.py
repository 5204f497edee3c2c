"""Fault plans for the fault-injecting stores (storage, metadata) that the simulator and tests use.

A plan decides which operations fail: after ``fail_after_ops`` counted operations every one does (a full
disk, a lost metadata service), and independently each fails with ``fail_probability``; only operations
named in ``ops`` are counted. Deterministic for a seed and an operation order. Like ``clock``, this module
sits below every layer and imports nothing from magnetar, so both storage and metadata can use it.
"""

from __future__ import annotations

import random


class FaultPlan:
    def __init__(
        self,
        rng: random.Random,
        *,
        fail_after_ops: int | None = None,
        fail_probability: float = 0.0,
        ops: frozenset[str],
    ) -> None:
        self.rng = rng
        self.ops = ops
        self.fail_after_ops = fail_after_ops
        self.fail_probability = fail_probability
        self.operations = 0
        self.injected = 0

    def arm(self, *, fail_after_ops: int | None = None, fail_probability: float = 0.0) -> None:
        self.operations = 0
        self.fail_after_ops = fail_after_ops
        self.fail_probability = fail_probability

    def disarm(self) -> None:
        self.arm()

    @property
    def armed(self) -> bool:
        return self.fail_after_ops is not None or self.fail_probability > 0

    def should_fail(self, op: str) -> bool:
        if op not in self.ops or not self.armed:
            return False
        self.operations += 1
        fail = self.fail_after_ops is not None and self.operations > self.fail_after_ops
        if not fail and self.fail_probability > 0:
            fail = self.rng.random() < self.fail_probability
        if fail:
            self.injected += 1
        return fail
