"""Multipart uploads over HTTP against the local stack: the API Gateway routes with bearer tokens, real
PUTs of the parts to the emulator's presigned UploadPart URLs (the local S3 guard checks their signatures and
per-part SHA-256 as S3 does), resume from GET /uploads/{id}/parts, completion, and the ingest of the assembled
object — hashed with its parallel ranged read, the file being above the ingest's parallel threshold — up to the
download of the same bytes. Then bad input, the owner rules, and parts refused by the S3 guard.
"""

from __future__ import annotations

import base64
import hashlib
import random
from typing import Any

import pytest
import requests

from dfd.core.config import PARALLEL_THRESHOLD
from tests.e2e.e2e_helpers import RunningStack, wait_until

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024
PART = 5 * MIB  # the local stack's part size (S3's minimum)
DATA = random.Random(14).randbytes(3 * PART + 2 * MIB + 123)  # parts of 5, 5, 5 MiB and a tail: 4 parts
PART_COUNT = 4
INGEST_TIMEOUT = 60.0


def chunk(number: int, data: bytes = DATA) -> bytes:
    return data[(number - 1) * PART : number * PART]


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def call(
    stack: RunningStack,
    method: str,
    path: str,
    user: str | None = "alice",
    headers: dict[str, str] | None = None,
    **kw: Any,
) -> requests.Response:
    """An API call as `user` (None: without a token)."""
    sent = (stack.auth(user) if user else {}) | (headers or {})
    return requests.request(method, stack.api_url + path, headers=sent, timeout=30, **kw)


def error_code(response: requests.Response, status: int) -> str:
    assert response.status_code == status, f"{response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/json"), response.headers
    error: dict[str, Any] = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    return str(error["code"])


def create(stack: RunningStack, size: int = len(DATA), user: str = "alice", **extra: Any) -> dict[str, Any]:
    body = {"filename": "big.bin", "size": size, "multipart": True, "content_type": "application/octet-stream"}
    response = call(stack, "POST", "/upload", user, json=body | extra)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def presign(
    stack: RunningStack, upload_id: str, numbers: list[int], checksums: bool = True, user: str = "alice"
) -> dict[int, dict[str, Any]]:
    wanted = [{"part_number": n, **({"checksum_sha256": b64sha(chunk(n))} if checksums else {})} for n in numbers]
    response = call(stack, "POST", f"/uploads/{upload_id}/parts", user, json={"parts": wanted})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["expires_in"] > 0
    return {part["part_number"]: part for part in answer["parts"]}


def put(part: dict[str, Any], body: bytes) -> requests.Response:
    assert part["method"] == "PUT"
    return requests.put(part["url"], data=body, headers=part["headers"], timeout=60)


def test_multipart_upload_resumed_completed_ingested_and_downloaded(stack: RunningStack) -> None:
    assert len(DATA) > PARALLEL_THRESHOLD  # the ingest reads the object with parallel ranged GETs
    digest = hashlib.sha256(DATA).hexdigest()
    created = create(stack)
    upload_id = created["upload_id"]
    assert created["multipart"] is True and "upload_url" not in created
    assert (created["part_size"], created["part_count"]) == (PART, PART_COUNT)
    assert created["bucket"] == stack.bucket and created["key"].endswith(upload_id)

    # nothing in S3 yet: the S3 multipart upload comes with the first parts call
    listed = call(stack, "GET", f"/uploads/{upload_id}/parts")
    assert listed.status_code == 200, listed.text
    assert listed.json() | {"parts": None} == {
        "upload_id": upload_id,
        "parts": None,
        "part_size": PART,
        "part_count": PART_COUNT,
        "size": len(DATA),
        "status": "pending",
    }
    assert listed.json()["parts"] == []

    # ---- the first session: every part presigned with its SHA-256, parts 1 and 3 sent, then the client stops
    parts = presign(stack, upload_id, [1, 2, 3, 4])
    for number, part in parts.items():
        assert part["headers"] == {
            "content-length": str(len(chunk(number))),
            "x-amz-checksum-sha256": b64sha(chunk(number)),
        }
    etags = {}
    for number in (1, 3):
        response = put(parts[number], chunk(number))
        assert response.status_code == 200, response.text
        etags[number] = response.headers["ETag"]
    # a part whose bytes differ from its signed checksum is refused as S3 does, and not kept
    corrupted = bytearray(chunk(2))
    corrupted[1000] ^= 0xFF
    refused = put(parts[2], bytes(corrupted))
    assert refused.status_code == 400, refused.text
    assert "<Code>BadDigest</Code>" in refused.text
    assert "The SHA256 you specified did not match the calculated checksum." in refused.text
    # ... and so is a body of another length (the signed Content-Length)
    refused = put(parts[4], chunk(4) + b"x")
    assert refused.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in refused.text, refused.text

    incomplete = call(stack, "POST", f"/uploads/{upload_id}/complete")
    assert error_code(incomplete, 409) == "incomplete"
    assert incomplete.json()["error"]["details"] == {"missing": [2, 4], "wrong_size": []}

    # ---- resume: what S3 holds, then only the missing parts presigned and sent
    listed = call(stack, "GET", f"/uploads/{upload_id}/parts").json()
    held = {p["part_number"]: p for p in listed["parts"]}
    assert sorted(held) == [1, 3]
    for number in (1, 3):
        assert held[number]["etag"] == etags[number] and held[number]["size"] == PART
    missing = [n for n in range(1, PART_COUNT + 1) if n not in held]
    resumed = presign(stack, upload_id, missing)
    assert sorted(resumed) == [2, 4]
    for number, part in resumed.items():
        response = put(part, chunk(number))
        assert response.status_code == 200, response.text
        etags[number] = response.headers["ETag"]

    wrong = call(
        stack,
        "POST",
        f"/uploads/{upload_id}/complete",
        json={"parts": [{"part_number": 1, "etag": '"0123456789abcdef0123456789abcdef"'}]},
    )
    assert error_code(wrong, 409) == "etag_mismatch"
    body = {"parts": [{"part_number": n, "etag": etags[n]} for n in sorted(etags)]}
    completed = call(stack, "POST", f"/uploads/{upload_id}/complete", json=body)
    assert completed.status_code == 202, completed.text
    assert completed.json() == {"upload_id": upload_id, "status": "pending"}
    again = call(stack, "POST", f"/uploads/{upload_id}/complete")
    assert again.status_code == 202 and again.json()["upload_id"] == upload_id, again.text

    def stored() -> dict[str, Any] | None:
        response = call(stack, "GET", f"/metadata/{upload_id}")
        document: dict[str, Any] = response.json()
        return document if response.status_code == 200 and document.get("status") == "stored" else None

    document = wait_until(stored, timeout=INGEST_TIMEOUT)
    assert document["hash"] == digest and document["size"] == len(DATA), document
    assert error_code(call(stack, "GET", f"/uploads/{upload_id}/parts"), 409) == "not_pending"
    finished = call(stack, "POST", f"/uploads/{upload_id}/complete")
    assert finished.status_code == 202 and finished.json() == {"upload_id": upload_id, "status": "stored"}

    link = call(stack, "GET", f"/download/{upload_id}")
    assert link.status_code == 200, link.text
    fetched = requests.get(link.json()["download_url"], timeout=60)
    assert fetched.status_code == 200 and fetched.content == DATA


def test_bad_input_owner_rules_and_checksum_rules(stack: RunningStack) -> None:
    # POST /upload: a multipart upload has at least 5 MiB
    small = call(stack, "POST", "/upload", json={"filename": "s.bin", "size": PART - 1, "multipart": True})
    assert error_code(small, 400) == "validation_error"
    # the client's part size: used as given, refused outside 5 MiB .. 5 GiB or beyond 10,000 parts
    chosen = call(
        stack, "POST", "/upload", json={"filename": "p.bin", "size": 13 * MIB, "multipart": True, "part_size": 6 * MIB}
    )
    assert chosen.status_code == 201 and (chosen.json()["part_size"], chosen.json()["part_count"]) == (6 * MIB, 3)
    bounds = ((PART - 1, 13 * MIB), (5 * 1024 * MIB + 1, 6 * 1024 * MIB), ("6291456", 13 * MIB), (PART, PART * 10_001))
    for part_size, size in bounds:
        refused = call(stack, "POST", "/upload", json={"filename": "p.bin", "size": size, "part_size": part_size})
        assert error_code(refused, 400) == "validation_error", refused.text
        assert refused.json()["error"]["details"]["field"] == "part_size"

    upload_id = create(stack)["upload_id"]
    parts_path, complete_path = f"/uploads/{upload_id}/parts", f"/uploads/{upload_id}/complete"
    bad_bodies: list[Any] = [
        {"parts": [{"part_number": 0}]},
        {"parts": [{"part_number": PART_COUNT + 1}]},
        {"parts": [{"part_number": "1"}]},
        {"parts": [{"part_number": 1}, {"part_number": 1}]},
        {"parts": [{"part_number": 1, "checksum_sha256": "not base64 of 32 bytes"}]},
        {"parts": [{"part_number": 1, "extra": True}]},
        {"parts": []},
        {"parts": [{"part_number": 1}] * 101},
        {"parts": "1"},
        {"part": [{"part_number": 1}]},
        [1, 2],
    ]
    for body in bad_bodies:
        assert error_code(call(stack, "POST", parts_path, json=body), 400) == "validation_error", body
    not_json = call(stack, "POST", parts_path, data=b"{not json", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json", not_json.text
    assert error_code(call(stack, "POST", complete_path, json={"parts": [{"part_number": 9}]}), 400) == (
        "validation_error"
    )

    # who may call: another tenant's upload does not exist for them, a colleague is not its owner
    for method, path in (("POST", parts_path), ("GET", parts_path), ("POST", complete_path)):
        json_body = {"parts": [{"part_number": 1}]} if path == parts_path and method == "POST" else None
        assert error_code(call(stack, method, path, "bob", json=json_body), 404) == "not_found", (method, path)
        assert error_code(call(stack, method, path, "carol", json=json_body), 403) == "not_owner", (method, path)
        assert call(stack, method, path, None, json=json_body).status_code == 401, (method, path)
    assert error_code(call(stack, "GET", "/uploads/" + "0" * 32 + "/parts"), 404) == "not_found"
    assert error_code(call(stack, "GET", "/uploads/not-an-id/parts"), 400) == "invalid_id"

    # per-part checksums are all-or-nothing once the first parts call gave them
    first = presign(stack, upload_id, [1])
    assert "x-amz-checksum-sha256" in first[1]["headers"]
    without = call(stack, "POST", parts_path, json={"parts": [{"part_number": 2}]})
    assert error_code(without, 400) == "checksum_required"
    # the guard refuses a PUT that leaves the signed checksum header out
    dropped = requests.put(first[1]["url"], data=chunk(1), headers={"content-length": str(PART)}, timeout=60)
    assert dropped.status_code == 403 and "SignatureDoesNotMatch" in dropped.text, dropped.text
    # a checksum that is not the part's own: signed as given, refused by S3 when the bytes arrive
    lying = call(
        stack, "POST", parts_path, json={"parts": [{"part_number": 2, "checksum_sha256": b64sha(chunk(3))}]}
    ).json()["parts"][0]
    refused = put(lying, chunk(2))
    assert refused.status_code == 400 and "<Code>BadDigest</Code>" in refused.text, refused.text
    assert [p["part_number"] for p in call(stack, "GET", parts_path).json()["parts"]] == []

    # a single-PUT upload has no parts
    single = call(stack, "POST", "/upload", json={"filename": "one.txt", "size": 10})
    assert single.status_code == 201 and single.json()["multipart"] is False, single.text
    single_id = single.json()["upload_id"]
    assert error_code(call(stack, "GET", f"/uploads/{single_id}/parts"), 409) == "not_multipart"
    assert error_code(call(stack, "POST", f"/uploads/{single_id}/complete"), 409) == "not_multipart"
