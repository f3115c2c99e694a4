"""The template's Schedule events, locally: each function with one is invoked on a timer, with the event
EventBridge's scheduler sends (`Scheduled Event`, `source` aws.events).

The period is the template's `rate(...)`; ``DFD_SCHEDULE_INTERVAL`` (seconds) replaces every schedule's period
(0 = never: the functions still run when invoked, e.g. by ``scripts/history``). The first run comes
:data:`FIRST_RUN` seconds after the start, so a fresh ``make run`` holds a snapshot at once.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dfdlocal.names import ACCOUNT_ID, REGION

if TYPE_CHECKING:
    from collections.abc import Callable

    from dfdlocal.template import ScheduleSource

log = logging.getLogger("dfdlocal.schedules")

INTERVAL_VARIABLE = "DFD_SCHEDULE_INTERVAL"
FIRST_RUN = 2.0


def scheduled_event(source: ScheduleSource, now: str) -> dict[str, Any]:
    """The event EventBridge sends a function on its schedule."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": now,
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{source.function}-{source.event_name}"],
        "detail": {},
    }


def interval_from_env(source: ScheduleSource) -> float:
    raw = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not raw:
        return float(source.rate_seconds)
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning("%s=%r is not a number: the template's rate holds", INTERVAL_VARIABLE, raw)
        return float(source.rate_seconds)


@dataclass
class ScheduleTimer:
    """Invokes `source.function` through `invoke` every `interval` seconds until stopped."""

    source: ScheduleSource
    invoke: Callable[[str, Any], Any]
    clock: Callable[[], str]
    interval: float
    first: float = FIRST_RUN
    runs: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval <= 0 or not self.source.enabled:
            return
        name = f"schedule-{self.source.function}"
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wait = min(self.first, self.interval)
        while not self._stop.wait(wait):
            wait = self.interval
            invocation = self.invoke(self.source.function, scheduled_event(self.source, self.clock()))
            if getattr(invocation, "ok", True):
                self.runs += 1
            else:  # logged by the runtime; the next run comes on time, as EventBridge's would
                log.warning("%s: scheduled run failed", self.source.function)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def describe(self) -> str:
        every = f"every {self.interval:g} s" if self.interval > 0 else "timer off"
        return f"{self.source.function} ({self.source.event_name}), {every} ({INTERVAL_VARIABLE})"
