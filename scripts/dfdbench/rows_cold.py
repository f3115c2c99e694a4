"""Target 7: cold start. Per function: a fresh interpreter with a Lambda-like environment (tracing active, as
the template's `Tracing: Active`, and the invocation sampled) imports the handler module and serves one request
against the emulator; the baseline is a fresh interpreter that imports boto3 and builds the same clients (same
configuration). Both are timed from spawn to the line they print when done (interpreter exit is not part of a
cold start). Runs are interleaved, each pair at its own stack depth (DEPTHS); the figure is the median of the
paired ratios. The same handler run with an unsampled invocation (`Sampled=0`: no X-Ray SDK) is reported next to
it. `-X importtime` says where the time goes.

Bytecode: boto3 and Powertools are imported from their compiled .pyc files, so dfd's modules are compiled too
before the runs (hash-checked .pyc in functions/dfd's __pycache__, as a deployment package should ship them:
docs/performance.md); otherwise every run would compile dfd from source (this machine sets
PYTHONDONTWRITEBYTECODE), a cost the baseline never pays."""

from __future__ import annotations

import compileall
import copy
import json
import os
import py_compile
import re
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from dfdbench.harness import BUCKET, Bench, Row, function_environment, median
from dfdbench.rows_api import api_event

ROOT = Path(__file__).resolve().parents[2]
MARK = "@@bench-done"

# the clients each function builds to serve its first request, configured as dfd.aws builds them
_CLIENTS = {
    "dynamodb": "boto3.client('dynamodb', config=Config(retries={'max_attempts': 6, 'mode': 'adaptive'}, "
    "max_pool_connections=32))",
    "s3": "boto3.client('s3', config=Config(signature_version='s3v4', retries={'max_attempts': 6, "
    "'mode': 'adaptive'}))",
    "s3_ingest": "boto3.client('s3', config=Config(signature_version='s3v4', retries={'max_attempts': 6, "
    "'mode': 'adaptive'}, response_checksum_validation='when_required', max_pool_connections=64, "
    "tcp_keepalive=True))",
}
FUNCTIONS = {
    "upload": ["dynamodb", "s3"],
    "metadata": ["dynamodb"],
    "download": ["dynamodb", "s3"],
    "admin_stats": ["dynamodb"],
    "admin_hashes": ["dynamodb"],
    "ingest": ["dynamodb", "s3_ingest"],
}

# Each run imports at its own stack depth (argv's last): CPython 3.11 and 3.12 allocate and free a chunk of their
# frame stack whenever calls cross a chunk's end, so at some depths an import's loops cross it on every call
# (python/cpython#142183): urllib3.util.url's regular expressions took 41 ms instead of 12 at one depth (2,608 mmap
# calls against 415). Lambda imports a handler at a depth of its own; the runs spread over DEPTHS, handler and
# baseline at the same one, so no single depth decides the median.
DEPTHS = (0, 37, 74, 111, 18, 55, 92, 129, 9, 46, 83, 120)
_AT_DEPTH = """
def at_depth(n, body):
    return at_depth(n - 1, body) if n else body()
"""

_HANDLER = f"""
import time
started = time.perf_counter()
import importlib, json, os, sys
class Context:
    function_name = "bench"; memory_limit_in_mb = 256; aws_request_id = "cold-start"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    log_group_name = "/aws/lambda/bench"; log_stream_name = "bench"
    def get_remaining_time_in_millis(self): return 10000
{_AT_DEPTH}
def run():
    module = importlib.import_module(sys.argv[1])
    imported = time.perf_counter()
    module.handler(json.loads(sys.argv[2]), Context())
    return imported
imported = at_depth(int(sys.argv[3]), run)
done = time.perf_counter()
sys.stdout.write("\\n{MARK} %.6f %.6f\\n" % (imported - started, done - imported)); sys.stdout.flush()
os._exit(0)
"""

_BASELINE = f"""
import time
started = time.perf_counter()
import os, sys
{_AT_DEPTH}
def run():
    import boto3
    from botocore.config import Config
{{clients}}
at_depth(int(sys.argv[1]), run)
done = time.perf_counter()
sys.stdout.write("\\n{MARK} %.6f 0\\n" % (done - started)); sys.stdout.flush()
os._exit(0)
"""


def lambda_environment(endpoint: str, function: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_", "DDB_", "MOTO"))}
    env.update(function_environment(endpoint))
    for name in ("POWERTOOLS_TRACE_DISABLED", "POWERTOOLS_METRICS_DISABLED"):
        env.pop(name, None)
    env.update(
        {
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "AWS_LAMBDA_FUNCTION_NAME": f"dfd-{function}",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/dfd-{function}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "2026/11/22/[$LATEST]bench",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
            "LAMBDA_TASK_ROOT": str(ROOT / "functions"),
            "_HANDLER": f"dfd.handlers.{function}.handler",
            "_X_AMZN_TRACE_ID": "Root=1-67407c00-0123456789abcdef01234567;Parent=0123456789abcdef;Sampled=1",
            "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        }
    )
    return env


def _spawn(args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from spawn to the done line, and the (import, first call) split the child measured."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(MARK):
            elapsed = time.perf_counter() - started
            _, imported, first = line.split()
            child.wait(30)
            return elapsed, float(imported), float(first)
    _, errors = child.communicate(timeout=30)
    raise RuntimeError(f"{' '.join(args[:3])} failed: {errors[-3000:]}")


def _events(bench: Bench, runs: int) -> dict[str, list[dict[str, Any]]]:
    """One request per run and function (an ingest run gets a fresh object: a new content to store)."""
    from dfd import deps
    from dfd.events import ObjectRef

    stored = bench.put(4096)
    result = deps.ingestor().ingest(ObjectRef(BUCKET, stored))
    upload_id = stored.split("/", 1)[1]
    template = json.loads((ROOT / "events" / "sqs-s3-put.json").read_text())["Records"][0]
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _ in range(runs + 1):
        key = bench.put(64 * 1024)
        record = copy.deepcopy(template)
        body = json.loads(record["body"])
        body["Records"][0]["s3"]["object"]["key"] = key
        record.update(messageId=str(uuid.uuid4()), body=json.dumps(body))
        events["ingest"].append({"Records": [record]})
        events["upload"].append(api_event("POST", "/upload", body={"filename": "a.txt", "size": 1234}))
        events["metadata"].append(api_event("GET", f"/metadata/{upload_id}"))
        events["download"].append(api_event("GET", f"/download/{result.hash}"))
        events["admin_stats"].append(api_event("GET", "/admin/stats"))
        events["admin_hashes"].append(api_event("GET", "/admin/hashes", {"limit": "50"}))
    return events


def import_breakdown(env: dict[str, str], module: str) -> dict[str, float]:
    """Milliseconds of import time by top-level package (self times summed), from `-X importtime`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    totals: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            totals[match.group(2).split(".")[0]] += int(match.group(1)) / 1000
    return dict(sorted(totals.items(), key=lambda kv: -kv[1])[:8])


def xray_import_ms(env: dict[str, str]) -> float:
    code = (
        "import time, boto3, aws_lambda_powertools\nstarted = time.perf_counter()\nimport aws_xray_sdk.core\n"
        "print((time.perf_counter() - started) * 1000)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    return float(done.stdout.strip() or "nan")


def compile_dfd() -> None:
    """dfd's modules as compiled bytecode (hash-checked: an edited source is still recompiled, never stale)."""
    compileall.compile_dir(
        ROOT / "functions" / "dfd", quiet=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )


def cold_start(bench: Bench) -> list[Row]:
    options = bench.options
    runs = options.cold_runs if not options.quick else min(options.cold_runs, 3)
    events = _events(bench, runs * 2)
    compile_dfd()
    rows: list[Row] = []
    for function, clients in FUNCTIONS.items():
        env = lambda_environment(bench.url, function)
        unsampled = {**env, "_X_AMZN_TRACE_ID": env["_X_AMZN_TRACE_ID"].replace("Sampled=1", "Sampled=0")}
        baseline_code = _BASELINE.format(clients="\n".join("    " + _CLIENTS[c] for c in clients))
        module = f"dfd.handlers.{function}"
        _spawn(["-c", _HANDLER, module, json.dumps(events[function][-1]), "0"], env)  # warm the page cache
        ratios: list[float] = []
        unsampled_ratios: list[float] = []
        handler_s: list[float] = []
        baseline_s: list[float] = []
        splits: list[tuple[float, float]] = []
        for run in range(runs):
            depth = str(DEPTHS[run % len(DEPTHS)])
            base, _, _ = _spawn(["-c", baseline_code, depth], env)
            total, imported, first = _spawn(["-c", _HANDLER, module, json.dumps(events[function][run]), depth], env)
            plain, _, _ = _spawn(["-c", _HANDLER, module, json.dumps(events[function][runs + run]), depth], unsampled)
            ratios.append(total / base)
            unsampled_ratios.append(plain / base)
            handler_s.append(total)
            baseline_s.append(base)
            splits.append((imported, first))
        ratio = median(ratios)
        breakdown = import_breakdown(env, module)
        rows.append(
            Row(
                "7",
                f"cold start {function} (import + 1st request)",
                median(handler_s) * 1000,
                "ms",
                median(baseline_s) * 1000,
                "boto3 + " + " + ".join(clients),
                ratio,
                "≤ 1.25x",
                ratio <= 1.25,
                f"import {median([s[0] for s in splits]) * 1000:.0f} ms, "
                f"1st request {median([s[1] for s in splits]) * 1000:.0f} ms; "
                f"unsampled (no X-Ray SDK) {median(unsampled_ratios):.2f}x",
                {"ratios": ratios, "unsampled_ratios": unsampled_ratios, "import_ms_by_package": breakdown},
            )
        )
    rows[-1].details["xray_sdk_import_ms_in_lambda"] = xray_import_ms(lambda_environment(bench.url, "ingest"))
    return rows
