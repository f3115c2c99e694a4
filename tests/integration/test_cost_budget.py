"""Bench row 17 runs and every path stays within its cost budget: the units, events, log bytes and dollars per
million of each path are counts priced from a dated file (bench/dfdbench/prices-2026-11.json), not timings, so
the suite holds them — a change that raises what a path costs on AWS fails here instead of on the bill."""

from __future__ import annotations

from pathlib import Path

from dfdbench.rows_cost import BUDGETS
from tests.integration.support import bench_rows


def test_row_17_prices_every_path_within_its_budget(tmp_path: Path) -> None:
    rows = bench_rows("17", tmp_path, timeout=600)
    assert sorted(row["name"] for row in rows) == sorted(BUDGETS), "every path priced, and each has a budget"
    assert all(row["unit"] == "$/M" and row["value"] > 0 for row in rows)
    missed = [f"{row['name']}: ${row['value']:.2f}/M ({row['goal']}; {row['note']})" for row in rows if not row["met"]]
    assert not missed, "\n".join(missed)
