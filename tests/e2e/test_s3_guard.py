"""The local stack's S3 as strict as S3 for presigned requests, over HTTP: the checksum theft fails
at the guard and, planted behind it, at the ingest (the audit holds); every unsigned x-amz-* header is refused;
errors carry the bucket's CORS headers; a part for an aborted or completed upload is 404 NoSuchUpload."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import pytest
import requests

from tests.e2e.e2e_helpers import RunningStack, run_audit, wait_until

pytestmark = pytest.mark.e2e

ORIGIN = "http://127.0.0.1:3000"


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def post(stack: RunningStack, user: str, body: dict[str, Any]) -> requests.Response:
    return requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth(user), timeout=10)


def issued(stack: RunningStack, user: str, data: bytes, **extra: Any) -> dict[str, Any]:
    response = post(stack, user, {"filename": "f.bin", "size": len(data), **extra})
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def settled(stack: RunningStack, user: str, upload_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        meta: dict[str, Any] = requests.get(
            f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth(user), timeout=10
        ).json()
        return meta if meta.get("status") not in (None, "pending") else None

    return wait_until(done, timeout=30)


def downloaded(stack: RunningStack, user: str, upload_id: str) -> bytes:
    link = requests.get(f"{stack.api_url}/download/{upload_id}", headers=stack.auth(user), timeout=10).json()
    return requests.get(link["download_url"], timeout=10).content


def audit_holds(stack: RunningStack) -> None:
    run = run_audit(stack)
    assert run.returncode == 0 and "BROKEN" not in run.stdout, run.stdout + run.stderr


def test_the_checksum_theft_fails_at_the_guard_and_at_the_ingest(stack: RunningStack) -> None:
    secret = f"alice's secret {uuid.uuid4()}\n".encode() * 30
    alice = issued(stack, "alice", secret, sha256=hashlib.sha256(secret).hexdigest())
    assert requests.put(alice["upload_url"], data=secret, headers=alice["headers"], timeout=10).status_code == 200
    assert settled(stack, "alice", alice["upload_id"])["status"] == "stored"

    junk = b"x-amz-checksum-sha256:" + b64sha(secret).encode() + b"\n" + b"junk " * 40
    bob = issued(stack, "bob", junk)
    forged = {**bob["headers"], "x-amz-sdk-checksum-algorithm": "SHA256"}
    refused = requests.put(bob["upload_url"], data=junk, headers=forged, timeout=10)
    assert refused.status_code == 403 and "<Code>AccessDenied</Code>" in refused.text
    assert "x-amz-sdk-checksum-algorithm" in refused.text
    forged = {**bob["headers"], "x-amz-checksum-sha256": b64sha(secret), "x-amz-sdk-checksum-algorithm": "SHA256"}
    assert requests.put(bob["upload_url"], data=junk, headers=forged, timeout=10).status_code == 403

    # behind the guard (its own API, loopback only): the object at bob's key claims alice's hash anyway
    stack.client("s3").put_object(
        Bucket=stack.bucket, Key=bob["key"], Body=junk, ChecksumSHA256=b64sha(secret), Metadata={"dfd-tenant": "globex"}
    )
    meta = settled(stack, "bob", bob["upload_id"])
    assert meta["status"] == "stored" and meta["hash"] == hashlib.sha256(junk).hexdigest()
    assert downloaded(stack, "bob", bob["upload_id"]) == junk
    assert downloaded(stack, "alice", alice["upload_id"]) == secret
    audit_holds(stack)


UNSIGNED = [
    ("x-amz-sdk-checksum-algorithm", "SHA256"),
    ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
    ("x-amz-storage-class", "GLACIER"),
    ("x-amz-acl", "public-read"),
    ("x-amz-tagging", "owner=bob"),
    ("x-amz-website-redirect-location", "https://evil.example/"),
    ("x-amz-meta-note", "planted"),
]


@pytest.mark.parametrize(("name", "value"), UNSIGNED, ids=[name for name, _ in UNSIGNED])
def test_every_unsigned_header_is_refused_with_cors(stack: RunningStack, name: str, value: str) -> None:
    data = f"unsigned {name} {uuid.uuid4()}".encode()
    answer = issued(stack, "bob", data)
    headers = {**answer["headers"], name: value, "Origin": ORIGIN}
    refused = requests.put(answer["upload_url"], data=data, headers=headers, timeout=10)
    assert refused.status_code == 403, refused.text
    assert "There were headers present in the request which were not signed" in refused.text
    assert f"<HeadersNotSigned>{name}</HeadersNotSigned>" in refused.text
    assert refused.headers["Access-Control-Allow-Origin"] in ("*", ORIGIN)
    stored = stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix=answer["key"]).get("KeyCount", 0)
    assert stored == 0  # nothing was stored


def test_errors_carry_the_bucket_cors_headers(stack: RunningStack) -> None:
    data = f"cors {uuid.uuid4()}".encode()
    answer = issued(stack, "alice", data, sha256=hashlib.sha256(data).hexdigest())
    headers = {**answer["headers"], "Origin": ORIGIN}
    bad = requests.put(answer["upload_url"], data=data[:-1] + b"!", headers=headers, timeout=10)
    assert bad.status_code == 400 and "<Code>BadDigest</Code>" in bad.text
    ok = requests.put(answer["upload_url"], data=data, headers=headers, timeout=10)
    again = requests.put(answer["upload_url"], data=data, headers=headers, timeout=10)
    assert (ok.status_code, again.status_code) == (200, 412)
    for response in (bad, ok, again):
        assert response.headers["Access-Control-Allow-Origin"] in ("*", ORIGIN)
        assert "ETag" in response.headers["Access-Control-Expose-Headers"]


@pytest.mark.parametrize("ending", ["cancelled", "completed"])
def test_a_part_after_the_upload_ended_is_no_such_upload(stack: RunningStack, ending: str) -> None:
    size = 5 * 1024 * 1024  # one part (S3's minimum)
    data = (uuid.uuid4().bytes * (size // 16 + 1))[:size]
    created = post(stack, "alice", {"filename": "big.bin", "size": size, "multipart": True})
    assert created.status_code == 201, created.text
    upload = created.json()
    upload_id = upload["upload_id"]
    parts = requests.post(
        f"{stack.api_url}/uploads/{upload_id}/parts",
        json={"parts": [{"part_number": 1}]},
        headers=stack.auth("alice"),
        timeout=10,
    )
    assert parts.status_code == 200, parts.text
    (part,) = parts.json()["parts"]
    put = requests.put(part["url"], data=data, headers=part.get("headers") or {}, timeout=30)
    assert put.status_code == 200, put.text
    if ending == "cancelled":
        ended = requests.delete(f"{stack.api_url}/uploads/{upload_id}", headers=stack.auth("alice"), timeout=10)
    else:
        ended = requests.post(f"{stack.api_url}/uploads/{upload_id}/complete", headers=stack.auth("alice"), timeout=30)
    assert ended.status_code in (200, 202, 204), ended.text
    late = requests.put(part["url"], data=data, headers={**(part.get("headers") or {}), "Origin": ORIGIN}, timeout=30)
    assert late.status_code == 404 and "<Code>NoSuchUpload</Code>" in late.text, late.text
    assert late.headers["Access-Control-Allow-Origin"] in ("*", ORIGIN)
