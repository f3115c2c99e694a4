"""Deletes over HTTP against the local stack: 404 vs 403 vs 204 vs 410, the repeat, GET /uploads,
and scripts/upload --delete / --list."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from tests.e2e.e2e_helpers import RunningStack, settled, tool, wait_until

pytestmark = pytest.mark.e2e


def processed(stack: RunningStack, data: bytes, user: str = "alice") -> str:
    body = {"filename": "gone.txt", "size": len(data), "content_type": "text/plain"}
    answer = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth(user), timeout=10).json()
    assert requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10).status_code == 200

    def done() -> dict[str, Any] | None:
        url = f"{stack.api_url}/metadata/{answer['upload_id']}"
        shown: dict[str, Any] = requests.get(url, headers=stack.auth(user), timeout=10).json()
        return shown if shown.get("status") in ("stored", "duplicate") else None

    wait_until(done, timeout=30)
    return str(answer["upload_id"])


def test_delete_rules_over_http(stack: RunningStack) -> None:
    upload_id = processed(stack, f"{uuid.uuid4()} delete over http\n".encode() * 50)
    url = f"{stack.api_url}/uploads/{upload_id}"
    unknown = requests.delete(f"{stack.api_url}/uploads/{uuid.uuid4().hex}", headers=stack.auth(), timeout=10)
    assert unknown.status_code == 404
    other_tenant = requests.delete(url, headers=stack.auth("bob"), timeout=10)
    assert other_tenant.status_code == 404 and other_tenant.json()["error"]["code"] == "not_found"
    same_tenant = requests.delete(url, headers=stack.auth("carol"), timeout=10)
    assert same_tenant.status_code == 403 and same_tenant.json()["error"]["code"] == "not_owner"
    assert requests.delete(url, timeout=10).status_code == 401
    for _ in range(2):  # repeated: 204 again
        deleted = requests.delete(url, headers=stack.auth(), timeout=10)
        assert deleted.status_code == 204 and deleted.content == b""
    shown = requests.get(f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth(), timeout=10)
    assert shown.status_code == 200 and shown.json()["status"] == "deleted"
    gone = requests.get(f"{stack.api_url}/download/{upload_id}", headers=stack.auth(), timeout=10)
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "deleted"
    page = requests.get(f"{stack.api_url}/uploads", params={"limit": "5"}, headers=stack.auth(), timeout=10)
    assert page.status_code == 200
    assert {"upload_id": upload_id, "status": "deleted"}.items() <= next(
        item for item in page.json()["items"] if item["upload_id"] == upload_id
    ).items()


def test_upload_tool_deletes_and_lists(stack: RunningStack) -> None:
    upload_id = processed(stack, f"{uuid.uuid4()} deleted by the tool\n".encode() * 50)
    common = ["--api", stack.api_url, "--token", stack.token("alice")]
    deleted = tool(stack, "upload", "--delete", upload_id, "--list", *common)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert f"deleted   {upload_id}" in deleted.stdout
    assert any(line.startswith(upload_id) and " deleted " in line for line in deleted.stdout.splitlines())
    refused = tool(stack, "upload", "--delete", upload_id, "--api", stack.api_url, "--token", stack.token("carol"))
    assert refused.returncode == 1 and "not_owner" in refused.stdout


def _usage(stack: RunningStack, user: str) -> dict[str, int]:
    answer = requests.get(f"{stack.api_url}/me", headers=stack.auth(user), timeout=10)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["usage"])


def _nothing_at_zero(stack: RunningStack, tenant: str) -> bool:
    """No reference of `tenant` awaits the reaper (it would give its size back while the test measures)."""
    pages = stack.client("dynamodb").get_paginator("scan")
    scan = pages.paginate(TableName=stack.tenant_files_table, ConsistentRead=True)
    return not any(
        item["tenant"]["S"] == tenant and item.get("upload_count", {}).get("N") == "0"
        for page in scan
        for item in page["Items"]
    )


def test_a_delete_gives_the_tenant_its_quota_back_after_the_reconcile(stack: RunningStack) -> None:
    """GET /me before, after an upload (its size joins stored_bytes), after its delete and a reconcile pass (the
    reference at 0 is reaped and its size released: stored_bytes back where it was)."""
    wait_until(lambda: settled(stack) and _nothing_at_zero(stack, "globex"), timeout=150)
    before = _usage(stack, "bob")["stored_bytes"]
    data = f"{uuid.uuid4()} quota given back\n".encode() * 40
    upload_id = processed(stack, data, "bob")
    assert _usage(stack, "bob")["stored_bytes"] == before + len(data)
    deleted = requests.delete(f"{stack.api_url}/uploads/{upload_id}", headers=stack.auth("bob"), timeout=10)
    assert deleted.status_code == 204
    # counted until the reaper deletes the reference (a scheduled run may already have)
    assert _usage(stack, "bob")["stored_bytes"] in (before + len(data), before)
    run = tool(stack, "reconcile", "--endpoint-url", stack.aws_url)
    assert run.returncode == 0, run.stdout + run.stderr
    wait_until(lambda: _usage(stack, "bob")["stored_bytes"] == before, timeout=120)
    wait_until(lambda: settled(stack), timeout=60)  # scripts/audit's quota recount holds
