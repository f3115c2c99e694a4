"""Bench row 5 runs and meets its call budgets: the AWS calls of an ingest, a delete and the reaper are counts,
not timings, so the suite holds them (the rest of scripts/bench measures time and stays out of the tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_row_5_runs_every_case_within_its_call_budget(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "dfdbench", "--only", "5", "--quick", "--json", str(out)]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    names = [row["name"] for row in rows]
    assert "AWS calls per reaped content (reaper: object + record)" in names, names
    assert "AWS calls per reaped tenant reference (reaper)" in names, names
    missed = [f"{row['name']}: {row['value']} ({row['note']})" for row in rows if row["met"] is not True]
    assert not missed, "\n".join(missed)
