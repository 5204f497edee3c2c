"""The simulators inject faults, and the broker's layers log warnings for them by design; those would drown a
failing seed's output, so the ``magnetar`` loggers are quieted for each simulator test and restored after it
(tests that run later assert on warnings)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    logger = logging.getLogger("magnetar")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
