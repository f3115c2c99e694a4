"""The tenancy rules table (dfd.identity.caller) on moto, through the handlers as API Gateway invokes them (claims in
requestContext.authorizer.jwt.claims): tenants see only what they hold, dedup stays global and invisible, "not
yours" answers exactly like "does not exist", /admin/* is admins only, no claims → 401."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import requests

from dfd.handlers import admin_hashes, admin_stats, download, ingest, metadata, upload
from tests.integration.support import Aws, get, post, put, sha, upload_as
from tests.support import ADMIN, ALICE, BOB, CAROL, DAVE, LambdaContext, api_event, call, sqs_batch

ROUTES = (
    (upload.handler, "POST", "/upload"),
    (metadata.handler, "GET", "/metadata/" + "a" * 64),
    (download.handler, "GET", "/download/" + "a" * 64),
    (admin_stats.handler, "GET", "/admin/stats"),
    (admin_stats.handler, "GET", "/admin/stats/history"),
    (admin_stats.handler, "GET", "/admin/tenants"),
    (admin_hashes.handler, "GET", "/admin/hashes"),
)


def test_the_rules_table(aws: Aws) -> None:
    data = b"acme's report" * 50
    answer = upload_as(aws, ALICE, data, "report.pdf")
    upload_id, digest = answer["upload_id"], sha(data)
    for route in ("metadata", "download"):
        for user in (ALICE, CAROL):  # owner, same tenant: the tenant's view
            status, body = get(route, upload_id, user)
            assert status == 200, body
            status, body = get(route, digest, user)
            assert status == 200 and body["filename"] == "report.pdf"
        for user in (BOB, DAVE):  # other tenants: 404, never 403
            assert get(route, upload_id, user)[0] == 404
            assert get(route, digest, user)[0] == 404
        assert get(route, upload_id, ADMIN)[0] == 200
        assert get(route, digest, ADMIN)[0] == 200
    # precheck: 409 for the tenant (carol), 201 for another tenant (bob: must upload)
    status, body = post(CAROL, data, "carol.pdf", digest=True)
    assert status == 409 and body["duplicate"] is True and body["file"]["filename"] == "report.pdf"
    assert body["file"]["upload_count"] == 2
    status, own = get("metadata", body["upload_id"], CAROL)
    assert status == 200 and own["status"] == "duplicate" and own["filename"] == "carol.pdf"
    assert get("metadata", body["upload_id"], BOB)[0] == 404
    status, body = post(BOB, data, "bob.pdf", digest=True)
    assert status == 201 and "upload_url" in body
    for handler, method, path in ROUTES[3:]:
        for user in (ALICE, BOB, DAVE):
            status, body = call(handler, api_event(method, path, user=user))
            assert status == 403 and body["error"]["code"] == "forbidden"
        assert call(handler, api_event(method, path, user=ADMIN))[0] == 200
    aws.assert_invariants()


def test_not_yours_and_nonexistent_answer_the_same(aws: Aws) -> None:
    data = b"secret" * 40
    answer = upload_as(aws, ALICE, data, "secret.txt")
    missing_hash, missing_upload = "b" * 64, "c" * 32
    for route in ("metadata", "download"):
        for theirs_id, missing_id in ((sha(data), missing_hash), (answer["upload_id"], missing_upload)):
            status, theirs = get(route, theirs_id, BOB)
            status_missing, missing = get(route, missing_id, BOB)
            assert status == status_missing == 404
            # identical but for the id the caller sent
            assert json.dumps(theirs).replace(theirs_id, "ID") == json.dumps(missing).replace(missing_id, "ID")


def test_a_cross_tenant_duplicate_is_stored_for_the_uploader(aws: Aws) -> None:
    data = b"shared bytes" * 100
    upload_as(aws, ALICE, data, "alice.bin", "text/x-alice")
    before = call(admin_stats.handler, api_event("GET", "/admin/stats"))[1]
    answer = upload_as(aws, BOB, data, "bob.bin", "application/x-bob")
    assert not any(o["Key"] == answer["key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket)["Contents"])
    status, view = get("metadata", answer["upload_id"], BOB)
    assert status == 200 and view["status"] == "stored"
    assert view["file"]["filename"] == "bob.bin" and view["file"]["upload_count"] == 1
    # nothing of alice's upload shows through, not even the content type she declared
    assert view["file"]["content_type"] == "application/x-bob"
    assert "alice" not in json.dumps(view)
    for ident in (sha(data), answer["upload_id"]):
        status, link = get("download", ident, BOB)
        assert status == 200 and link["filename"] == "bob.bin" and link["content_type"] == "application/x-bob"
        fetched = requests.get(link["download_url"], timeout=10)
        assert fetched.content == data and "bob.bin" in fetched.headers.get("content-disposition", "")
        assert fetched.headers["content-type"] == "application/x-bob"
    after = call(admin_stats.handler, api_event("GET", "/admin/stats"))[1]
    assert after["duplicates_avoided"] == before["duplicates_avoided"] + 1
    assert after["total_s3_size_saved"] == before["total_s3_size_saved"] + len(data)
    assert after["total_files"] == before["total_files"] == 1
    # alice's view is untouched by bob's upload
    assert get("metadata", sha(data), ALICE)[1]["upload_count"] == 1
    # bob uploading it again: a duplicate for bob's tenant now
    again = upload_as(aws, BOB, data, "bob-again.bin")
    assert get("metadata", again["upload_id"], BOB)[1]["status"] == "duplicate"
    aws.assert_invariants()


def test_two_tenants_upload_one_content_concurrently(aws: Aws) -> None:
    data = b"racing content" * 64
    answers = [post(user, data, f"{user.username}.bin")[1] for user in (ALICE, BOB, CAROL)]
    for answer in answers:
        assert put(answer, data).status_code == 200
    bodies = [m["Body"] for m in aws.drain()]
    threads = [threading.Thread(target=ingest.handler, args=(sqs_batch(body), LambdaContext())) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(aws.ddb.scan(TableName=aws.settings.files_table)["Items"]) == 1
    refs = [r for r in aws.ddb.scan(TableName=aws.settings.tenant_files_table)["Items"] if "upload_count" in r]
    assert sorted(r["tenant"]["S"] for r in refs) == ["acme", "globex"]
    statuses = {
        user.username: get("metadata", a["upload_id"], user)[1]["status"]
        for user, a in zip((ALICE, BOB, CAROL), answers, strict=True)
    }
    assert statuses["bob"] == "stored" and sorted([statuses["alice"], statuses["carol"]]) == ["duplicate", "stored"]
    stats = call(admin_stats.handler, api_event("GET", "/admin/stats"))[1]
    assert stats["total_uploads"] == 3 and stats["duplicates_avoided"] == 2
    aws.assert_invariants()


@pytest.mark.parametrize(("handler", "method", "path"), ROUTES)
def test_no_claims_is_401(aws: Aws, handler: Any, method: str, path: str) -> None:
    status, body = call(handler, api_event(method, path, user=None, body={"filename": "x", "size": 1}))
    assert status == 401 and body["error"]["code"] == "unauthorized"
