"""S3 credentials against the local stack once their identity changes (dfd.identity.s3sessions): what credentials
issued with a revoked personal access token, or to a user since moved to another tenant or deleted, write is rejected
(`writer_revoked`: deleted, counted nowhere), never the old tenant's content; a deleted user's still-valid access
token gets none; the live sessions of a user are bounded (429 with Retry-After)."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config

from dfd.identity.s3access import prefix_for
from dfd.identity.s3sessions import MAX_LIVE_SESSIONS
from tests.e2e.e2e_helpers import RunningStack, make_user, wait_until

pytestmark = pytest.mark.e2e

DIRECTORY_CACHE = 61  # dfd.adapters.cognito caches each user's answer 60 s per process


def issue(stack: RunningStack, authorization: str) -> requests.Response:
    return requests.post(f"{stack.api_url}/me/s3-credentials", headers={"Authorization": authorization}, timeout=30)


def s3_of(answer: dict[str, Any]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=answer["endpoint_url"],
        region_name=answer["region"],
        aws_access_key_id=answer["AccessKeyId"],
        aws_secret_access_key=answer["SecretAccessKey"],
        aws_session_token=answer["SessionToken"],
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )


def upload_of(stack: RunningStack, owner: str, filename: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    """`owner`'s upload named `filename` once its status is one of `statuses`."""

    def found() -> dict[str, Any] | None:
        for page in stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table):
            for item in page["Items"]:
                upload = {k: next(iter(v.values())) for k, v in item.items()}
                mine = upload.get("owner") == owner and upload.get("filename") == filename
                if mine and upload.get("status") in statuses:
                    return upload
        return None

    return wait_until(found, timeout=60)


def write(stack: RunningStack, answer: dict[str, Any], name: str) -> str:
    key = answer["prefix"] + name
    s3_of(answer).put_object(Bucket=stack.bucket, Key=key, Body=f"{name} {time.time()}".encode())
    return key


def assert_rejected(stack: RunningStack, owner: str, key: str, name: str) -> None:
    upload = upload_of(stack, owner, name, ("rejected", "stored", "duplicate"))
    assert (upload["status"], upload.get("failure")) == ("rejected", "writer_revoked"), upload
    wait_until(lambda: not stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix=key).get("Contents"))


def test_revoked_token_moved_and_deleted_users(stack: RunningStack) -> None:
    run = str(int(time.time()))
    revoked = make_user(stack, f"revoke-pat-{run}", "tenant-acme")
    moved = make_user(stack, f"revoke-moved-{run}", "tenant-acme")
    deleted = make_user(stack, f"revoke-deleted-{run}", "tenant-acme")

    # a personal access token's credentials write until the token is revoked
    pat = requests.post(
        f"{stack.api_url}/me/tokens", json={"name": "s3"}, headers=stack.auth(f"revoke-pat-{run}"), timeout=30
    ).json()
    with_pat = issue(stack, f"Bearer {pat['token']}").json()
    write(stack, with_pat, "a.txt")
    upload_of(stack, revoked, "a.txt", ("stored",))
    gone = requests.delete(
        f"{stack.api_url}/me/tokens/{pat['id']}", headers=stack.auth(f"revoke-pat-{run}"), timeout=30
    )
    assert gone.status_code == 204
    assert_rejected(stack, revoked, write(stack, with_pat, "b.txt"), "b.txt")
    assert issue(stack, f"Bearer {pat['token']}").status_code == 401

    # a moved user's old credentials; a deleted user's still-valid access token
    old = issue(stack, f"Bearer {stack.token(f'revoke-moved-{run}')}").json()
    assert old["prefix"] == prefix_for("acme", moved)
    deleted_token = stack.token(f"revoke-deleted-{run}")
    before_deletion = issue(stack, f"Bearer {deleted_token}").json()
    idp, pool = stack.client("cognito-idp"), stack.cognito["user_pool_id"]
    idp.admin_remove_user_from_group(UserPoolId=pool, Username=f"revoke-moved-{run}", GroupName="tenant-acme")
    idp.admin_add_user_to_group(UserPoolId=pool, Username=f"revoke-moved-{run}", GroupName="tenant-globex")
    idp.admin_delete_user(UserPoolId=pool, Username=f"revoke-deleted-{run}")
    time.sleep(DIRECTORY_CACHE)
    assert_rejected(stack, moved, write(stack, old, "old-tenant.txt"), "old-tenant.txt")
    assert_rejected(stack, deleted, write(stack, before_deletion, "deleted.txt"), "deleted.txt")
    refused = issue(stack, f"Bearer {deleted_token}")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    # the moved user's new credentials are for the tenant they are in now
    assert issue(stack, f"Bearer {stack.token(f'revoke-moved-{run}')}").json()["prefix"] == prefix_for("globex", moved)


def test_a_users_live_sessions_are_bounded(stack: RunningStack) -> None:
    user = f"revoke-many-{int(time.time())}"
    make_user(stack, user, "tenant-acme")
    token = f"Bearer {stack.token(user)}"
    for _ in range(MAX_LIVE_SESSIONS):
        assert issue(stack, token).status_code == 201
    refused = issue(stack, token)
    assert refused.status_code == 429, refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 3600
    assert refused.json()["error"]["code"] == "too_many_requests"
