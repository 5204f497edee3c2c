"""Pure pieces of the admin surface: rates, CLI value parsing, error statuses."""

from __future__ import annotations

import pytest

from magnetar import admin_cli
from magnetar.broker import errors
from magnetar.broker.stats import RateTracker
from magnetar.server.admin.routes import status_of


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


def test_rate_is_measured_between_samples() -> None:
    clock = ManualClock()
    rates = RateTracker(clock)  # type: ignore[arg-type]
    assert rates.rate("t", 0) == 0.0
    clock.ms += 2_000
    assert rates.rate("t", 100) == 50.0
    clock.ms += 10  # too soon to re-measure: the last rate stands
    assert rates.rate("t", 1_000) == 50.0


def test_cli_values_like_pulsar_admin() -> None:
    assert admin_cli._amount("2h", admin_cli._UNITS_MIN, "time") == 120
    assert admin_cli._amount("1G", admin_cli._UNITS_MB, "size") == 1024
    assert admin_cli._amount("-1", admin_cli._UNITS_MB, "size") == -1
    assert admin_cli.message_id("3:4") == {"ledgerId": 3, "entryId": 4, "partitionIndex": -1}
    assert admin_cli.topic_path("t") == "/admin/v2/persistent/public/default/t"
    with pytest.raises(admin_cli.UsageError):
        admin_cli._amount("soon", admin_cli._UNITS_S, "time")
    with pytest.raises(admin_cli.UsageError):
        admin_cli.topic_path("a/b")


def test_broker_errors_map_to_pulsar_statuses() -> None:
    assert status_of(errors.NotFound("x")) == 404
    assert status_of(errors.Conflict("x")) == 409
    assert status_of(errors.PreconditionFailed("x")) == 412
    assert status_of(errors.InvalidTopicName("x")) == 400
    assert status_of(errors.ServiceNotReady("x")) == 503
