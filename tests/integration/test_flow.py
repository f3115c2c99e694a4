"""The full path on moto: POST /upload → PUT with exactly the returned headers → S3 event (via SQS) → ingest →
metadata, download, stats, hashes."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
import requests

from dfd.handlers import admin_hashes, admin_stats, download, metadata
from dfdlocal.s3auth import Refused, verify_url
from tests.integration.support import Aws, deliver, post_upload, put, upload_bytes
from tests.support import api_event, call


def test_full_path(aws: Aws) -> None:
    data = b"the quick brown fox jumps over the lazy dog\n" * 1000
    digest = hashlib.sha256(data).hexdigest()
    status, answer = post_upload({"filename": "fox.txt", "size": len(data), "content_type": "text/plain"})
    assert status == 201
    assert answer["method"] == "PUT" and answer["key"] == f"uploads/{answer['upload_id']}"
    assert answer["expires_in"] > 0 and answer["expires_at"].endswith("Z")
    signed = parse_qs(urlparse(answer["upload_url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-length", "content-type", "if-none-match"} <= set(signed)

    status, pending = call(metadata.handler, api_event("GET", f"/metadata/{answer['upload_id']}"))
    assert status == 200 and pending["status"] == "pending" and pending["filename"] == "fox.txt"
    status, early = call(download.handler, api_event("GET", f"/download/{answer['upload_id']}"))
    assert status == 409 and early["error"]["code"] == "not_ready"

    assert put(answer, data).status_code == 200
    assert put(answer, data).status_code == 412  # If-None-Match: the URL cannot overwrite
    assert deliver(aws) == {"batchItemFailures": []}

    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{answer['upload_id']}"))
    assert status == 200
    assert meta["status"] == "stored" and meta["hash"] == digest and meta["file"]["size"] == len(data)
    status, file = call(metadata.handler, api_event("GET", f"/metadata/{digest}"))
    assert status == 200
    assert file["filename"] == "fox.txt" and file["content_type"] == "text/plain" and file["upload_count"] == 1

    status, link = call(download.handler, api_event("GET", f"/download/{answer['upload_id']}"))
    assert status == 200 and link["filename"] == "fox.txt" and link["size"] == len(data)
    fetched = requests.get(link["download_url"], timeout=10)
    assert fetched.status_code == 200 and fetched.content == data
    assert "fox.txt" in fetched.headers["Content-Disposition"]

    status, stats = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert status == 200
    assert stats["total_files"] == 1 and stats["total_bytes_stored"] == len(data)
    assert stats["total_uploads"] == 1 and stats["duplicates_avoided"] == 0
    aws.assert_invariants()


def test_same_content_twice_keeps_one_object(aws: Aws) -> None:
    data = b"same bytes" * 500
    first = upload_bytes(aws, data, "one.bin")
    second = upload_bytes(aws, data, "two.bin")
    keys = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket)["Contents"]]
    assert keys == [first["key"]]
    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{second['upload_id']}"))
    assert meta["status"] == "duplicate" and meta["filename"] == "two.bin" and meta["file"]["filename"] == "one.bin"
    status, link = call(download.handler, api_event("GET", f"/download/{second['upload_id']}"))
    assert status == 200 and link["filename"] == "two.bin"
    assert requests.get(link["download_url"], timeout=10).content == data
    _, stats = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert stats == {
        "total_files": 1,
        "total_bytes_stored": len(data),
        "total_uploads": 2,
        "duplicates_avoided": 1,
        "total_s3_size_saved": len(data),
        "deleted_uploads": 0,
        "dedup_ratio": 0.5,
    }
    aws.assert_invariants()


def test_precheck_409_credits_the_stored_size(aws: Aws) -> None:
    data = b"precheck" * 100
    digest = hashlib.sha256(data).hexdigest()
    upload_bytes(aws, data, "orig.bin", sha256=digest)
    status, body = post_upload({"filename": "again.bin", "size": 1, "sha256": digest})  # the claim is a lie
    assert status == 409 and body["duplicate"] is True
    assert body["file"]["hash"] == digest and body["file"]["size"] == len(data)
    assert "upload_url" not in body
    _, stats = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert stats["duplicates_avoided"] == 1 and stats["total_s3_size_saved"] == len(data)
    assert stats["total_uploads"] == 2
    aws.assert_invariants()


def test_presigned_url_signs_the_checksum_and_refuses_other_bytes(aws: Aws) -> None:
    data = b"checksummed content"
    digest = hashlib.sha256(data).hexdigest()
    status, answer = post_upload({"filename": "c.txt", "size": len(data), "sha256": digest})
    assert status == 201
    assert "x-amz-checksum-sha256" in answer["headers"]
    signed = parse_qs(urlparse(answer["upload_url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-length", "content-type", "if-none-match", "x-amz-checksum-sha256"} <= set(signed)
    assert answer["headers"]["x-amz-checksum-sha256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    # moto does not check signatures: verify the URL the way S3 does — it binds every returned header
    credentials = boto3.Session().get_credentials()
    secrets = {credentials.access_key: credentials.secret_key}.get
    verify_url("PUT", answer["upload_url"], answer["headers"], secrets)
    tampered = {
        "x-amz-checksum-sha256": base64.b64encode(b"0" * 32).decode(),
        "content-length": str(len(data) + 1),
        "content-type": "text/html",
    }
    for name, value in tampered.items():
        with pytest.raises(Refused):
            verify_url("PUT", answer["upload_url"], {**answer["headers"], name: value}, secrets)
    without = {k: v for k, v in answer["headers"].items() if k != "if-none-match"}
    with pytest.raises(Refused):
        verify_url("PUT", answer["upload_url"], without, secrets)
    assert put(answer, data).status_code == 200
    assert put(answer, data).status_code == 412


def test_hashes_pagination_over_three_pages(aws: Aws) -> None:
    digests = set()
    for i in range(7):
        data = f"file number {i}".encode()
        digests.add(hashlib.sha256(data).hexdigest())
        upload_bytes(aws, data, f"f{i}.txt")
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        query = {"limit": "3"} | ({"last_evaluated_key": token} if token else {})
        status, page = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query=query))
        assert status == 200, page
        pages += 1
        assert page["count"] == len(page["items"]) <= 3
        seen += [item["hash"] for item in page["items"]]
        assert all(set(item) >= {"hash", "size", "filename", "created_at", "upload_count"} for item in page["items"])
        token = page["last_evaluated_key"]
        if token is None:
            break
    assert pages >= 3
    assert sorted(seen) == sorted(digests)
    aws.assert_invariants()
