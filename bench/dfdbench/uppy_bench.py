"""Target 13: the upload page (Uppy + @dfd/uppy) in headless Chromium on the local stack, one new file from the
moment it is chosen ("dropped") until dfd reports it stored, against the raw transfer alone: the span in which
the browser's part PUTs were on the wire (first PUT sent to last PUT answered) in the same upload.

``python -m dfdbench.uppy_bench --size-mib N`` starts the local stack (mpupload.local_stack, unlimited quota), signs
in as alice and prints one JSON line: ``total_s``, ``hash_s`` (the plugin's fingerprinting), ``transfer_s``,
``after_s`` (complete + ingest, from the last PUT to stored), ``parts``. 1 GiB is the row's size (about 2 minutes
on 2 quiet cores, docs/performance.md); ``--quick`` takes 256 MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Request, expect, sync_playwright

from dfdbench.harness import Options, Row
from dfdbench.mpupload import local_stack, make_file

MIB = 1024 * 1024
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def measure(ready: dict[str, Any], path: Path, digest: str) -> dict[str, Any]:
    puts: dict[str, list[float]] = {}

    def sent(req: Request) -> None:
        if req.method == "PUT":
            puts[req.url] = [time.perf_counter(), 0.0]

    def answered(req: Request) -> None:
        if req.method == "PUT" and req.url in puts:
            puts[req.url][1] = time.perf_counter()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("request", sent)
        page.on("requestfinished", answered)
        page.goto(ready["api_url"] + "/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(ready["cognito"]["password"])
        page.get_by_test_id("signin-submit").click()
        expect(page.locator("html")).to_have_attribute("data-auth", "signed-in", timeout=30_000)
        hashed: list[float] = []
        page.expose_function("benchHashed", lambda: hashed.append(time.perf_counter()))
        page.evaluate("() => window.dfdUppy.on('preprocess-complete', () => window.benchHashed())")
        start = time.perf_counter()
        page.set_input_files('[data-testid="file-input"]', path)
        row = page.locator("[data-testid=file-row]").first
        expect(row).to_have_attribute("data-status", "stored", timeout=1_800_000)
        total = time.perf_counter() - start
        assert row.get_attribute("data-sha256") == digest
        browser.close()
    spans = list(puts.values())
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    return {
        "size": path.stat().st_size,
        "total_s": total,
        "hash_s": (hashed[0] - start) if hashed else None,
        "transfer_s": last - first,
        "after_s": start + total - last,
        "parts": len(spans),
    }


def row(options: Options) -> list[Row]:
    """1 GiB (256 MiB with --quick)."""
    size_mib = 256 if options.quick else 1024
    command = [sys.executable, "-m", "dfdbench.uppy_bench", "--size-mib", str(size_mib)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"uppy_bench failed: {done.stderr[-3000:]}")
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    total, transfer = measured["total_s"], measured["transfer_s"]
    hashed = measured["hash_s"]
    return [
        Row(
            "13",
            f"upload page (Uppy + @dfd/uppy), {size_mib} MiB new file, drop to stored (local stack, Chromium)",
            total,
            "s",
            transfer,
            "its part PUTs on the wire",
            total / transfer,
            "info",
            None,
            f"{measured['parts']} parts; hash known after {hashed:.1f} s (files of 64 MiB or more are sent while "
            f"hashed), complete + ingest after the last PUT {measured['after_s']:.1f} s (moto joins the parts, the "
            "ingest hashes them)",
            measured,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, local_stack(Path(scratch), {"TenantQuotaBytes": "0"}) as ready:
        path, digest = make_file(Path(scratch), args.size_mib * MIB)
        print(json.dumps(measure(ready, path, digest)))


if __name__ == "__main__":
    main()
