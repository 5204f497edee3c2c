"""The dispatcher's read-failure backoff (Pulsar's dispatcherReadFailureBackoff*): doubling, capped."""

from __future__ import annotations

from magnetar.broker.subscription.dispatcher import ReadBackoff
from magnetar.config import build_settings


def test_the_wait_doubles_from_the_initial_value_up_to_the_max() -> None:
    backoff = ReadBackoff(initial_ms=100, max_ms=1000)
    assert [backoff.delay_ms(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert backoff.delay_ms(10_000) == 1000  # no overflow after many failures in a row


def test_pulsars_defaults_and_keys() -> None:
    assert (ReadBackoff().initial_ms, ReadBackoff().max_ms) == (15_000, 60_000)
    broker = build_settings({"dispatcherReadFailureBackoffInitialTimeInMs": "250",
                             "dispatcherReadFailureBackoffMaxTimeInMs": "5000"}).broker
    assert (broker.dispatcher_read_failure_backoff_initial_ms, broker.dispatcher_read_failure_backoff_max_ms) == (
        250, 5000)
