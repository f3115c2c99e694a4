"""Bench row 17 runs and every path stays within its cost budget: the units, events, log bytes and dollars per
million of each path are counts priced from a dated file (scripts/dfdbench/prices-2026-11.json), not timings, so
the suite holds them — a change that raises what a path costs on AWS fails here instead of on the bill."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dfdbench.rows_cost import BUDGETS

ROOT = Path(__file__).resolve().parents[2]


def test_row_17_prices_every_path_within_its_budget(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "dfdbench", "--only", "17", "--quick", "--json", str(out)]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(row["name"] for row in rows) == sorted(BUDGETS), "every path priced, and each has a budget"
    assert all(row["unit"] == "$/M" and row["value"] > 0 for row in rows)
    missed = [f"{row['name']}: ${row['value']:.2f}/M ({row['goal']}; {row['note']})" for row in rows if not row["met"]]
    assert not missed, "\n".join(missed)
