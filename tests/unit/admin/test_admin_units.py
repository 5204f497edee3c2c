"""Pure pieces of the admin surface: rates, CLI value parsing, error statuses."""

from __future__ import annotations

import pytest

from magnetar.broker import errors
from magnetar.broker.admin.stats import RateTracker
from magnetar.cli.admin import base as admin_cli
from magnetar.server.http.routes import status_of


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


def test_rate_is_measured_over_a_fixed_window() -> None:
    clock = ManualClock()
    rates = RateTracker(clock)  # type: ignore[arg-type]
    assert rates.rate("t", 0) == 0.0
    clock.ms += 2_000
    assert rates.rate("t", 100) == 50.0
    clock.ms += 10  # a read between samples still measures from the window's start
    assert rates.rate("t", 1_000) == pytest.approx(1_000 * 1000 / 2_010)
    for _ in range(20):  # steady 10 msg/s for 20 s: the rate is the last 10 s's
        clock.ms += 1_000
        counter = 1_000 + 10 * (_ + 1)
        rates.rate("t", counter)
    assert rates.rate("t", counter) == pytest.approx(10.0, rel=0.11)


def test_two_readers_do_not_interfere() -> None:
    """One reader polling every 100 ms and one reading once in a while see the same rate."""
    clock = ManualClock()
    busy, quiet = RateTracker(clock), RateTracker(clock)  # type: ignore[arg-type]
    counter = 0
    seen_busy = seen_quiet = 0.0
    for step in range(150):  # 15 s at 100 ms, 50 messages per second
        clock.ms += 100
        counter += 5
        seen_busy = busy.rate("t", counter)
        if step % 37 == 0:
            seen_quiet = quiet.rate("t", counter)
    seen_quiet = quiet.rate("t", counter)
    assert seen_busy == pytest.approx(50.0, rel=0.05)
    assert seen_quiet == pytest.approx(50.0, rel=0.05)
    shared = RateTracker(clock)  # type: ignore[arg-type]
    for _ in range(110):  # both readers on one tracker: reads do not reset the measurement
        clock.ms += 100
        counter += 5
        first, second = shared.rate("t", counter), shared.rate("t", counter)
    assert first == second == pytest.approx(50.0, rel=0.05)


def test_cli_values_like_pulsar_admin() -> None:
    assert admin_cli.amount("2h", admin_cli.UNITS_MIN, "time") == 120
    assert admin_cli.amount("1G", admin_cli.UNITS_MB, "size") == 1024
    assert admin_cli.amount("-1", admin_cli.UNITS_MB, "size") == -1
    assert admin_cli.message_id("3:4") == {"ledgerId": 3, "entryId": 4, "partitionIndex": -1}
    assert admin_cli.topic_path("t") == "/admin/v2/persistent/public/default/t"
    with pytest.raises(admin_cli.UsageError):
        admin_cli.amount("soon", admin_cli.UNITS_S, "time")
    with pytest.raises(admin_cli.UsageError):
        admin_cli.topic_path("a/b")


def test_broker_errors_map_to_pulsar_statuses() -> None:
    assert status_of(errors.NotFound("x")) == 404
    assert status_of(errors.Conflict("x")) == 409
    assert status_of(errors.PreconditionFailed("x")) == 412
    assert status_of(errors.InvalidTopicName("x")) == 400
    assert status_of(errors.ServiceNotReady("x")) == 503
