"""dfd as a Git LFS server, through the real ``git`` and ``git-lfs`` only (the local stack; personal access tokens
from POST /me/tokens handed to git by a credential helper)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from tests.e2e.e2e_helpers import RunningStack
from tests.e2e.lfs_git import GitUser, commit_file, new_repo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed (.ci/run installs it)"),
]

_deserialize = TypeDeserializer().deserialize


def uploads_of(stack: RunningStack, oid: str) -> list[dict[str, Any]]:
    """Every upload record of content ``oid`` (pending ones carry sha256, processed ones hash)."""
    pages = stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table)
    records = [{k: _deserialize(v) for k, v in item.items()} for page in pages for item in page["Items"]]
    return [r for r in records if oid in (r.get("hash"), r.get("sha256"))]


def bucket_objects_with(stack: RunningStack, data: bytes) -> int:
    s3 = stack.client("s3")
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket):
        for entry in page.get("Contents", []):
            if (
                entry["Size"] == len(data)
                and s3.get_object(Bucket=stack.bucket, Key=entry["Key"])["Body"].read() == data
            ):
                count += 1
    return count


@pytest.fixture
def alice(stack: RunningStack, tmp_path: Path) -> GitUser:
    return GitUser.make(stack, tmp_path, "alice")


def test_push_then_clone_round_trips_bytes(stack: RunningStack, alice: GitUser, tmp_path: Path) -> None:
    remote, work = new_repo(alice, tmp_path, "game", f"{stack.api_url}/lfs/game")
    data = os.urandom(300_000) + b"round trip"
    oid = commit_file(alice, work, "level.bin", data)
    alice.run(work, "push", "origin", "main")

    clone = tmp_path / "clone"
    alice.run(tmp_path, "clone", str(remote), str(clone))
    assert (clone / "level.bin").read_bytes() == data
    records = uploads_of(stack, oid)
    assert [r["status"] for r in records] == ["stored"]
    assert records[0]["tenant"] == "acme"
