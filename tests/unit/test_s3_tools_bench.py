"""Bench row 18's clock (dfdbench.rows_s3tools): GET /uploads read page by page (dfdtools.upload.list_uploads, as
scripts/upload --list reads it) until every file sent is listed stored or duplicate; an upload that can never get
there stops the row instead of waiting out its timeout."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from dfdbench import rows_s3tools
from dfdbench.rows_s3tools import NeverStored, await_stored, settled, stamps
from dfdtools.upload import ListError, list_uploads


class Page:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status_code, self._body = status, body

    def json(self) -> dict[str, Any]:
        return self._body


class Listing:
    """GET /uploads of a fake API: `polls[n]` is the n-th full listing, served `size` items a page."""

    def __init__(self, polls: list[list[dict[str, Any]]], size: int = 2) -> None:
        self.polls, self.size, self.calls = polls, size, []  # type: list[dict[str, Any]]
        self.listing = 0

    def get(self, url: str, params: dict[str, str], timeout: float) -> Page:
        assert url == "http://api/uploads"
        self.calls.append(dict(params))
        items = self.polls[min(self.listing, len(self.polls) - 1)]
        start = int(params.get("last_evaluated_key", "0"))
        end = start + self.size
        more = end < len(items)
        if not more:
            self.listing += 1
        page = {
            "items": items[start:end],
            "count": len(items[start:end]),
            "last_evaluated_key": str(end) if more else None,
        }
        return Page(200, page)


def item(name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"upload_id": name, "filename": name, "status": status, **extra}


def test_list_uploads_follows_every_page() -> None:
    listing = Listing([[item(f"f{n}", "stored") for n in range(5)]])
    names = [found["filename"] for found in list_uploads(listing, "http://api")]  # type: ignore[arg-type]
    assert names == ["f0", "f1", "f2", "f3", "f4"]
    assert listing.calls == [
        {"limit": "100"},
        {"limit": "100", "last_evaluated_key": "2"},
        {"limit": "100", "last_evaluated_key": "4"},
    ]


def test_list_uploads_names_a_refused_page() -> None:
    class Refusing:
        def get(self, url: str, params: dict[str, str], timeout: float) -> Any:
            answer = requests.Response()
            answer.status_code, answer._content = 401, b'{"error": {"code": "unauthorized", "message": "expired"}}'
            return answer

    with pytest.raises(ListError, match="401 unauthorized: expired"):
        list(list_uploads(Refusing(), "http://api"))  # type: ignore[arg-type]


def test_settled_counts_the_names_stored_or_duplicate_and_nothing_else() -> None:
    items = [
        item("a", "stored"),
        item("b", "duplicate"),
        item("c", "pending"),
        item("other", "stored"),  # not one of the run's files
        {"upload_id": "x", "status": "stored"},  # no filename
    ]
    assert settled(items, {"a", "b", "c"}) == ({"a", "b"}, {})


def test_settled_names_what_will_never_be_stored_unless_another_upload_of_it_is() -> None:
    items = [
        item("a", "rejected", reason="quota_exceeded"),
        item("b", "failed"),
        item("c", "expired"),
        item("c", "stored"),  # c was sent again and stored: done
    ]
    assert settled(items, {"a", "b", "c"}) == ({"c"}, {"a": "rejected (quota_exceeded)", "b": "failed"})


def test_await_stored_polls_every_page_until_all_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    listing = Listing(
        [
            [item("a", "pending"), item("b", "stored"), item("c", "pending")],
            [item("a", "stored"), item("b", "stored"), item("c", "pending")],
            [item("a", "stored"), item("b", "stored"), item("c", "duplicate")],
        ]
    )
    sleeps: list[float] = []
    monkeypatch.setattr(requests.Session, "get", lambda self, url, **kwargs: listing.get(url, **kwargs))
    monkeypatch.setattr(rows_s3tools.time, "sleep", sleeps.append)
    found, final = await_stored("http://api", {"Authorization": "Bearer t"}, ["a", "b", "c"], time.perf_counter())
    assert found["polls"] == 3 and sleeps == [rows_s3tools.POLL_SECONDS] * 2
    assert [(item["filename"], item["status"]) for item in final] == [
        ("a", "stored"),
        ("b", "stored"),
        ("c", "duplicate"),
    ]
    assert len(listing.calls) == 6  # two pages a listing, three listings


def test_await_stored_stops_at_an_upload_that_can_never_be_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    listing = Listing([[item("a", "stored"), item("b", "rejected", reason="too_large")]])
    monkeypatch.setattr(requests.Session, "get", lambda self, url, **kwargs: listing.get(url, **kwargs))
    monkeypatch.setattr(rows_s3tools.time, "sleep", lambda seconds: pytest.fail("waited for a rejected upload"))
    with pytest.raises(NeverStored, match=r"1 uploads will never be stored: \[\('b', 'rejected \(too_large\)'\)\]"):
        await_stored("http://api", {}, ["a", "b"], time.perf_counter())


def test_stamps_are_the_first_and_last_registration_and_processing_after_the_start() -> None:
    items = [
        item("a", "stored", created_at="2026-11-27T10:00:01Z", processed_at="2026-11-27T10:00:09Z"),
        item("b", "stored", created_at="2026-11-27T10:00:03Z", processed_at="2026-11-27T10:00:05Z"),
        item("c", "stored", created_at="2026-11-27T10:00:02Z"),  # listed without processed_at
    ]
    start = datetime(2026, 11, 27, 10, 0, 0, tzinfo=UTC).timestamp()
    assert stamps(items, start) == {"created_s": [1.0, 3.0], "processed_s": [5.0, 9.0]}
