"""Bench row 5 runs and meets its call budgets: the AWS calls of an ingest, a delete and the reaper are counts,
not timings, so the suite holds them (the rest of bench/run measures time and stays out of the tests)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.support import bench_rows


def test_row_5_runs_every_case_within_its_call_budget(tmp_path: Path) -> None:
    rows = bench_rows("5", tmp_path, timeout=300)
    names = [row["name"] for row in rows]
    assert "AWS calls per reaped content (reaper: object + record)" in names, names
    assert "AWS calls per reaped tenant reference (reaper)" in names, names
    missed = [f"{row['name']}: {row['value']} ({row['note']})" for row in rows if row["met"] is not True]
    assert not missed, "\n".join(missed)
