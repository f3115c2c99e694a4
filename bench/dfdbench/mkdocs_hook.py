"""The documentation site's hook (mkdocs.yml ``hooks``): every measured figure a page quotes is rendered from
docs/bench.json at build time, by the table code ``bench/run`` prints, so a bench run and ``make docs`` bring every
page up to date.

Markers (HTML comments, so a page read on GitHub shows nothing stale where the site shows the figure):

- a line ``<!-- bench:table -->``: the table of every row; ``<!-- bench:summary -->``: one line saying where the
  run was made and how many targets it met;
- a line ``<!-- bench:target N -->``: the rows of target N (value, baseline, ratio, target, met, notes);
- inline, ``<!-- bench "name" -->``: the row of that name, else the one row whose name starts with it, its value
  with its unit; ``<!-- bench "name" FIELD -->`` another of its fields: ``number`` (the value without its unit),
  ``ratio``, ``baseline``, ``baseline_number``, ``goal``, ``met``, ``note``, or a dotted path into its details
  (``details.units.read_units``: the number alone; ``details.x.share%``: a fraction as a percentage).

A marker in a code span (between backticks) is left as written. A marker naming no row, or more than one, fails
the build with the page and the marker: a renamed row never leaves a page quoting nothing. mkdocs-material has no
data-to-table feature, and the table must be the bench's own rendering, not a second one.

The site's ✅ and ❌ (the table's "met" column, any page's) are drawn as inline SVG: a reader without an emoji font
(a headless browser, a minimal desktop) would see empty boxes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

from dfdbench import report
from dfdbench.harness import Row

# the site's docs_dir's bench.json (this one when no config is given)
BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench.json"
MARKER = re.compile(r"^<!-- bench:(?P<what>table|summary) -->$", flags=re.MULTILINE)
TARGET = re.compile(r"^<!-- bench:target (?P<target>[\w-]+) -->$", flags=re.MULTILINE)
FIGURE = re.compile(r'(?<!`)<!-- bench "(?P<name>[^"]+)"(?: (?P<field>[\w.]+%?))? -->(?!`)')  # not in a code span
FIELDS = frozenset(field.name for field in dataclasses.fields(Row))

# the marks as inline SVG, with their text for screen readers and for a page copied as text
GLYPHS = {
    "✅": (
        '<svg class="dfd-mark" role="img" aria-label="yes" viewBox="0 0 16 16" width="1.1em" height="1.1em" '
        'style="vertical-align:-0.2em"><rect width="16" height="16" rx="3" fill="#2e7d32"/>'
        '<path d="M3.5 8.5l3 3 6-7" fill="none" stroke="#fff" stroke-width="2.2"/></svg>'
    ),
    "❌": (
        '<svg class="dfd-mark" role="img" aria-label="no" viewBox="0 0 16 16" width="1.1em" height="1.1em" '
        'style="vertical-align:-0.2em"><rect width="16" height="16" rx="3" fill="#c62828"/>'
        '<path d="M4.5 4.5l7 7M11.5 4.5l-7 7" fill="none" stroke="#fff" stroke-width="2.2"/></svg>'
    ),
}
PRE = re.compile(r"(<pre\b.*?</pre>)", flags=re.DOTALL)


class MarkerError(ValueError):
    """A marker that names no row of docs/bench.json, or more than one, or a field the row does not have."""


def rows(document: dict[str, Any]) -> list[Row]:
    return [Row(**{key: value for key, value in row.items() if key in FIELDS}) for row in document["rows"]]


def summary(document: dict[str, Any]) -> str:
    measured = rows(document)
    met = sum(row.met is True for row in measured)
    missed = sum(row.met is False for row in measured)
    machine = document.get("machine", {})
    line = (
        f"{len(measured)} rows in {document.get('seconds', 0):.0f} s on {machine.get('cpus', '?')} CPUs "
        f"(Python {machine.get('python', '?')}): {met} targets met, {missed} missed."
    )
    later = sorted({target for run in document.get("updates", []) for target in run["only"]}, key=report.order)
    if later:
        line += f" Rows of {', '.join(later)} from later runs (bench/run --only N --update docs/bench.json)."
    return line


def target_table(document: dict[str, Any], target: str) -> str:
    chosen = [row for row in rows(document) if row.target == target]
    if not chosen:
        raise MarkerError(f"<!-- bench:target {target} -->: no row of target {target} in docs/bench.json")
    lines = [
        "| benchmark | latest | baseline (same run) | ratio | target | met | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in chosen:
        cells = [row.name, figure(document, row.name), figure(document, row.name, "baseline")]
        cells += [figure(document, row.name, "ratio"), row.goal, report.MARK[row.met], row.note]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def figure(document: dict[str, Any], name: str, field: str | None = None) -> str:
    """One field of the row named `name`, else of the one row whose name starts with it, as the table prints it."""
    found = [row for row in document["rows"] if row["name"] == name]
    found = found or [row for row in document["rows"] if row["name"].startswith(name)]
    if len(found) != 1:
        what = "no row" if not found else f"{len(found)} rows"
        raise MarkerError(f'<!-- bench "{name}" -->: {what} of docs/bench.json named so')
    row = found[0]
    if field in (None, "value"):
        return report.number(row["value"], row["unit"])
    if field in ("number", "baseline_number"):  # without the unit
        return report.number(row.get("value" if field == "number" else "baseline"))
    if field == "baseline":
        if row.get("baseline") is None:
            return "—"
        named = f" ({row['baseline_name']})" if row.get("baseline_name") else ""
        return report.number(row["baseline"], row["unit"]) + named
    if field == "ratio":
        ratio = row.get("ratio")
        return f"{ratio:.2f}x" if isinstance(ratio, int | float) and math.isfinite(ratio) else "—"
    if field == "met":
        return report.MARK[row["met"]]
    if field in ("goal", "note"):
        return str(row[field])
    percent = field.endswith("%")
    value: Any = row
    for part in field.removesuffix("%").split("."):
        if not isinstance(value, dict) or part not in value:
            raise MarkerError(f'<!-- bench "{name}" {field} -->: the row has no {field}')
        value = value[part]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    return f"{100 * value:.0f} %" if percent else report.number(value)


def render(markdown: str, document: dict[str, Any]) -> str:
    def whole(match: re.Match[str]) -> str:
        return report.table(rows(document)) if match["what"] == "table" else summary(document)

    markdown = MARKER.sub(whole, markdown)
    markdown = TARGET.sub(lambda match: target_table(document, match["target"]), markdown)
    return FIGURE.sub(lambda match: figure(document, match["name"], match["field"]), markdown)


def glyphs(page_html: str) -> str:
    """✅ and ❌ as inline SVG, except inside code blocks (what a reader copies stays text)."""
    parts = PRE.split(page_html)
    for index in range(0, len(parts), 2):
        for mark, svg in GLYPHS.items():
            parts[index] = parts[index].replace(mark, svg)
    return "".join(parts)


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, **_: Any) -> str:
    if not (MARKER.search(markdown) or TARGET.search(markdown) or FIGURE.search(markdown)):
        return markdown
    bench = Path(config["docs_dir"]) / "bench.json" if config is not None else BENCH
    try:
        return render(markdown, json.loads(bench.read_text(encoding="utf-8")))
    except MarkerError as error:
        from mkdocs.exceptions import PluginError

        where = getattr(getattr(page, "file", None), "src_uri", "a page")
        raise PluginError(f"{where}: {error}") from error


def on_page_content(html: str, **_: Any) -> str:
    return glyphs(html)
