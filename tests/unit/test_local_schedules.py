"""The template's Schedule events on the local stack (dfdlocal.schedules, dfdlocal.template): SnapshotFunction is
invoked on its rate with EventBridge's scheduled event; DFD_SCHEDULE_INTERVAL moves or stops it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dfdlocal.schedules import ScheduleTimer, interval_from_env, scheduled_event
from dfdlocal.template import ScheduleSource, TemplateError, rate_seconds, read_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_template_s_snapshot_schedule_is_read_every_5_minutes() -> None:
    model = read_model(ROOT / "template.yaml", "http://127.0.0.1:4566")
    assert model.schedule_sources == [ScheduleSource("SnapshotFunction", "Every5Minutes", 300)]
    assert not [warning for warning in model.warnings if "Schedule" in warning]


@pytest.mark.parametrize(
    ("expression", "seconds"), [("rate(5 minutes)", 300), ("rate(1 minute)", 60), ("rate(2 hours)", 7200)]
)
def test_rates(expression: str, seconds: int) -> None:
    assert rate_seconds(expression) == seconds


@pytest.mark.parametrize("expression", ["cron(0 * * * ? *)", "rate(0 minutes)", "rate(5 weeks)", ""])
def test_anything_but_a_rate_is_refused(expression: str) -> None:
    with pytest.raises(TemplateError):
        rate_seconds(expression)


def test_the_interval_variable_replaces_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    source = ScheduleSource("SnapshotFunction", "Every5Minutes", 300)
    assert interval_from_env(source) == 300
    monkeypatch.setenv("DFD_SCHEDULE_INTERVAL", "0.5")
    assert interval_from_env(source) == 0.5
    monkeypatch.setenv("DFD_SCHEDULE_INTERVAL", "0")
    assert interval_from_env(source) == 0


def test_the_timer_invokes_the_function_with_the_scheduled_event() -> None:
    source = ScheduleSource("SnapshotFunction", "Every5Minutes", 300)
    seen: list[tuple[str, Any]] = []
    ran = threading.Event()

    def invoke(name: str, event: Any) -> None:
        seen.append((name, event))
        if len(seen) == 2:
            ran.set()

    timer = ScheduleTimer(source, invoke, lambda: "2026-03-01T12:00:00Z", interval=0.05, first=0.01)
    timer.start()
    try:
        assert ran.wait(5)
    finally:
        timer.stop()
    name, event = seen[0]
    assert name == "SnapshotFunction" and event["source"] == "aws.events" and event["time"] == "2026-03-01T12:00:00Z"
    assert event["detail-type"] == "Scheduled Event" and timer.runs >= 2
    assert scheduled_event(source, "x")["resources"][0].endswith(":rule/SnapshotFunction-Every5Minutes")


def test_an_interval_of_0_never_runs() -> None:
    timer = ScheduleTimer(ScheduleSource("F", "E", 60), lambda *_: None, lambda: "", interval=0)
    timer.start()
    assert timer._thread is None
    assert "timer off" in timer.describe()
