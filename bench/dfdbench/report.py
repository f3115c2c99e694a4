"""The benchmark table (Markdown, readable in a terminal too), its JSON, and the throughput plot (hand-written
SVG: no plotting dependency)."""

from __future__ import annotations

import html
import math
import platform
from typing import Any

from dfdbench.harness import Row

MARK = {True: "✅", False: "❌", None: "—"}


def number(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if (
        isinstance(value, int)
        or unit == "calls"
        or (float(value).is_integer() and abs(value) >= 1)
        or abs(value) >= 100
    ):
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def table(rows: list[Row]) -> str:
    lines = [
        "| # | benchmark | value | baseline (same run) | ratio | target | met | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        baseline = number(row.baseline, row.unit) + (f" ({row.baseline_name})" if row.baseline_name else "")
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None and math.isfinite(row.ratio) else "—"
        cells = [row.target, row.name, number(row.value, row.unit), baseline if row.baseline is not None else "—"]
        cells += [ratio, row.goal, MARK[row.met], row.note]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def order(target: str) -> int:
    """Where a target's rows stand in the table: by number, row 17's entries (target "cost") as 17."""
    return int(target) if target.isdigit() else 17


def merge(
    document: dict[str, Any], rows: list[dict[str, Any]], points: list[dict[str, Any]], run: dict[str, Any]
) -> dict[str, Any]:
    """A published run with the rows of the targets `rows` hold replaced by them (every other row kept, in table
    order), its plot points of the series `points` hold replaced too, and `run` (which rows, where, how long)
    recorded in its ``updates``."""
    targets = {row["target"] for row in rows}
    kept = [row for row in document["rows"] if row["target"] not in targets]
    series = {point["series"] for point in points}
    plotted = [point for point in document.get("throughput_points", []) if point["series"] not in series]
    return document | {
        "rows": sorted(kept + rows, key=lambda row: order(str(row["target"]))),
        "throughput_points": plotted + points,
        "updates": [*document.get("updates", []), run],
    }


def machine() -> dict[str, Any]:
    import os

    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


# ---------------------------------------------------------------------- SVG
_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def svg(points: list[dict[str, Any]], title: str = "Ingest throughput vs object size") -> str:
    """Lines of throughput (MB/s, linear) against object size (MiB, log2), one per series."""
    series: dict[str, list[tuple[float, float]]] = {}
    for point in points:
        series.setdefault(point["series"], []).append((point["size"] / 1024**2, point["bytes_per_s"] / 1e6))
    width, height, left, right, top, bottom = 760, 420, 70, 220, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    sizes = sorted({x for values in series.values() for x, _ in values}) or [1.0]
    x_min, x_max = math.log2(min(sizes)), math.log2(max(sizes))
    x_span = (x_max - x_min) or 1.0
    y_top = max((y for values in series.values() for _, y in values), default=1.0)
    step = _nice_step(y_top / 5)
    y_max = math.ceil(y_top / step) * step

    def px(x: float) -> float:
        return left + (math.log2(x) - x_min) / x_span * plot_w

    def py(y: float) -> float:
        return top + plot_h - y / y_max * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left + plot_w / 2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>',
    ]
    y = 0.0
    while y <= y_max + 1e-9:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + plot_w}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,.0f}</text>')
        y += step
    for size in sizes:
        label = f"{size:g} MiB" if size < 1024 else f"{size / 1024:g} GiB"
        out.append(f'<line x1="{px(size):.1f}" y1="{top}" x2="{px(size):.1f}" y2="{top + plot_h}" stroke="#eee"/>')
        out.append(f'<text x="{px(size):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{label}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">object size (log scale)</text>')
    middle = top + plot_h / 2
    out.append(f'<text x="16" y="{middle}" text-anchor="middle" transform="rotate(-90 16 {middle})">MB/s</text>')
    for index, (name, values) in enumerate(series.items()):
        color = _COLORS[index % len(_COLORS)]
        values.sort()
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in values)
        dash = ' stroke-dasharray="6 4"' if "1 stream" in name or "baseline" in name else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2.5"{dash}/>')
        for x, y in values:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
        ly = top + 14 + index * 20
        out.append(f'<line x1="{width - right + 14}" y1="{ly - 4}" x2="{width - right + 40}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2.5"{dash}/>')  # fmt: skip
        out.append(f'<text x="{width - right + 46}" y="{ly}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    power = float(10 ** math.floor(math.log10(raw)))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power
