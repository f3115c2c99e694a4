"""The local stack and its tests run on the moto requirements/dev.lock pins, and refuse any other at start."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dfdlocal import motoversion


def test_the_supported_version_is_the_locked_one_and_is_installed() -> None:
    locked = [line for line in motoversion.LOCK.read_text().splitlines() if line.startswith("moto==")]
    assert locked == [f"moto=={motoversion.supported()}"]
    assert motoversion.installed() == motoversion.supported()
    motoversion.require_supported()  # the venv (make venv) installs the lock: accepted


def test_pyproject_allows_only_the_locked_moto() -> None:
    """`pip install -e '.[dev]'` without the lock cannot pick a moto the patches were not written for."""
    pyproject = (motoversion.LOCK.parents[1] / "pyproject.toml").read_text()
    specs = re.findall(r'"moto\[[^\]]*\]([^"]*)"', pyproject)
    assert specs == [f"=={motoversion.supported()}"]


@pytest.mark.parametrize("other", ["5.2.1", "5.1.10", "6.0.0", None])
def test_another_moto_is_refused_naming_the_supported_version(other: str | None) -> None:
    with pytest.raises(motoversion.UnsupportedMoto) as refused:
        motoversion.require_supported(other or "", lock=motoversion.LOCK)
    message = str(refused.value)
    assert f"supports moto {motoversion.supported()} only" in message and "make venv" in message
    assert (f"moto {other} is installed" if other else "moto is not installed") in message


def test_a_lock_without_moto_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "dev.lock"
    lock.write_text("boto3==1.0\n")
    with pytest.raises(motoversion.UnsupportedMoto, match="pins no moto version"):
        motoversion.require_supported("5.2.5", lock=lock)


def test_the_stack_fails_at_start_under_another_moto() -> None:
    """Importing a module that patches moto (the stack imports them first) raises at once, with the message."""
    script = (
        "from importlib import metadata\n"
        "real = metadata.version\n"
        "metadata.version = lambda name: '5.2.1' if name == 'moto' else real(name)\n"
        "import dfdlocal.s3store\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "UnsupportedMoto: moto 5.2.1 is installed" in run.stderr
    assert f"supports moto {motoversion.supported()} only" in run.stderr
