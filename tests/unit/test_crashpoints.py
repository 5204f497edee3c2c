"""Crash-point specs (magnetarTestingCrashPoints): what is armed, and what is refused."""

from __future__ import annotations

import pytest

from magnetar.core import crashpoints


def test_spec_names_counts_and_subjects() -> None:
    assert crashpoints.parse("rollover.created, trim.queued@3~aimed-1,") == {
        "rollover.created": (1, ""), "trim.queued": (3, "aimed-1")}
    assert crashpoints.parse("") == {}


@pytest.mark.parametrize("spec", ["rollover.create", "trim.queued@0", "cursor.persisted@x"])
def test_unknown_points_and_bad_counts_are_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        crashpoints.parse(spec)


def test_an_unarmed_point_or_another_subject_does_nothing() -> None:
    crashpoints.arm(crashpoints.parse("cursor.persisted@2~mine"))
    try:
        crashpoints.reached("cursor.persisting", "mine")  # not armed
        crashpoints.reached("cursor.persisted", "theirs")  # not counted
        crashpoints.reached("cursor.persisted", "mine/sub")  # counted: one hit left
        assert crashpoints._armed["cursor.persisted"] == (1, "mine")
    finally:
        crashpoints.arm({})
