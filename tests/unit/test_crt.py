"""awscrt is a dependency (dfd.ingest.crc64nvme), and with it importable botocore would sign every request through
the CRT: BOTO_DISABLE_CRT=true keeps botocore's own SigV4 wherever the code runs — on Lambda (template.yaml's
Globals), on the local stack, in the tools, the bench and this test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIGNERS = ("v4", "v4-query", "s3v4", "s3v4-query")
# what a fresh interpreter reports: whether botocore would sign through the CRT, and its signers' modules
PROBE = (
    "import json, sys\n"
    "for name in sys.argv[1:]: __import__(name)\n"
    "import botocore.auth, botocore.compat\n"
    f"print(json.dumps([botocore.compat.HAS_CRT, [botocore.auth.AUTH_TYPE_MAPS[n].__module__ for n in {SIGNERS!r}],"
    " '_awscrt' in sys.modules]))"
)


def _probe(*modules: str, env: dict[str, str] | None = None) -> tuple[bool, list[str]]:
    has_crt, signers, _ = _probe_all(*modules, env=env)
    return has_crt, signers


def _probe_all(*modules: str, env: dict[str, str] | None = None) -> tuple[bool, list[str], bool]:
    """Whether botocore would sign through the CRT, its signers' modules, and whether awscrt's native library is
    loaded, in a fresh interpreter (without BOTO_DISABLE_CRT unless `env` sets it) that imported `modules` first."""
    clean = {k: v for k, v in os.environ.items() if k != "BOTO_DISABLE_CRT"} | (env or {})
    path = os.pathsep.join(str(ROOT / part) for part in ("functions", "scripts", "bench"))
    clean["PYTHONPATH"] = path + (os.pathsep + clean["PYTHONPATH"] if clean.get("PYTHONPATH") else "")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, env=clean, timeout=120, check=True
    )
    has_crt, modules_of, native = json.loads(done.stdout.strip().splitlines()[-1])
    return bool(has_crt), list(modules_of), bool(native)


def test_this_session_signs_with_botocores_own_sigv4() -> None:
    import botocore.auth
    import botocore.compat

    assert botocore.compat.HAS_CRT is False
    assert [botocore.auth.AUTH_TYPE_MAPS[name] for name in SIGNERS] == [
        botocore.auth.SigV4Auth,
        botocore.auth.SigV4QueryAuth,
        botocore.auth.S3SigV4Auth,
        botocore.auth.S3SigV4QueryAuth,
    ]


def test_without_the_setting_botocore_would_sign_through_the_crt() -> None:
    """The setting is what decides: awscrt is installed, and a process that sets nothing signs through it."""
    has_crt, signers = _probe()
    assert has_crt is True
    assert set(signers) == {"botocore.crt.auth"}


@pytest.mark.parametrize("package", ["dfdlocal", "dfdtools", "dfdbench"])
def test_the_local_stack_the_tools_and_the_bench_set_it_before_botocore(package: str) -> None:
    has_crt, signers = _probe(package)
    assert has_crt is False
    assert set(signers) == {"botocore.auth"}


def test_every_function_gets_it_from_the_templates_globals() -> None:
    from dfdlocal.template import TEMPLATE, load_template

    template: Any = load_template(TEMPLATE)
    assert template["Globals"]["Function"]["Environment"]["Variables"]["BOTO_DISABLE_CRT"] == "true"
    has_crt, signers = _probe(env={"BOTO_DISABLE_CRT": "true"})
    assert (has_crt, set(signers)) == (False, {"botocore.auth"})


def test_the_local_stacks_functions_get_it_from_the_template() -> None:
    from dfdlocal.template import TEMPLATE, read_model

    model = read_model(TEMPLATE, "http://127.0.0.1:9")
    assert model.environment["BOTO_DISABLE_CRT"] == "true"


def test_a_function_imports_no_crt_for_botocore_and_only_segmentfunction_loads_awscrt() -> None:
    """dfd's package marks awscrt.auth absent before botocore is imported: even without the variable no function
    signs through the CRT, and none but SegmentFunction (its CRC64NVME) loads awscrt's native library."""
    assert _probe_all("dfd.handlers.ingest") == (False, ["botocore.auth"] * len(SIGNERS), False)
    assert _probe_all("dfd.handlers.segment") == (False, ["botocore.auth"] * len(SIGNERS), True)
