"""The operator tools against the running stack: scripts/upload (hash first, 409 skips the transfer) and
scripts/replay (re-delivery changes nothing)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.e2e.e2e_helpers import ROOT, RunningStack, nothing_to_reap, settled, tool, wait_until

pytestmark = pytest.mark.e2e


def test_upload_tool_then_replay_tool(stack: RunningStack, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    folder = tmp_path / "photos"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.txt").write_text(f"{tag} alpha\n")
    (folder / "nested" / "a-copy.txt").write_text(f"{tag} alpha\n")
    (folder / "b.bin").write_bytes(tag.encode() * 1000)
    (folder / "empty.txt").write_bytes(b"")

    first = tool(stack, "upload", str(folder), "--api", stack.api_url, "--endpoint-url", stack.aws_url, "--no-progress")
    assert first.returncode == 1, first.stdout + first.stderr  # the empty file is refused
    assert "4 files: 2 stored, 0 duplicate, 1 skipped by the hash precheck, 1 failed" in first.stdout, first.stdout

    again = tool(
        stack,
        "upload",
        str(folder / "a.txt"),
        str(folder / "b.bin"),
        "--api",
        stack.api_url,
        "--token",
        stack.token("alice"),
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 files: 0 stored, 0 duplicate, 2 skipped by the hash precheck, 0 failed" in again.stdout
    assert "bytes uploaded: 0 " in again.stdout

    # a reap during the replay would move total_files: the replay's "nothing changed" compares the counters
    wait_until(lambda: settled(stack) and nothing_to_reap(stack), timeout=150)
    replay = tool(
        stack,
        "replay",
        "--endpoint-url",
        stack.aws_url,
        "--lambda-url",
        stack.lambda_url,
        "--prefix",
        "uploads/",
        "-n",
        "3",
        "--via",
        "both",
        "--concurrency",
        "4",
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "nothing changed" in replay.stdout


def test_upload_without_waiting_and_reconcile_on_demand(stack: RunningStack, tmp_path: Path) -> None:
    data = tmp_path / "later.txt"
    data.write_text(f"{uuid.uuid4().hex} not awaited\n")
    quick = tool(
        stack,
        "upload",
        str(data),
        "--api",
        stack.api_url,
        "--user",
        "carol",
        "--endpoint-url",
        stack.aws_url,
        "--wait",
        "0",
    )
    assert quick.returncode == 0, quick.stdout + quick.stderr
    assert "1 uploaded (ingest not awaited)" in quick.stdout
    wait_until(lambda: settled(stack), timeout=60)
    reconcile = tool(stack, "reconcile", "--endpoint-url", stack.aws_url)
    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    summary = json.loads(reconcile.stdout)
    assert summary["drift"] == {"files": 0, "bytes": 0}
    assert {"redriven", "expired", "orphans"} <= set(summary)


def test_tools_find_the_stack_by_its_port_variables_and_say_when_it_is_not_there(stack: RunningStack) -> None:
    """make run's DFD_AWS_PORT moves the tools' default too; an endpoint that does not answer is one line."""
    port = stack.aws_url.rsplit(":", 1)[1]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DFD_AWS_PORT": port}
    audit = subprocess.run(
        [sys.executable, "-m", "dfdtools.audit", "--unsettled"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert audit.returncode in (0, 1), audit.stderr  # a report either way, from the stack on that port
    assert "invariant" in audit.stdout.lower() or "holds" in audit.stdout, audit.stdout

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = str(closed.getsockname()[1])  # bound, never listening: connections are refused
        for module in ("audit", "replay", "reconcile"):
            args = ["--key", "uploads/x"] if module == "replay" else []
            result = subprocess.run(
                [sys.executable, "-m", f"dfdtools.{module}", *args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={**env, "DFD_AWS_PORT": nobody},
                timeout=120,
            )
            assert result.returncode == 2, (module, result.stdout, result.stderr)
            assert "Traceback" not in result.stderr and f":{nobody}" in result.stderr, (module, result.stderr)
            assert "is `make run` running?" in result.stderr
