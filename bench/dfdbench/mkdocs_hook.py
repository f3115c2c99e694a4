"""The documentation site's hook (mkdocs.yml ``hooks``): a page's bench marker becomes the latest run's table,
rendered from docs/bench.json by the table code ``bench/run`` prints, so a bench run updates one file.

A line ``<!-- bench:table -->`` is replaced by the table of every row, ``<!-- bench:summary -->`` by one line
saying when and where the run was made and how many targets it met. mkdocs-material has no data-to-table
feature, and the table must be the bench's own rendering, not a second one.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from dfdbench import report
from dfdbench.harness import Row

BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench.json"
MARKER = re.compile(r"^<!-- bench:(?P<what>table|summary) -->$", flags=re.MULTILINE)
FIELDS = frozenset(field.name for field in dataclasses.fields(Row))


def rows(document: dict[str, Any]) -> list[Row]:
    return [Row(**{key: value for key, value in row.items() if key in FIELDS}) for row in document["rows"]]


def summary(document: dict[str, Any]) -> str:
    measured = rows(document)
    met = sum(row.met is True for row in measured)
    missed = sum(row.met is False for row in measured)
    machine = document.get("machine", {})
    return (
        f"{len(measured)} rows in {document.get('seconds', 0):.0f} s on {machine.get('cpus', '?')} CPUs "
        f"(Python {machine.get('python', '?')}): {met} targets met, {missed} missed."
    )


def render(markdown: str, document: dict[str, Any]) -> str:
    def replace(match: re.Match[str]) -> str:
        return report.table(rows(document)) if match["what"] == "table" else summary(document)

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER.search(markdown) is None:
        return markdown
    return render(markdown, json.loads(BENCH.read_text(encoding="utf-8")))
