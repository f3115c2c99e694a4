"""The one moto version the local stack and its tests run on: the one requirements/dev.lock pins.

dfdlocal patches moto internals (its S3 storage, its server app, its Step Functions service integrations) that
change between moto releases without notice; another release fails later, obscurely (moto 5.2.1 breaks the
reconcile tests' imports). The modules that patch moto check the installed version when they are imported, so
the stack and the tests fail at start, naming the version to install.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

LOCK = Path(__file__).resolve().parents[2] / "requirements" / "dev.lock"
_PIN = re.compile(r"^moto==(\S+)", re.MULTILINE)


class UnsupportedMoto(ImportError):
    """The installed moto is not the version dfdlocal's patches are written for."""


def supported(lock: Path = LOCK) -> str:
    """The moto version requirements/dev.lock pins."""
    found = _PIN.search(lock.read_text(encoding="utf-8"))
    if found is None:
        raise UnsupportedMoto(f"{lock} pins no moto version")
    return found.group(1)


def installed() -> str | None:
    try:
        return metadata.version("moto")
    except metadata.PackageNotFoundError:
        return None


def require_supported(version: str | None = None, *, lock: Path = LOCK) -> None:
    """Raise UnsupportedMoto unless `version` (default: the installed moto's) is the locked one."""
    version = installed() if version is None else version
    wanted = supported(lock)
    if version != wanted:
        found = f"moto {version} is installed" if version else "moto is not installed"
        raise UnsupportedMoto(
            f"{found}, but the local stack patches moto internals and supports moto {wanted} only"
            f" (requirements/dev.lock): run `make venv`, or pip install 'moto[server]=={wanted}'"
        )
