"""`make help` lists every target of the Makefile with what it does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_help_lists_every_target_with_its_description() -> None:
    targets = re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    shown = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    described = dict(re.findall(r"^  ([a-z][a-z-]*) +(\S.*)$", shown, flags=re.MULTILINE))
    assert sorted(described) == sorted(set(targets))
    assert "deploy" in described and "screenshots" in described and "run" in described
