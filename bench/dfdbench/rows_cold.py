"""Target 7: cold start, of the artifact as Lambda runs it. The artifact is built by functions/Makefile (what `sam
build` runs: the pinned wheels and dfd, compiled by the runtime's Python 3.12) for this machine's architecture.
Per function: a fresh interpreter of the runtime's version (3.12, the one functions/Makefile compiles with) with a
Lambda-like environment (tracing active, as the template's `Tracing: Active`, and the invocation sampled), the
artifact as its code directory (first on sys.path, read-only, PYTHONDONTWRITEBYTECODE set: as /var/task), imports
the handler module and serves one request against the emulator; the baseline is a fresh 3.12 interpreter that
imports boto3 (installed and compiled by 3.12's pip, as the runtime's own copy) and builds the same clients (same
configuration). Both are timed from spawn to the line they print when done (interpreter exit is not part of a
cold start). Runs are interleaved, each set at its own stack depth (DEPTHS); the figure is the median of the
paired ratios. Reported next to it: the same handler on an unsampled invocation (`Sampled=0`: no X-Ray SDK), and
from the artifact without its bytecode (what shipped before: every module compiled at every cold start).
`-X importtime` says where the time goes.

Read-only: the children are spawned from inside a mount namespace where both code directories are read-only bind
mounts (unshare(1)); where that is refused, the directories lose their write bits instead (which root ignores:
the row says which)."""

from __future__ import annotations

import copy
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from dfdbench.harness import BUCKET, Bench, Row, function_environment, median
from dfdbench.rows_api import api_event

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "functions"
MARK = "@@bench-done"
ARCHITECTURES = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}  # platform.machine() -> Lambda's


def baseline_clients() -> dict[str, str]:
    """The clients each function builds to serve its first request, made by boto3 with the configuration
    dfd.adapters.aws gives them (dfd.core.retry's standard-mode attempts and timeouts, as on this environment's
    endpoint)."""
    from dfd.adapters.aws import s3_addressing
    from dfd.core.retry import API_CALLS, OBJECT_READS

    api, reads, addressing = API_CALLS.config(), OBJECT_READS.config(), s3_addressing()
    return {
        "dynamodb": f"boto3.client('dynamodb', config=Config(**{api!r}, max_pool_connections=32))",
        "s3": f"boto3.client('s3', config=Config(signature_version='s3v4', s3={addressing!r}, **{api!r}))",
        "s3_ingest": f"boto3.client('s3', config=Config(signature_version='s3v4', s3={addressing!r}, **{reads!r}, "
        "response_checksum_validation='when_required', max_pool_connections=64, tcp_keepalive=True))",
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


# The spawner: reads one JSON request a line ({"args", "env"}), runs the runtime's interpreter with them, answers
# the seconds from spawn to the done line and the (import, first call) split the child measured.
_SPAWNER = f"""
import json, subprocess, sys, time
for request in sys.stdin:
    request = json.loads(request)
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, *request["args"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=request["env"])
    answer = None
    for line in child.stdout:
        if line.startswith("{MARK}"):
            elapsed = time.perf_counter() - started
            _, imported, first = line.split()
            child.wait(30)
            answer = [elapsed, float(imported), float(first)]
            break
    if answer is None:
        answer = {{"error": child.communicate(timeout=30)[1][-3000:]}}
    print(json.dumps(answer), flush=True)
"""


class Spawner:
    """Spawns the runtime's interpreter with the code directories read-only, as Lambda's /var/task is: from a
    mount namespace where they are read-only bind mounts, else with their write bits removed."""

    def __init__(self, runtime: Path, read_only: list[Path]) -> None:
        mounts = " && ".join(f'mount --bind -o ro "{path}" "{path}"' for path in read_only)
        probe = shutil.which("unshare") and subprocess.run(
            ["unshare", "--mount", "--map-root-user", "sh", "-c", f"{mounts} && ! touch '{read_only[0]}/.w'"],
            capture_output=True,
            check=False,
        )
        if probe and probe.returncode == 0:
            command = ["unshare", "--mount", "--map-root-user", "sh", "-c", f'{mounts} && exec "$0" "$@"']
            self.read_only = "read-only bind mounts"
        else:
            (read_only[0] / ".w").unlink(missing_ok=True)
            for path in read_only:
                subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
            command = []
            self.read_only = "write bits removed" + (" (root ignores them)" if os.geteuid() == 0 else "")
        self.process = subprocess.Popen(
            [*command, str(runtime), "-S", "-c", _SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def spawn(self, args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"args": ["-S", *args], "env": env}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        if isinstance(answer, dict):
            raise RuntimeError(f"{' '.join(args[1:3])[:200]} failed: {answer['error']}")
        elapsed, imported, first = answer
        return float(elapsed), float(imported), float(first)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def _events(bench: Bench, runs: int) -> dict[str, list[dict[str, Any]]]:
    """One request per run and function (an ingest run gets a fresh object: a new content to store)."""
    from dfd import deps
    from dfd.core.notifications import ObjectRef

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


def import_breakdown(runtime: Path, env: dict[str, str], module: str) -> dict[str, float]:
    """Milliseconds of import time by top-level package (self times summed), from `-X importtime`."""
    done = subprocess.run(
        [str(runtime), "-S", "-X", "importtime", "-c", f"import {module}"],
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


def xray_import_ms(runtime: Path, env: dict[str, str]) -> float:
    code = (
        "import time, botocore.session, aws_lambda_powertools\nstarted = time.perf_counter()\n"
        "import aws_xray_sdk.core\nprint((time.perf_counter() - started) * 1000)"
    )
    done = subprocess.run(
        [str(runtime), "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    return float(done.stdout.strip() or "nan")


def runtime_python() -> Path:
    """The runtime's interpreter, as functions/Makefile finds it (or its one-line error)."""
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(FUNCTIONS_DIR), "runtime-python"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return Path(done.stdout.strip())


def build_artifacts(folder: Path, runtime: Path) -> tuple[Path, Path, Path]:
    """(the artifact as functions/Makefile builds it for this machine, the same without bytecode, the baseline's
    boto3 installed by the runtime's pip)."""
    artifact, plain, baseline = folder / "artifact", folder / "no-bytecode", folder / "baseline"
    machine = ARCHITECTURES[platform.machine()]
    settings = [f"ARTIFACTS_DIR={artifact}", f"ARCH_IngestFunction={machine}", f"PYTHON={sys.executable}"]
    subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(FUNCTIONS_DIR), "build-IngestFunction", *settings],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.copytree(artifact, plain, ignore=shutil.ignore_patterns("__pycache__"))
    pins = dict(
        line.split("==", 1) for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines() if "==" in line
    )
    install = [str(runtime), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"]
    subprocess.run(
        [*install, str(baseline), f"boto3=={pins['boto3'].split()[0]}"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return artifact, plain, baseline


def _code_environment(env: dict[str, str], code: Path) -> dict[str, str]:
    """The environment of an interpreter whose code directory is `code` (Lambda: /var/task, first on sys.path)."""
    return {**env, "LAMBDA_TASK_ROOT": str(code), "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}


def _files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def cold_start(bench: Bench) -> list[Row]:
    options = bench.options
    runs = options.cold_runs if not options.quick else min(options.cold_runs, 3)
    events = _events(bench, runs * 3)
    runtime = runtime_python()
    with tempfile.TemporaryDirectory(prefix="dfd-cold-") as folder:
        artifact, plain, baseline_code_dir = build_artifacts(Path(folder), runtime)
        before = {path: _files(path) for path in (artifact, plain)}
        spawner = Spawner(runtime, [artifact, plain, baseline_code_dir])
        try:
            rows = _cold_rows(bench, events, runs, runtime, spawner, (artifact, plain, baseline_code_dir))
        finally:
            spawner.close()
            subprocess.run(["chmod", "-R", "u+w", folder], check=False)
        assert {path: _files(path) for path in (artifact, plain)} == before, "the code directories were written"
    for row in rows:
        row.details["code_directory"] = spawner.read_only
    return rows


def _cold_rows(
    bench: Bench,
    events: dict[str, list[dict[str, Any]]],
    runs: int,
    runtime: Path,
    spawner: Spawner,
    folders: tuple[Path, Path, Path],
) -> list[Row]:
    artifact, plain, baseline_code_dir = folders
    rows: list[Row] = []
    version = subprocess.run([str(runtime), "-V"], capture_output=True, text=True, check=False).stdout.strip()
    for function, clients in FUNCTIONS.items():
        lambda_env = lambda_environment(bench.url, function)
        env = _code_environment(lambda_env, artifact)
        unsampled = {**env, "_X_AMZN_TRACE_ID": env["_X_AMZN_TRACE_ID"].replace("Sampled=1", "Sampled=0")}
        no_bytecode = _code_environment(lambda_env, plain)
        baseline_env = _code_environment(lambda_env, baseline_code_dir)
        baseline_code = _BASELINE.format(clients="\n".join("    " + baseline_clients()[c] for c in clients))
        module = f"dfd.handlers.{function}"
        spawner.spawn(["-c", _HANDLER, module, json.dumps(events[function][-1]), "0"], env)  # warm the page cache
        ratios: list[float] = []
        unsampled_ratios: list[float] = []
        plain_ratios: list[float] = []
        handler_s: list[float] = []
        baseline_s: list[float] = []
        plain_s: list[float] = []
        splits: list[tuple[float, float]] = []
        for run in range(runs):
            depth = str(DEPTHS[run % len(DEPTHS)])
            base, _, _ = spawner.spawn(["-c", baseline_code, depth], baseline_env)
            total, imported, first = spawner.spawn(
                ["-c", _HANDLER, module, json.dumps(events[function][run]), depth], env
            )
            sampled_off, _, _ = spawner.spawn(
                ["-c", _HANDLER, module, json.dumps(events[function][runs + run]), depth], unsampled
            )
            compiling, _, _ = spawner.spawn(
                ["-c", _HANDLER, module, json.dumps(events[function][2 * runs + run]), depth], no_bytecode
            )
            ratios.append(total / base)
            unsampled_ratios.append(sampled_off / base)
            plain_ratios.append(compiling / base)
            handler_s.append(total)
            baseline_s.append(base)
            plain_s.append(compiling)
            splits.append((imported, first))
        ratio = median(ratios)
        breakdown = import_breakdown(runtime, env, module)
        rows.append(
            Row(
                "7",
                f"cold start {function}, built artifact (import + 1st request)",
                median(handler_s) * 1000,
                "ms",
                median(baseline_s) * 1000,
                "boto3 + " + " + ".join(clients),
                ratio,
                "≤ 1.25x",
                ratio <= 1.25,
                f"import {median([s[0] for s in splits]) * 1000:.0f} ms, "
                f"1st request {median([s[1] for s in splits]) * 1000:.0f} ms; "
                f"unsampled (no X-Ray SDK) {median(unsampled_ratios):.2f}x; "
                f"without bytecode {median(plain_ratios):.2f}x ({median(plain_s) * 1000:.0f} ms)",
                {
                    "runtime": version,
                    "ratios": ratios,
                    "unsampled_ratios": unsampled_ratios,
                    "no_bytecode_ratios": plain_ratios,
                    "no_bytecode_ms": [s * 1000 for s in plain_s],
                    "import_ms_by_package": breakdown,
                },
            )
        )
    ingest_env = _code_environment(lambda_environment(bench.url, "ingest"), artifact)
    rows[-1].details["xray_sdk_import_ms_in_lambda"] = xray_import_ms(runtime, ingest_env)
    return rows
