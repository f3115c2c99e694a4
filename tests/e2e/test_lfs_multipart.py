"""Git LFS past the single-PUT limit: the real git-lfs pushes through dfd's agent (scripts/lfs-agent), on a local
stack whose limit (LfsBasicMaxBytes) is lowered to S3's smallest part, so a 12 MiB object goes in parts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.e2e_helpers import ROOT, RunningStack, clean_env, launch_stack, stop_stack, wait_until
from tests.e2e.lfs_git import GitUser, commit_file, interrupt, new_repo, require_git_lfs
from tests.e2e.openapi_check import validating_responses
from tests.e2e.test_lfs_git import bucket_objects_with, uploads_of

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024
BASIC_MAX = 5 * MIB  # the lowered single-PUT limit (the parameter's smallest: S3's smallest part)
AGENT = ROOT / "scripts" / "lfs-agent"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack of its own: the session's keeps the 5 GiB limit the other LFS tests check."""
    workdir = tmp_path_factory.mktemp("dfdlocal-lfs-multipart")
    command = [sys.executable, "-m", "dfdlocal", "--host", "127.0.0.1", "--api-port", "0", "--lambda-port", "0"]
    command += ["--aws-port", "0", "--ready-file", str(workdir / "ready.json")]
    command += ["--param", f"LfsBasicMaxBytes={BASIC_MAX}"]
    running = launch_stack(command, cwd=ROOT, env=clean_env(), workdir=workdir)
    with validating_responses(running.api_url) as checker:
        yield running
    stop_stack(running)
    if checker.failures:
        pytest.fail(f"{len(checker.failures)} API response(s) broke docs/openapi.yaml:\n" + "\n".join(checker.failures))


@pytest.fixture
def alice(stack: RunningStack, tmp_path: Path) -> GitUser:
    require_git_lfs()
    return GitUser.make(stack, tmp_path, "alice")


def install_agent(git: GitUser, work: Path) -> None:
    """The one documented command, run in the repository."""
    done = subprocess.run([str(AGENT), "install"], cwd=work, env=git.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"lfs.customtransfer.dfd-multipart.path={AGENT}" in done.stdout


def stats(stack: RunningStack) -> dict[str, Any]:
    answer = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=30)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_object_past_the_single_put_limit_goes_in_parts_is_stored_once_and_pulls_back(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    remote, work = new_repo(alice, tmp_path, "big", f"{stack.api_url}/lfs/big")
    install_agent(alice, work)
    data = os.urandom(12 * MIB) + b"in parts"
    oid = commit_file(alice, work, "disk.bin", data)
    before = stats(stack)
    pushed = alice.run(work, "push", "origin", "main", timeout=300)
    assert "error" not in pushed.stderr.lower(), pushed.stderr

    records = uploads_of(stack, oid)
    assert [(r["status"], r["tenant"], r.get("multipart")) for r in records] == [("stored", "acme", True)]
    assert int(records[0]["part_count"]) >= 2  # sent in parts
    metadata = requests.get(f"{stack.api_url}/metadata/{records[0]['upload_id']}", headers=stack.auth(), timeout=30)
    assert metadata.status_code == 200, metadata.text
    assert metadata.json()["hash"] == oid and metadata.json()["size"] == len(data)
    assert bucket_objects_with(stack, data) == 1
    after = stats(stack)
    assert after["total_files"] == before["total_files"] + 1
    assert after["total_bytes_stored"] == before["total_bytes_stored"] + len(data)

    # pushed again (the branch, and the object by id): the tenant holds it, nothing is sent or recorded
    alice.run(work, "push", "origin", "main")
    alice.run(work, "lfs", "push", "--object-id", "origin", oid)
    assert uploads_of(stack, oid) == records
    again = stats(stack)
    assert (again["total_files"], again["total_bytes_stored"]) == (after["total_files"], after["total_bytes_stored"])
    assert bucket_objects_with(stack, data) == 1

    clone = tmp_path / "big-clone"  # a clone without the agent: downloads are basic's presigned GET
    alice.run(tmp_path, "clone", str(remote), str(clone), timeout=300)
    assert (clone / "disk.bin").read_bytes() == data


def test_without_the_agent_the_object_is_refused_naming_the_limit_and_the_agent(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    _, work = new_repo(alice, tmp_path, "plain", f"{stack.api_url}/lfs/plain")
    oid = commit_file(alice, work, "disk.bin", os.urandom(BASIC_MAX + 1))
    pushed = alice.run(work, "push", "origin", "main", check=False, timeout=300)
    assert pushed.returncode != 0
    said = pushed.stdout + pushed.stderr
    assert f"size must be from 1 to {BASIC_MAX} bytes (the basic transfer's largest" in said, said
    assert "scripts/lfs-agent install" in said
    assert uploads_of(stack, oid) == []


def bytes_read(progress: Path) -> int:
    """The most bytes of an object GIT_LFS_PROGRESS shows sent (its lines: ``<dir> <n>/<m> <sent>/<size> <name>``)."""
    lines = progress.read_text().splitlines() if progress.exists() else []
    sent = [fields[2].partition("/")[0] for fields in (line.split() for line in lines) if len(fields) >= 4]
    return max((int(value) for value in sent if value.isdigit()), default=0)


def test_a_push_killed_mid_way_resumes_the_upload_it_started(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    remote, work = new_repo(alice, tmp_path, "resume", f"{stack.api_url}/lfs/resume")
    install_agent(alice, work)
    data = os.urandom(40 * MIB)  # 8 parts of 5 MiB
    oid = commit_file(alice, work, "image.bin", data)
    # one part at a time (lfs.concurrenttransfers=1), killed once two and a half parts were read: S3 holds some
    progress = tmp_path / "progress"
    pushing = alice.start(
        work, "-c", "lfs.concurrenttransfers=1", "push", "origin", "main", env={"GIT_LFS_PROGRESS": str(progress)}
    )
    wait_until(lambda: bytes_read(progress) >= 25 * MIB // 2 or pushing.poll() is not None, timeout=120, interval=0.005)
    assert pushing.poll() is None, "the push ended before it could be interrupted"
    interrupt(pushing)
    first = [r for r in uploads_of(stack, oid) if r["status"] == "pending"]
    assert len(first) == 1
    s3 = stack.client("s3")
    held = s3.list_parts(Bucket=stack.bucket, Key=first[0]["s3_key"], UploadId=first[0]["s3_upload_id"])["Parts"]
    assert 1 <= len(held) < int(first[0]["part_count"])

    alice.run(work, "push", "origin", "main", timeout=300)
    records = {r["upload_id"]: r for r in uploads_of(stack, oid)}
    # the first upload was resumed and stored; the second push's own registration was aborted in its place
    assert records[first[0]["upload_id"]]["status"] == "stored"
    assert sorted(r["status"] for r in records.values()) == ["deleted", "stored"]
    assert bucket_objects_with(stack, data) == 1
    clone = tmp_path / "resume-clone"
    alice.run(tmp_path, "clone", str(remote), str(clone), timeout=300)
    assert (clone / "image.bin").read_bytes() == data
