"""Target 18: S3 tools as dfd clients. On the local stack (``python -m dfdlocal``, as rows 10 and 14),
the real AWS CLI with the README's profile (``credential_process`` = scripts/s3-credentials, ``endpoint_url`` =
the stack's S3, in a temporary AWS config file) against scripts/upload, each timed from its process's start until
``GET /uploads`` lists every file it sent as stored (or duplicate):

- A: ``aws s3 cp`` of one file of random bytes (1 GiB; ``--quick`` 128 MiB) vs ``scripts/upload`` of another file of
  the same size (other random bytes: both are new content, neither a duplicate of the other);
- B: ``aws s3 sync`` of a directory of 1,000 small files (``--quick`` 200), 4-64 KiB of random bytes each, vs
  ``scripts/upload`` of a directory of as many files of the same sizes (other bytes). No file is a duplicate:
  scripts/upload's hash precheck skips a content its tenant holds without making an upload (409), so duplicates
  would give the two paths different work and different listings.

Both paths sign in on the stack's user pool (alice for the S3 tool, carol, her tenant's other user, for
scripts/upload: each lists only its own uploads) and send their files unchanged: the CLI with its default transfer
settings, scripts/upload with ``--wait 0`` (it sends file after file and leaves the ingest to be awaited here, as
for the CLI). Before the timed runs, each path sends one small file, awaited, so neither pays the stack's cold
starts. The stack runs with the template's quotas (unlimited): the local defaults (1 GiB, 100 pending uploads per
tenant) would reject the sync's objects above 100 in flight.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from dfdbench.harness import MIB, Options, Row
from dfdbench.mpupload import ROOT, auth_headers, local_stack

FINAL = frozenset({"stored", "duplicate"})
NEVER_FINAL = frozenset({"failed", "expired", "rejected"})  # statuses an upload never leaves
POLL_SECONDS = 0.5
TIMEOUT = 1800.0
S3_USER, UPLOAD_USER = "alice", "carol"  # one tenant (acme), each listing only its own uploads
# the AWS CLI's transfer defaults (`aws configure set default.s3.*` not set): what its cp and sync used
CLI_DEFAULTS = {"multipart_threshold": "8MB", "multipart_chunksize": "8MB", "max_concurrent_requests": 10}
SMALL_SIZES = (4 * 1024, 64 * 1024)


class NeverStored(RuntimeError):
    """An upload of the run ended in a status it never leaves (or the run timed out)."""


def settled(items: Iterable[Mapping[str, Any]], names: Collection[str]) -> tuple[set[str], dict[str, str]]:
    """Of `names` (filenames), those listed stored or duplicate, and those listed in a status they never leave
    (name -> status, with the reason when the listing gives one). One name's other uploads do not count against
    it once one of them is final."""
    done: set[str] = set()
    stuck: dict[str, str] = {}
    for item in items:
        name, status = item.get("filename"), item.get("status")
        if not isinstance(name, str) or name not in names:
            continue
        if status in FINAL:
            done.add(name)
        elif status in NEVER_FINAL:
            reason = item.get("reason") or item.get("failure")
            stuck[name] = f"{status} ({reason})" if reason else str(status)
    return done, {name: status for name, status in stuck.items() if name not in done}


def await_stored(
    api: str, headers: Mapping[str, str], names: Collection[str], started: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll GET /uploads (every page) until every name is listed stored or duplicate: seconds since `started`
    (a perf_counter) when the listing first showed them all and the polls made; the uploads so listed."""
    from dfdtools.upload import list_uploads

    polls = 0
    with requests.Session() as session:
        session.headers.update(headers)
        while True:
            polls += 1
            items = list(list_uploads(session, api))
            done, stuck = settled(items, names)
            seen = time.perf_counter()
            if len(done) == len(names):
                final = [item for item in items if item.get("filename") in done and item.get("status") in FINAL]
                return {"seconds": seen - started, "polls": polls}, final
            if stuck:
                raise NeverStored(f"{len(stuck)} uploads will never be stored: {sorted(stuck.items())[:5]}")
            if seen - started > TIMEOUT:
                raise NeverStored(f"{len(names) - len(done)} of {len(names)} not stored after {TIMEOUT:.0f} s")
            time.sleep(POLL_SECONDS)


def random_file(path: Path, size: int, chunk: int = 8 * MIB) -> None:
    with path.open("wb") as out:
        for start in range(0, size, chunk):
            out.write(os.urandom(min(chunk, size - start)))


def small_files(directory: Path, sizes: list[int]) -> list[str]:
    directory.mkdir(parents=True)
    names = [f"f{index:04d}.bin" for index in range(len(sizes))]
    for name, size in zip(names, sizes, strict=True):
        (directory / name).write_bytes(os.urandom(size))
    return names


@dataclass
class Paths:
    """The two clients on one stack: the AWS CLI with alice's profile, scripts/upload signed in as carol."""

    ready: dict[str, Any]  # the stack's ready file
    scratch: Path

    @property
    def api(self) -> str:
        return str(self.ready["api_url"])

    @property
    def aws_url(self) -> str:
        return str(self.ready["aws_url"])

    def env(self) -> dict[str, str]:
        """This process's environment without its AWS/dfd settings, with the stack's local password."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DFD_", "MOTO_", "POWERTOOLS_"))}
        env["DFD_LOCAL_PASSWORD"] = str(self.ready["cognito"]["password"])
        return env

    def credentials_command(self) -> list[str]:
        """scripts/s3-credentials as alice against this stack (the profile's credential_process)."""
        script = str(ROOT / "scripts" / "s3-credentials")
        return [script, "--user", S3_USER, "--api", self.api, "--endpoint-url", self.aws_url]

    def cli_env(self) -> dict[str, str]:
        """The README's profile, in a config file of the scratch directory (never ~/.aws)."""
        from dfdtools.s3credentials import aws_profile

        region = str(self.ready["region"])
        profile = aws_profile(
            self.scratch / "aws", self.credentials_command(), region=region, endpoint_url=self.aws_url
        )
        return self.env() | profile

    def run(self, command: list[str], env: Mapping[str, str]) -> None:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=dict(env), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:3])} … failed ({done.returncode}): {done.stderr[-2000:]}")

    def upload_command(self, paths: list[Path]) -> list[str]:
        """scripts/upload as carol: file after file, the ingest not awaited (--wait 0)."""
        command = [str(ROOT / "scripts" / "upload"), "--api", self.api, "--user", UPLOAD_USER]
        command += ["--endpoint-url", self.aws_url, "--wait", "0", "--no-progress"]
        command += ["--state-dir", str(self.scratch / "states"), *map(str, paths)]
        return command


def timed(
    paths: Paths, command: list[str], env: Mapping[str, str], user: str, names: Collection[str]
) -> dict[str, Any]:
    """`command` run from start to exit, then GET /uploads polled as `user` until `names` are all stored; with
    when the uploads were registered and processed, as they list it (whole seconds after the start)."""
    headers = auth_headers(paths.ready, user)
    wall, started = time.time(), time.perf_counter()
    paths.run(command, env)
    exited = time.perf_counter() - started
    found, final = await_stored(paths.api, headers, names, started)
    return found | {"client_exit_s": exited} | stamps(final, wall)


def stamps(items: Iterable[Mapping[str, Any]], wall: float) -> dict[str, list[float]]:
    """The first and last created_at and processed_at of `items`, in seconds after `wall` (a time.time())."""
    from dfd.core import clock

    found: dict[str, list[float]] = {}
    for field in ("created_at", "processed_at"):
        moments = [clock.parse(str(item[field])).timestamp() - wall for item in items if item.get(field)]
        if moments:
            found[field.replace("_at", "_s")] = [min(moments), max(moments)]
    return found


def s3_tools(options: Options) -> list[Row]:
    size = (128 if options.quick else 1024) * MIB
    count = 200 if options.quick else 1000
    rng = random.Random(2026)  # the small files' sizes: the same in every run
    sizes = [rng.randint(*SMALL_SIZES) for _ in range(count)]
    if shutil.which("aws") is None:
        raise RuntimeError("the AWS CLI is not installed (make aws-cli)")
    parameters = {"TenantQuotaBytes": "0", "TenantPendingLimit": "0"}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dfd-bench-s3-") as scratch_dir:
        scratch = Path(scratch_dir)
        with local_stack(scratch, parameters) as ready:
            measured = _measure(Paths(ready, scratch), size, sizes)
    facts: dict[str, Any] = {"cli": _cli_version(), "cli_transfer_settings": CLI_DEFAULTS}
    facts["load_average"] = [load_before, os.getloadavg()]
    return _rows(measured, facts, size, sizes)


def _measure(paths: Paths, size: int, sizes: list[int]) -> dict[str, Any]:
    cli = paths.cli_env()
    # where the credentials write: the README's first step, scripts/s3-credentials's own answer (the keys unused)
    done = subprocess.run(
        paths.credentials_command(), capture_output=True, text=True, timeout=120, env=paths.env(), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/s3-credentials failed: {done.stderr[-2000:]}")
    answer = json.loads(done.stdout)
    target = f"s3://{answer['bucket']}/{answer['prefix']}"
    scratch = paths.scratch
    files = scratch / "files"
    files.mkdir()

    # warm-up: one small file each way, awaited (the stack's functions start cold)
    for name in ("warm-s3.bin", "warm-up.bin"):
        random_file(files / name, 64 * 1024)
    timed(paths, cp_command(files / "warm-s3.bin", target), cli, S3_USER, ["warm-s3.bin"])
    timed(paths, paths.upload_command([files / "warm-up.bin"]), paths.env(), UPLOAD_USER, ["warm-up.bin"])

    # A: one large file each way
    large: dict[str, Any] = {"size": size}
    for label, name in (("upload", "large-up.bin"), ("s3", "large-s3.bin")):
        path = files / name
        random_file(path, size)
        if label == "s3":
            large[label] = timed(paths, cp_command(path, target), cli, S3_USER, [name])
        else:
            large[label] = timed(paths, paths.upload_command([path]), paths.env(), UPLOAD_USER, [name])
        path.unlink()

    # B: a directory of small files each way
    small: dict[str, Any] = {"files": len(sizes), "bytes": sum(sizes)}
    for label in ("upload", "s3"):
        directory = scratch / f"small-{label}"
        names = small_files(directory, sizes)
        if label == "s3":
            command = ["aws", "s3", "sync", "--only-show-errors", str(directory), target]
            small[label] = timed(paths, command, cli, S3_USER, names)
        else:
            small[label] = timed(paths, paths.upload_command([directory]), paths.env(), UPLOAD_USER, names)
        shutil.rmtree(directory)
    return {"large": large, "small": small}


def cp_command(path: Path, target: str) -> list[str]:
    """`aws s3 cp` of `path` to `target` + its name, with the CLI's defaults (no progress lines)."""
    return ["aws", "s3", "cp", "--only-show-errors", str(path), target + path.name]


def _cli_version() -> str:
    done = subprocess.run(["aws", "--version"], capture_output=True, text=True, timeout=60, check=False)
    return (done.stdout or done.stderr).strip()


def _rows(measured: dict[str, Any], facts: dict[str, Any], size: int, sizes: list[int]) -> list[Row]:
    large, small = measured["large"], measured["small"]
    s3, up = large["s3"]["seconds"], large["upload"]["seconds"]
    label = f"{size // MIB} MiB" if size < 1024 * MIB else f"{size / (1024 * MIB):g} GiB"
    before, after = (", ".join(f"{value:.1f}" for value in load) for load in facts["load_average"])
    cli = facts["cli"].split(" ")[0]
    machine = f"local stack on {os.cpu_count()} CPUs, load average {before} before the row, {after} after"
    s3_small, up_small = small["s3"]["seconds"], small["upload"]["seconds"]
    count = small["files"]
    return [
        Row(
            "18",
            f"aws s3 cp of {label} (random bytes) with prefix credentials: start to stored",
            size / s3 / 1e6,
            "MB/s",
            size / up / 1e6,
            "scripts/upload of another file of that size",
            s3 / up,
            "reported (time ratio)",
            None,
            f"{s3:.1f} s vs {up:.1f} s (ratio = s3 cp time / scripts/upload time); {cli} defaults: 8 MB parts, "
            f"10 requests in flight; scripts/upload: 8 MiB parts, 4 in flight; the CLI exited after "
            f"{large['s3']['client_exit_s']:.1f} s, scripts/upload after {large['upload']['client_exit_s']:.1f} s; "
            f"the drop zone registered the object {_at(large['s3'], 'created_s', 0)}, its ingest committed "
            f"{_at(large['s3'], 'processed_s', 1)}; " + machine,
            large | facts,
        ),
        Row(
            "18",
            f"aws s3 sync of {count:,} files of {SMALL_SIZES[0] // 1024}-{SMALL_SIZES[1] // 1024} KiB, no duplicates: "
            "start to all stored",
            count / s3_small,
            "files/s",
            count / up_small,
            "scripts/upload of as many files of the same sizes: one process, file after file",
            s3_small / up_small,
            "reported (time ratio)",
            None,
            f"{s3_small:.1f} s vs {up_small:.1f} s for {sum(sizes) / 1e6:.1f} MB (ratio = sync time / "
            f"scripts/upload time); the CLI exited after {small['s3']['client_exit_s']:.1f} s, scripts/upload after "
            f"{small['upload']['client_exit_s']:.1f} s; the sync's last upload registered "
            f"{_at(small['s3'], 'created_s', 1)}; GET /uploads polled every {POLL_SECONDS} s, every page; " + machine,
            small | facts,
        ),
    ]


def _at(measured: Mapping[str, Any], field: str, which: int) -> str:
    """A stamp of `stamps` as text: "at ~N s" (whole seconds: the listing's resolution)."""
    moments = measured.get(field)
    return f"at ~{moments[which]:.0f} s" if moments else "(not listed)"
