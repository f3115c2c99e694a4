"""PutEvents with per-entry failure handling (dfd.adapters.eventbridge): 10 entries a call, an entry the bus
refused sent again (bounded, with dfd.core.retry's backoff), a call that failed as a whole (after botocore's attempts)
not sent again, what stays unpublished reported per event."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from dfd.adapters.eventbridge import EventBridgeSink
from dfd.core.retry import Backoff
from dfd.events.outcomes import DetailType, OutcomeEvent


def events(count: int) -> list[OutcomeEvent]:
    return [OutcomeEvent(DetailType.FILE_STORED, f"id-{i}", "t", "ab" * 32, i) for i in range(count)]


class Bus:
    def __init__(self, refuse: dict[str, int] | None = None, fail_calls: int = 0) -> None:
        self.refuse = dict(refuse or {})  # event_id -> how many times more to refuse it
        self.fail_calls = fail_calls
        self.calls: list[list[str]] = []
        self.taken: list[str] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [json.loads(entry["Detail"])["event_id"] for entry in Entries]
        self.calls.append(ids)
        assert len(Entries) <= 10 and all(e["Source"] == "dfd" and e["EventBusName"] == "bus" for e in Entries)
        if self.fail_calls:
            self.fail_calls -= 1
            raise ClientError({"Error": {"Code": "InternalException", "Message": "x"}}, "PutEvents")
        answers = []
        for event_id in ids:
            if self.refuse.get(event_id, 0) > 0:
                self.refuse[event_id] -= 1
                answers.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"})
            else:
                self.taken.append(event_id)
                answers.append({"EventId": "e"})
        return {"FailedEntryCount": sum("ErrorCode" in a for a in answers), "Entries": answers}


def sink(bus: Bus) -> EventBridgeSink:
    return EventBridgeSink(bus, "bus", sleep=lambda _: None)


def test_entries_go_ten_a_call_in_order() -> None:
    bus = Bus()
    assert sink(bus).put(events(25)) == [True] * 25
    assert [len(call) for call in bus.calls] == [10, 10, 5]
    assert bus.taken == [f"id-{i}" for i in range(25)]


def test_a_refused_entry_alone_is_sent_again() -> None:
    bus = Bus(refuse={"id-3": 2})
    assert sink(bus).put(events(5)) == [True] * 5
    assert bus.calls == [[f"id-{i}" for i in range(5)], ["id-3"], ["id-3"]]


def test_what_stays_refused_is_reported_after_the_attempts_with_backoff() -> None:
    bus = Bus(refuse={"id-1": 99})
    sleeps: list[float] = []
    assert EventBridgeSink(bus, "bus", sleep=sleeps.append).put(events(3)) == [True, False, True]
    assert len(bus.calls) == 4 and bus.calls[1:] == [["id-1"]] * 3  # 4 attempts in all
    assert bus.taken == ["id-0", "id-2"]
    assert len(sleeps) == 3 and all(0 < s <= Backoff.LONGEST for s in sleeps)


def test_a_call_that_failed_as_a_whole_is_not_sent_again() -> None:
    """botocore retried it already (dfd.core.retry): its entries are reported unpublished, the others still go."""
    bus = Bus(fail_calls=1)
    assert sink(bus).put(events(12)) == [False] * 10 + [True] * 2
    assert [len(call) for call in bus.calls] == [10, 2]
