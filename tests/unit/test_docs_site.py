"""The documentation site (mkdocs.yml, docs/) builds with --strict, as `make docs` builds it, and what it shows
comes from the one copy of each thing: README's sections, docs/openapi.yaml, docs/bench.json.

A page the nav leaves out, a broken link or a missing anchor fails the strict build (mkdocs.yml `validation`);
the test shows it for a page left out of the nav."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dfdbench import mkdocs_hook, report

ROOT = Path(__file__).resolve().parents[2]
ISSUE = re.compile(r"[Ii]ssue #?[0-9]+|\(#[0-9]+\)")


def build(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(tmp_path / "site")]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def text_of(page: Path) -> str:
    body = page.read_text(encoding="utf-8")
    body = body[body.index("<article") : body.index("</article>")]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("docs")
    result = build(tmp_path, ROOT / "mkdocs.yml")
    assert result.returncode == 0, result.stderr[-4000:]
    return tmp_path / "site"


def test_every_page_of_the_nav_is_built_and_no_file_outside_it(site: Path) -> None:
    pages = sorted(str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md"))
    nav = yaml.safe_load(re.sub(r"!!python/name:\S+", "''", (ROOT / "mkdocs.yml").read_text()))["nav"]

    def listed(entries: list[object]) -> list[str]:
        out: list[str] = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            out += listed(value) if isinstance(value, list) else [str(value)]
        return out

    assert sorted(listed(nav)) == pages
    for page in pages:
        built = page.removesuffix("README.md").removesuffix("index.md").removesuffix(".md")
        assert (site / built / "index.html").exists() or (site / built.rstrip("/") / "index.html").exists(), page


def test_the_api_reference_renders_every_operation_of_the_document(site: Path) -> None:
    document = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    page = (site / "api" / "index.html").read_text(encoding="utf-8")
    found = re.findall(r"<h3[^>]*>(.*?)</h3>", page)
    headings = {re.sub(r"<[^>]+>|¶|&para;", "", heading).strip() for heading in found}
    operations = {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options"}
    }
    assert operations and operations <= headings, sorted(operations - headings)


def test_the_performance_table_is_the_bench_runs(site: Path) -> None:
    document = json.loads((ROOT / "docs" / "bench.json").read_text())
    page = text_of(site / "performance" / "index.html")
    assert "bench:table" not in page and "bench:summary" not in page
    assert mkdocs_hook.summary(document) in page
    for row in document["rows"]:
        assert html.unescape(row["name"]) in page, row["name"]


def test_the_home_page_and_getting_started_are_the_readme_sections(site: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    home = (site / "index.html").read_text()
    assert 'class="mermaid"' in home, "the architecture diagram"
    assert "dfd stores every distinct file content once" in text_of(site / "index.html")
    quickstart = text_of(site / "getting-started" / "index.html")
    assert "scripts/replay --prefix uploads/ -n 10" in readme and "scripts/replay --prefix uploads/ -n 10" in quickstart


def test_nothing_is_fetched_from_outside_at_build_or_read_time_but_the_theme_scripts(site: Path) -> None:
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis.com" not in text and "fonts.gstatic.com" not in text, page


def test_the_scripts_the_pages_load_are_in_the_site(site: Path) -> None:
    """mkdocs builds without a file extra_javascript names; the page would then load mermaid from unpkg.com."""
    config = yaml.safe_load(re.sub(r"!!python/name:\S+", "''", (ROOT / "mkdocs.yml").read_text()))
    assert "assets/vendor/mermaid/mermaid.min.js" in config["extra_javascript"]
    home = (site / "index.html").read_text(encoding="utf-8")
    for script in config["extra_javascript"]:
        assert (site / script).is_file(), f"{script}: not in docs/ (make web-vendor)"
        assert f'<script src="{script}"></script>' in home, script


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "orphan.md").write_text("# Nobody links here\n")
    config = (ROOT / "mkdocs.yml").read_text()
    for relative in ("docs_dir: docs", "- README.md", "- bench/dfdbench/"):
        assert relative in config
        config = config.replace(relative, relative.replace(" ", f" {ROOT}/", 1).replace(f"{ROOT}/docs", str(docs)))
    (tmp_path / "mkdocs.yml").write_text(config)
    result = build(tmp_path, tmp_path / "mkdocs.yml")
    assert result.returncode != 0
    assert "orphan.md" in result.stderr


def test_the_bench_markers_render_the_table_and_the_summary() -> None:
    document = {
        "machine": {"cpus": 2, "python": "3.12.1"},
        "seconds": 12.4,
        "rows": [
            {"target": "3", "name": "a row", "value": 1.5, "unit": "ms", "met": True, "goal": "≤ 2"},
            {"target": "7", "name": "another", "value": 3.25, "unit": "ms", "met": False, "details": {"x": 1}},
        ],
    }
    page = "# P\n\n<!-- bench:summary -->\n\n<!-- bench:table -->\n\nafter\n"
    rendered = mkdocs_hook.render(page, document)
    assert "2 rows in 12 s on 2 CPUs (Python 3.12.1): 1 targets met, 1 missed." in rendered
    assert "| 3 | a row | 1.50 ms | — | — | ≤ 2 | ✅ |  |" in rendered
    assert "| 7 | another | 3.25 ms |" in rendered and rendered.endswith("after\n")
    assert mkdocs_hook.render("no marker\n", document) == "no marker\n"


def test_the_readme_stays_a_five_minute_read() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024, "README.md over 12 KB: the detail belongs in the site (docs/)"
    for section in ("about", "quickstart"):  # what the site includes from it
        assert f"<!-- --8<-- [start:{section}] -->" in readme and f"<!-- --8<-- [end:{section}] -->" in readme


def test_the_target_and_figure_markers_render_the_rows_they_name() -> None:
    document = {
        "rows": [
            {"target": "3", "name": "a row, 256 MiB", "value": 1.5, "unit": "ms", "baseline": 1.0, "ratio": 1.5,
             "met": True, "goal": "≤ 2x", "details": {"units": {"read_units": 3.0, "share": 0.135}}},
            {"target": "3", "name": "a row again", "value": 12.25, "unit": "MB/s", "met": False, "goal": "≥ 20"},
            {"target": "cost", "name": "GET /me", "value": 1.545834, "unit": "$/M", "met": None, "goal": "info"},
            {"target": "cost", "name": "GET /metadata/{id}", "value": 1.8, "unit": "$/M", "met": None, "goal": ""},
        ],
    }  # fmt: skip
    page = '# P\n\n<!-- bench:target 3 -->\n\nA row takes <!-- bench "a row, 256" --> (<!-- bench "a row," ratio -->),'
    page += ' <!-- bench "a row, 256" details.units.read_units --> read units'
    page += ' (<!-- bench "a row, 256" details.units.share% -->); <!-- bench "GET /me" --> per million,'
    page += ' <!-- bench "a row, 256" number --> over <!-- bench "a row, 256" baseline_number -->.\n'
    rendered = mkdocs_hook.render(page, document)
    assert "| a row, 256 MiB | 1.50 ms | 1 ms | 1.50x | ≤ 2x | ✅ |  |" in rendered
    assert "| a row again | 12.2 MB/s | — | — | ≥ 20 | ❌ |  |" in rendered
    assert "A row takes 1.50 ms (1.50x), 3 read units (14 %); 1.55 $/M per million, 1.50 over 1." in rendered
    assert mkdocs_hook.render('`<!-- bench "no such row" -->`', document) == '`<!-- bench "no such row" -->`'
    for wrong in ('<!-- bench "a row" -->', '<!-- bench "no such row" -->', '<!-- bench "a row, 256" details.x -->'):
        with pytest.raises(mkdocs_hook.MarkerError):
            mkdocs_hook.render(wrong, document)
    with pytest.raises(mkdocs_hook.MarkerError):
        mkdocs_hook.render("<!-- bench:target 99 -->", document)


def test_the_marks_are_drawn_without_an_emoji_font_but_code_keeps_them() -> None:
    page = "<p>met ✅ missed ❌</p><pre><code>✅ stays</code></pre><td>❌</td>"
    drawn = mkdocs_hook.glyphs(page)
    assert "✅" not in drawn.replace("<pre><code>✅ stays</code></pre>", "") and "❌" not in drawn
    assert drawn.count('<svg class="dfd-mark"') == 3 and 'aria-label="yes"' in drawn and 'aria-label="no"' in drawn
    assert "<pre><code>✅ stays</code></pre>" in drawn


def test_the_built_tables_carry_no_emoji_mark(site: Path) -> None:
    page = (site / "performance" / "index.html").read_text(encoding="utf-8")
    article = page[page.index("<article") : page.index("</article>")]
    outside_code = re.sub(r"<pre\b.*?</pre>", "", article, flags=re.DOTALL)
    assert "✅" not in outside_code and "❌" not in outside_code
    assert 'class="dfd-mark"' in article


def test_the_cost_rows_of_bench_json_state_the_codes_budgets() -> None:
    from dfdbench import rows_cost

    document = json.loads((ROOT / "docs" / "bench.json").read_text())
    priced = {row["name"]: row for row in document["rows"] if row["target"] == "cost"}
    assert sorted(priced) == sorted(rows_cost.BUDGETS), "every priced path has its budget, and only those"
    for name, row in priced.items():
        assert row["goal"] == rows_cost.goal(name, row["details"]), f"{name}: bench/run --only 17 states other budgets"


def test_a_bench_run_and_a_build_bring_every_quoting_page_up_to_date(tmp_path: Path) -> None:
    """A figure changed in (a copy of) docs/bench.json is the figure every page quoting it shows."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    document = json.loads((docs / "bench.json").read_text())
    changed = {"hash-first duplicate (409, no bytes sent)": 7.654321, "GET /me": 3.456789}
    for row in document["rows"]:
        if row["name"] in changed:
            row["value"] = row["details"]["total"] = changed[row["name"]]
    (docs / "bench.json").write_text(json.dumps(document))
    config = (ROOT / "mkdocs.yml").read_text()
    for relative in ("docs_dir: docs", "- README.md", "- bench/dfdbench/"):
        config = config.replace(relative, relative.replace(" ", f" {ROOT}/", 1).replace(f"{ROOT}/docs", str(docs)))
    (tmp_path / "mkdocs.yml").write_text(config)
    result = build(tmp_path, tmp_path / "mkdocs.yml")
    assert result.returncode == 0, result.stderr[-4000:]
    for page in ("performance", "design/cost"):
        text = text_of(tmp_path / "site" / page / "index.html")
        assert "7.65 $/M" in text and "3.46 $/M" in text, page


def test_the_pages_state_what_holds_without_issue_numbers_or_a_lab_notebook() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    numbered = [str(page.relative_to(ROOT)) for page in pages if ISSUE.search(page.read_text(encoding="utf-8"))]
    assert not numbered, f"issue numbers belong in git log, not in {numbered}"
    performance = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert len(performance.encode()) <= 25 * 1024, "docs/performance.md is a reference: each target, not each run"
    months = "January|February|March|April|May|June|July|August|September|October|November|December"
    assert not re.search(rf"load average|\b\d{{1,2}} ({months}) 20\d\d", performance), "a dated run or a load average"
    targets = sorted({row["target"] for row in json.loads((ROOT / "docs" / "bench.json").read_text())["rows"]})
    for target in targets:
        assert f"<!-- bench:target {target} -->" in performance, f"target {target}: no rendered rows on the page"


def test_a_partial_run_updates_its_targets_rows_in_the_published_run_and_keeps_the_others() -> None:
    row = {"name": "x", "value": 1.0, "unit": "ms", "met": True, "goal": ""}
    published = {
        "machine": {"cpus": 2, "python": "3.12.1"},
        "seconds": 100.0,
        "rows": [row | {"target": "1"}, row | {"target": "7", "name": "old 7"}, row | {"target": "cost"}],
        "throughput_points": [{"series": "a", "size": 1, "bytes_per_s": 1.0}],
    }
    fresh = [row | {"target": "7", "name": "new 7a"}, row | {"target": "7", "name": "new 7b"}]
    run = {"only": ["7"], "seconds": 9.0}
    merged = report.merge(published, fresh, [], run)
    assert [r["name"] for r in merged["rows"]] == ["x", "new 7a", "new 7b", "x"]
    assert merged["throughput_points"] == published["throughput_points"] and merged["updates"] == [run]
    assert mkdocs_hook.summary(merged).endswith(
        "4 targets met, 0 missed. Rows of 7 from later runs (bench/run --only N --update docs/bench.json)."
    )
    again = report.merge(merged, [row | {"target": "cost", "name": "priced"}], [], {"only": ["17"]})
    assert [r["name"] for r in again["rows"]] == ["x", "new 7a", "new 7b", "priced"] and len(again["updates"]) == 2
