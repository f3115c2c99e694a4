"""What a function's init loads, in a fresh interpreter as Lambda starts one (its cold start: docs/performance.md,
target 7): never boto3 (the clients are botocore's, the attribute values dfd's own: importing boto3 costs ~25 ms),
in a read function nothing of the write side, in an HTTP function none of Powertools' other resolvers and no
asyncio (dfd.lazyinit), not even once a sampled request has loaded the X-Ray SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import dfd.handlers

HANDLERS = sorted(p.stem for p in Path(dfd.handlers.__file__).parent.glob("*.py") if p.stem != "__init__")
READS = ("metadata", "download", "admin_stats", "admin_hashes")
WRITE_SIDE = {
    "dfd.uploads.ports",
    "dfd.uploads.service",
    "dfd.uploads.multipart",
    "dfd.deletes.service",
    "dfd.ingest.service",
}
HTTP = ("upload", "uploads", "multipart", "metadata", "download", "admin_stats", "admin_hashes", "me", "tokens", "lfs")
# what the event handler package's __init__ and the data classes package's __init__ import besides what an HTTP
# API function uses, and what wrapt's (the X-Ray SDK's) imports (asyncio)
OTHER_RESOLVERS = {
    "aws_lambda_powertools.event_handler.appsync",
    "aws_lambda_powertools.event_handler.bedrock_agent",
    "aws_lambda_powertools.event_handler.vpc_lattice",
    "aws_lambda_powertools.utilities.data_classes.kinesis_firehose_event",
    "aws_lambda_powertools.utilities.data_classes.s3_batch_operation_event",
    "asyncio",
}


@cache
def loaded(handler: str, then: str = "") -> frozenset[str]:
    """The modules loaded once the handler module is imported (init, without a request), and `then` run."""
    code = f"import sys, dfd.handlers.{handler}\n{then}\nprint(' '.join(sys.modules))"
    # no request is made: the endpoint only keeps a stray call from reaching AWS; the queue is the reconcile's
    env = os.environ | {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "INGEST_QUEUE_URL": "http://127.0.0.1:9/q"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return frozenset(done.stdout.split())


def test_every_function_is_checked() -> None:
    assert {"ingest", "upload", "metadata", "lfs", "publisher", "reconcile"} <= set(HANDLERS)


@pytest.mark.parametrize("handler", HANDLERS)
def test_init_never_imports_boto3(handler: str) -> None:
    modules = loaded(handler)
    assert "botocore.client" in modules
    assert not {m for m in modules if m.split(".")[0] in ("boto3", "s3transfer")}


@pytest.mark.parametrize("handler", READS)
def test_read_functions_load_nothing_of_the_write_side(handler: str) -> None:
    modules = loaded(handler)
    assert "dfd.core.objects" in modules
    assert not modules & WRITE_SIDE


@pytest.mark.parametrize("handler", HTTP)
def test_http_functions_load_no_other_resolver_and_no_asyncio(handler: str) -> None:
    modules = loaded(handler)
    assert "aws_lambda_powertools.event_handler.api_gateway" in modules
    assert not modules & OTHER_RESOLVERS
    # a sampled first request imports the X-Ray SDK (dfd.core.observability): wrapt's __init__ would import asyncio
    assert not loaded(handler, "import aws_xray_sdk.core") & OTHER_RESOLVERS


def test_every_http_function_is_checked() -> None:
    folder = Path(dfd.handlers.__file__).parent
    assert set(HTTP) == {h for h in HANDLERS if "make_app" in (folder / f"{h}.py").read_text()}


def test_bench_row_7_runs_the_runtimes_python_with_the_code_directory_read_only(tmp_path: Path) -> None:
    """The harness of bench row 7 (dfdbench.rows_cold): a child of the runtime's version (3.12) finds its code
    directory read-only, as Lambda's /var/task, and writes no bytecode."""
    from dfdbench.rows_cold import MARK, Spawner, runtime_python

    code = tmp_path / "task"
    code.mkdir()
    (code / "probe.py").write_text("import sys\nVERSION = sys.version_info[:2]\n")
    child = (
        "import os, sys, probe\n"
        "try:\n    open(os.path.join(os.environ['LAMBDA_TASK_ROOT'], 'x'), 'w').close(); wrote = 1\n"
        "except OSError:\n    wrote = 0\n"
        f"print('{MARK}', wrote, int(probe.VERSION == (3, 12) and sys.flags.dont_write_bytecode))\n"
    )
    spawner = Spawner(runtime_python(), [code])
    try:
        env = {"PATH": os.environ["PATH"], "LAMBDA_TASK_ROOT": str(code), "PYTHONPATH": str(code)}
        _, wrote, as_lambda = spawner.spawn(["-c", child], env | {"PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        spawner.close()
        subprocess.run(["chmod", "-R", "u+w", str(code)], check=False)
    assert as_lambda == 1
    if spawner.read_only == "read-only bind mounts" or os.geteuid() != 0:
        assert wrote == 0
    assert sorted(p.name for p in code.iterdir()) == ["probe.py"]  # no __pycache__, nothing written
