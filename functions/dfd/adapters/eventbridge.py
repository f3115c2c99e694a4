"""PutEvents: dfd's outcomes onto its event bus (source `dfd`), with per-entry failure handling.

PutEvents takes up to 10 entries and answers per entry: an entry with an ErrorCode was not published (the call
itself succeeded, so botocore retried nothing). Those entries are sent again, ATTEMPTS calls at most with
dfd.core.retry's backoff between; a call that failed as a whole was retried by botocore already and is not sent again
(dfd.core.retry: no loop retries what botocore gave up on). What is not published is reported per event (the stream
delivers its record again).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.retry import PARTIAL_ATTEMPTS, Backoff
from dfd.events.outcomes import SOURCE, OutcomeEvent

ENTRIES_PER_CALL = 10  # PutEvents' limit
ATTEMPTS = PARTIAL_ATTEMPTS


def entry(event: OutcomeEvent, bus: str) -> dict[str, Any]:
    return {
        "Source": SOURCE,
        "DetailType": event.detail_type.value,
        "Detail": json.dumps(event.detail(), separators=(",", ":")),
        "EventBusName": bus,
        "Resources": [],
    }


class EventBridgeSink:
    def __init__(
        self,
        client: Any,
        bus: str,
        *,
        attempts: int = ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        log: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self._client = client
        self._bus = bus
        self._attempts = attempts
        self._backoff = Backoff(sleep, rng)
        self._log = log
        self.calls = 0

    def put(self, events: Sequence[OutcomeEvent]) -> list[bool]:
        taken = [False] * len(events)
        waiting = list(range(len(events)))
        for attempt in range(self._attempts):
            if attempt:
                self._backoff(attempt)
            refused: list[int] = []
            for start in range(0, len(waiting), ENTRIES_PER_CALL):
                chunk = waiting[start : start + ENTRIES_PER_CALL]
                refused += self._put_chunk(events, chunk, taken)
            waiting = refused
            if not waiting:
                break
        return taken

    def _put_chunk(self, events: Sequence[OutcomeEvent], chunk: list[int], taken: list[bool]) -> list[int]:
        self.calls += 1
        try:
            response = self._client.put_events(Entries=[entry(events[i], self._bus) for i in chunk])
        except (ClientError, BotoCoreError) as error:  # after botocore's attempts: not sent again
            self._report("PutEvents failed", {"error": str(error), "entries": len(chunk)})
            return []
        refused: list[int] = []
        for index, answer in zip(chunk, response.get("Entries") or [], strict=False):
            if answer.get("ErrorCode"):
                refused.append(index)
                self._report(
                    "PutEvents refused an entry",
                    {
                        "event_id": events[index].event_id,
                        "code": answer.get("ErrorCode"),
                        "message": answer.get("ErrorMessage"),
                    },
                )
            else:
                taken[index] = True
        answered = len(response.get("Entries") or [])
        refused += chunk[answered:]  # never answered: not published
        return refused

    def _report(self, message: str, extra: dict[str, Any]) -> None:
        if self._log is not None:
            self._log(message, extra)
