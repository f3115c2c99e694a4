"""The real AWS CLI (`aws s3 cp`, `aws s3 sync`) against the local stack with prefix-scoped credentials issued by
POST /me/s3-credentials (AssumeRole on S3CredentialsRole with dfd.identity.s3access's session policy): a small
file, an 80 MiB file (the CLI's own multipart) and a directory land under the prefix; a write outside it and a
read are refused. What lands there is an upload of the prefix's tenant and owner, moved to its upload key by the
drop zone (docs/design/dropzone.md): the bytes are checked through the upload's hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from dfd.identity.s3access import prefix_for
from tests.e2e.e2e_helpers import RunningStack, credentials_env, make_user, wait_until

pytestmark = pytest.mark.e2e

USER = "cli-user"  # a user of tenant acme of these tests' own
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def owner(stack: RunningStack) -> str:
    return make_user(stack, USER, "tenant-acme")


@pytest.fixture(scope="module")
def prefix(owner: str) -> str:
    return prefix_for("acme", owner)


@pytest.fixture(scope="module")
def cli_env(stack: RunningStack, prefix: str) -> dict[str, str]:
    if shutil.which("aws") is None:
        pytest.skip("aws CLI not installed (make aws-cli)")
    return credentials_env(stack, prefix, USER)


def aws(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["aws", "s3", *args], capture_output=True, text=True, timeout=300, env=env)


def landed(stack: RunningStack, owner: str, filename: str) -> dict[str, Any]:
    """`owner`'s processed upload of the object written at their prefix + `filename` (the drop zone moved it to
    its upload key; `hash` is what the ingest computed from those bytes)."""

    def processed() -> dict[str, Any] | None:
        pages = stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table)
        for page in pages:
            for item in page["Items"]:
                found = {k: next(iter(v.values())) for k, v in item.items()}
                mine = found.get("owner") == owner and found.get("filename") == filename
                if mine and found["status"] in ("stored", "duplicate"):
                    return found
        return None

    return wait_until(processed, timeout=60)


def uploads_named(stack: RunningStack, owner: str, start: str) -> int:
    pages = stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table)
    return sum(
        1
        for page in pages
        for item in page["Items"]
        if item.get("owner", {}).get("S") == owner and item.get("filename", {}).get("S", "").startswith(start)
    )


def test_aws_s3_cp_of_a_small_and_an_80_mib_file(
    stack: RunningStack, cli_env: dict[str, str], owner: str, prefix: str, tmp_path: Path
) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(b"hello from the AWS CLI\n")
    result = aws(cli_env, "cp", str(small), f"s3://{stack.bucket}/{prefix}small.txt")
    assert result.returncode == 0, result.stderr
    assert landed(stack, owner, "small.txt")["hash"] == hashlib.sha256(small.read_bytes()).hexdigest()

    big = tmp_path / "big.bin"
    block = hashlib.sha256(b"dfd").digest() * (MIB // 32)
    with big.open("wb") as out:
        for index in range(80):
            out.write(index.to_bytes(4, "big") + block[4:])
    result = aws(cli_env, "cp", str(big), f"s3://{stack.bucket}/{prefix}big.bin")
    assert result.returncode == 0, result.stderr
    assert "upload:" in result.stdout  # the CLI's multipart (8 MiB parts), through the emulator's checks
    big_upload = landed(stack, owner, "big.bin")
    assert int(big_upload["size"]) == 80 * MIB
    assert big_upload["hash"] == hashlib.sha256(big.read_bytes()).hexdigest()


def test_aws_s3_sync_lists_and_writes_its_own_prefix(
    stack: RunningStack, cli_env: dict[str, str], owner: str, prefix: str, tmp_path: Path
) -> None:
    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    for index in range(5):
        path = folder / ("sub" if index % 2 else "") / f"f{index}.txt"
        path.write_text(f"file {index}\n")
        # older than the upload by more than a listing's precision (whole seconds): the second sync compares
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    target = f"s3://{stack.bucket}/{prefix}dir/"
    result = aws(cli_env, "sync", str(folder), target)
    assert result.returncode == 0, result.stderr
    for name in ("dir/f0.txt", "dir/f2.txt", "dir/f4.txt", "dir/sub/f1.txt", "dir/sub/f3.txt"):
        landed(stack, owner, name)  # each an upload named by its key after the prefix
    # the drop zone keeps nothing to compare with: a second sync sends the files again, and the same bytes at the
    # same key are the same upload (nothing counted twice)
    wait_until(
        lambda: not stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix=prefix + "dir/").get("Contents")
    )
    again = aws(cli_env, "sync", str(folder), target)
    assert again.returncode == 0, again.stdout + again.stderr
    wait_until(
        lambda: not stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix=prefix + "dir/").get("Contents")
    )
    assert uploads_named(stack, owner, "dir/") == 5


@pytest.mark.parametrize(
    "args",
    [
        ("cp", "{file}", "s3://{bucket}/" + prefix_for("acme", "someone-else") + "x.txt"),
        ("cp", "{file}", "s3://{bucket}/uploads/x.txt"),
        ("cp", "s3://{bucket}/{prefix}small.txt", "{file}.back"),
        ("ls", "s3://{bucket}/s3/"),
    ],
    ids=["another-prefix", "upload-prefix", "read", "list-outside"],
)
def test_writes_outside_the_prefix_and_reads_are_refused(
    stack: RunningStack, cli_env: dict[str, str], prefix: str, tmp_path: Path, args: Any
) -> None:
    file = tmp_path / "f.txt"
    file.write_text("x")
    stack.client("s3").put_object(Bucket=stack.bucket, Key=prefix + "small.txt", Body=b"mine")
    result = aws(cli_env, *(arg.format(file=file, bucket=stack.bucket, prefix=prefix) for arg in args))
    assert result.returncode != 0
    assert "AccessDenied" in result.stderr or "403" in result.stderr, result.stderr
    assert not (tmp_path / "f.txt.back").exists()
