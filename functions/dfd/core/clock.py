"""Time in one format: ISO-8601 UTC with second precision ("2026-11-22T03:00:00Z"), sortable as text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str) -> datetime:
    """The moment an :func:`iso` text stands for (ValueError for anything that is not an ISO-8601 time)."""
    return datetime.fromisoformat(text)


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def plus(moment: datetime, **delta: float) -> datetime:
    return moment + timedelta(**delta)
