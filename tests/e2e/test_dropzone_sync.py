"""The drop zone against the local stack with the real AWS CLI: alice's prefix-scoped credentials (the emulator's
STS, as tests/e2e/test_s3_credentials_cli.py issues them) and `aws s3 sync` of 200 small files, 50 of them content
bob's tenant stored before; then GET /uploads lists 200 uploads of alice (150 new content, 50 whose bytes were
deleted as duplicates), nothing is left under her prefix, only one copy of each content exists, the audit holds."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from dfd.identity.s3access import prefix_for
from dfdtools.upload import list_uploads
from tests.e2e.e2e_helpers import RunningStack, credentials_env, run_audit, settled, wait_until

pytestmark = pytest.mark.e2e

FILES, SHARED = 200, 50


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return decoded


def upload_as(stack: RunningStack, user: str, data: bytes, name: str) -> None:
    body = {"filename": name, "size": len(data)}
    answer = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth(user), timeout=10)
    assert answer.status_code == 201, answer.text
    issued = answer.json()
    put = requests.put(issued["upload_url"], data=data, headers=issued["headers"], timeout=10)
    assert put.status_code == 200, put.text


def my_uploads(stack: RunningStack, user: str) -> list[dict[str, Any]]:
    with requests.Session() as session:
        session.headers.update(stack.auth(user))
        return list(list_uploads(session, stack.api_url))  # every page, as scripts/upload --list reads them


def test_aws_s3_sync_of_200_files_50_of_them_another_tenants_content(stack: RunningStack, tmp_path: Path) -> None:
    if shutil.which("aws") is None:
        pytest.skip("aws CLI not installed (make aws-cli)")
    run = os.urandom(6).hex()  # this run's contents: new to every tenant of a shared stack
    contents = [f"dropzone {run} file {index}\n".encode() * (1 + index % 7) for index in range(FILES)]
    for index in range(SHARED):  # bob's tenant (globex) stores these first
        upload_as(stack, "bob", contents[index], f"bob-{index}.txt")
    wait_until(lambda: settled(stack), timeout=120)

    token = stack.token("alice")
    tenant = "acme"  # alice's group, tenant-acme
    prefix = prefix_for(tenant, claims(token)["sub"])
    folder = tmp_path / "sync"
    for index, data in enumerate(contents):
        path = folder / f"d{index % 4}" / f"{run}-{index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    env = credentials_env(stack, prefix, "alice")
    result = subprocess.run(
        ["aws", "s3", "sync", str(folder), f"s3://{stack.bucket}/{prefix}{run}/"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("upload:") == FILES

    def listed() -> list[dict[str, Any]] | None:
        mine = [item for item in my_uploads(stack, "alice") if item.get("filename", "").startswith(f"{run}/")]
        done = len(mine) == FILES and all(item["status"] in ("stored", "duplicate") for item in mine)
        return mine if done else None

    mine = wait_until(listed, timeout=300, interval=1.0)
    wait_until(lambda: settled(stack), timeout=120)
    by_name = {item["filename"]: item for item in mine}
    for index, data in enumerate(contents):
        item = by_name[f"{run}/d{index % 4}/{run}-{index}.txt"]
        assert item["hash"] == hashlib.sha256(data).hexdigest() and item["size"] == len(data)
        assert item["via"] == "s3"  # written with S3 credentials: listed (and published) as the drop zone's
    # every upload is new content for alice's tenant ("stored"); globally 50 were duplicates of bob's
    s3 = stack.client("s3")
    left = s3.list_objects_v2(Bucket=stack.bucket, Prefix=prefix).get("Contents", [])
    assert left == []  # the drop zone keeps nothing
    copies: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix="uploads/"):
        for obj in page.get("Contents", []):
            copies[obj["Key"]] = obj["Size"]
    stored_ids = {item["upload_id"] for item in mine if f"uploads/{item['upload_id']}" in copies}
    assert len(stored_ids) == FILES - SHARED  # the 50 duplicates' bytes are gone: bob's copies serve them
    files = stack.client("dynamodb")
    shared = {hashlib.sha256(data).hexdigest() for data in contents[:SHARED]}
    for digest in shared:
        record = files.get_item(TableName=stack.files_table, Key={"hash": {"S": digest}})["Item"]
        assert record["upload_count"]["N"] == "2" and not record["s3_key"]["S"].endswith(tuple(stored_ids))
    # the reconcile (every minute here) may be between a reap's two phases of an earlier test's deleted content:
    # the invariants hold once it is past them
    last: list[subprocess.CompletedProcess[str]] = []

    def audited() -> bool:
        last[:] = [run_audit(stack)]
        return last[0].returncode == 0 and "BROKEN" not in last[0].stdout

    try:
        wait_until(audited, timeout=120, interval=5.0)
    except BaseException:
        print(last[0].stdout + last[0].stderr if last else "no audit ran")
        raise


def test_a_second_sync_of_the_same_files_sends_each_again_as_a_duplicate(stack: RunningStack, tmp_path: Path) -> None:
    """The drop zone keeps nothing, so a second `aws s3 sync` finds its destination empty and sends every file again:
    each write is a new upload of alice's, a duplicate of her first (its bytes deleted), none silently dropped."""
    if shutil.which("aws") is None:
        pytest.skip("aws CLI not installed (make aws-cli)")
    run, count = os.urandom(6).hex(), 3
    prefix = prefix_for("acme", claims(stack.token("alice"))["sub"])
    folder = tmp_path / "again"
    folder.mkdir()
    for index in range(count):
        (folder / f"{index}.txt").write_bytes(f"synced twice {run} {index}\n".encode())
    env = credentials_env(stack, prefix, "alice")
    command = ["aws", "s3", "sync", str(folder), f"s3://{stack.bucket}/{prefix}{run}/"]
    s3 = stack.client("s3")

    seen: list[dict[str, Any]] = []  # the last listing of this run's uploads: printed when a wait fails

    def mine(statuses: tuple[str, ...]) -> list[dict[str, Any]] | None:
        found = [item for item in my_uploads(stack, "alice") if item.get("filename", "").startswith(f"{run}/")]
        seen[:] = found
        return found if sorted(item["status"] for item in found) == sorted(statuses) else None

    for round_statuses in (("stored",) * count, ("stored",) * count + ("duplicate",) * count):
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("upload:") == count  # the prefix is empty: every file is sent
        try:
            wait_until(lambda statuses=round_statuses: mine(statuses), timeout=120, interval=1.0)
        except BaseException:
            print("uploads of this run:", json.dumps(seen, indent=1))
            raise
        wait_until(lambda: not s3.list_objects_v2(Bucket=stack.bucket, Prefix=prefix).get("Contents"), timeout=60)
    wait_until(lambda: settled(stack), timeout=120)
    audit_run = run_audit(stack)
    assert audit_run.returncode == 0, audit_run.stdout + audit_run.stderr
