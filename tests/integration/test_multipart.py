"""Multipart uploads on moto, through the handlers: create → presign parts → PUT them (requests through
mock_aws) → list → complete → S3 event → ingest (the body hashed) → GET /metadata; resume, incomplete and
wrong-size parts, completing twice, owner rules, abort."""

from __future__ import annotations

import base64
import hashlib

import pytest

from dfd import deps
from dfd.handlers import metadata, upload
from dfd.handlers import multipart as parts_handler
from dfd.identity.caller import caller_from_claims
from tests import support
from tests.integration.support import ALICE_CLAIMS as ALICE
from tests.integration.support import DATA, PART, Aws, as_user, create, deliver, put_parts, route
from tests.support import api_event, call

CAROL = support.CAROL.claims()
BOB = support.BOB.claims()


@pytest.fixture(autouse=True)
def small_parts(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of 5 MiB (S3's minimum), as the local stack may use."""
    monkeypatch.setenv("MULTIPART_MIN_PART_BYTES", str(PART))
    deps.reset()


def test_create_presign_put_list_complete_ingest(aws: Aws) -> None:
    answer = create(sha256=hashlib.sha256(DATA).hexdigest())
    assert answer["multipart"] is True and answer["part_size"] == PART and answer["part_count"] == 3
    assert "upload_url" not in answer and "s3_upload_id" not in answer
    upload_id = answer["upload_id"]
    assert route("GET", upload_id, "parts", ALICE) == (
        200,
        {
            "upload_id": upload_id,
            "parts": [],
            "part_size": PART,
            "part_count": 3,
            "size": len(DATA),
            "status": "pending",
        },
    )
    wanted = {"parts": [{"part_number": n} for n in (1, 2, 3)]}
    status, presigned = route("POST", upload_id, "parts", ALICE, wanted)
    assert status == 200, presigned
    assert [p["headers"] for p in presigned["parts"]] == [
        {"content-length": str(PART)},
        {"content-length": str(PART)},
        {"content-length": "4000"},
    ]
    etags = put_parts(presigned, [1, 3])
    # resume: S3 holds 1 and 3; completing names the missing part
    status, listed = route("GET", upload_id, "parts", ALICE)
    assert [(p["part_number"], p["size"], p["etag"]) for p in listed["parts"]] == [
        (1, PART, etags[1]),
        (3, 4000, etags[3]),
    ]
    status, refused = route("POST", upload_id, "complete", ALICE)
    assert status == 409 and refused["error"]["code"] == "incomplete"
    assert refused["error"]["details"] == {"missing": [2], "wrong_size": []}
    status, again = route("POST", upload_id, "parts", ALICE, {"parts": [{"part_number": 2}]})
    etags |= put_parts(again, [2])
    assert not aws.drain()  # nothing is an object yet
    completion = {"parts": [{"part_number": n, "etag": e} for n, e in sorted(etags.items())]}
    assert route("POST", upload_id, "complete", ALICE, completion) == (
        202,
        {"upload_id": upload_id, "status": "pending"},
    )
    assert route("POST", upload_id, "complete", ALICE) == (202, {"upload_id": upload_id, "status": "pending"})
    head = aws.s3.head_object(Bucket=answer["bucket"], Key=answer["key"])
    assert head["ContentLength"] == len(DATA) and head["ETag"].strip('"').endswith("-3")
    assert head["Metadata"] == {"dfd-tenant": "acme"}  # the ingest's tenant hint, as a single PUT signs it

    assert deliver(aws) == {"batchItemFailures": []}
    status, body = call(metadata.handler, api_event("GET", f"/metadata/{upload_id}"))
    assert status == 200 and body["status"] == "stored", body
    assert body["file"]["hash"] == hashlib.sha256(DATA).hexdigest()
    assert route("POST", upload_id, "complete", ALICE) == (202, {"upload_id": upload_id, "status": "stored"})
    status, late = route("POST", upload_id, "parts", ALICE, {"parts": [{"part_number": 1}]})
    assert status == 409 and late["error"]["details"] == {"status": "stored"}
    aws.assert_invariants()


def test_wrong_size_part_and_checksummed_parts(aws: Aws) -> None:
    answer = create()
    upload_id = answer["upload_id"]
    checksums = [hashlib.sha256(DATA[i * PART : (i + 1) * PART]).digest() for i in range(3)]
    wanted = {
        "parts": [
            {"part_number": n + 1, "checksum_sha256": base64.b64encode(c).decode()} for n, c in enumerate(checksums)
        ]
    }
    status, presigned = route("POST", upload_id, "parts", ALICE, wanted)
    assert status == 200 and all("x-amz-checksum-sha256" in p["headers"] for p in presigned["parts"])
    put_parts(presigned, [1, 2, 3])
    # part 3 again, with other bytes of another length, straight through the S3 API (a misbehaving client)
    record = deps.repository().get_upload(upload_id)
    assert record is not None
    aws.s3.upload_part(
        Bucket=answer["bucket"], Key=answer["key"], UploadId=record.s3_upload_id, PartNumber=3, Body=b"short"
    )
    status, refused = route("POST", upload_id, "complete", ALICE)
    assert status == 409 and refused["error"]["details"] == {"missing": [], "wrong_size": [3]}
    status, needs = route("POST", upload_id, "parts", ALICE, {"parts": [{"part_number": 3}]})
    assert status == 400 and needs["error"]["code"] == "checksum_required"


def test_owner_rules_and_bad_input(aws: Aws) -> None:
    upload_id = create()["upload_id"]
    assert route("GET", upload_id, "parts", BOB)[0] == 404
    status, body = route("POST", upload_id, "complete", CAROL)
    assert status == 403 and body["error"]["code"] == "not_owner"
    for bad in ({"parts": [{"part_number": 4}]}, {"parts": [{"part_number": 1}] * 2}, {"parts": []}, ["x"]):
        status, body = route("POST", upload_id, "parts", ALICE, bad)
        assert status == 400, (bad, body)
    event = as_user(api_event("POST", f"/uploads/{upload_id}/parts", raw_body="{not json"), ALICE)
    event["pathParameters"] = {"id": upload_id}
    assert call(parts_handler.handler, event)[0] == 400
    status, body = call(upload.handler, api_event("POST", "/upload", body={"filename": "a", "size": 10}))
    assert status == 201 and body["multipart"] is False
    status, body = call(
        upload.handler, api_event("POST", "/upload", body={"filename": "a", "size": 10, "multipart": True})
    )
    assert status == 400
    assert route("GET", "f" * 32, "parts", ALICE)[0] == 404
    no_claims = api_event("GET", f"/uploads/{upload_id}/parts", user=None)
    no_claims["pathParameters"] = {"id": upload_id}
    assert call(parts_handler.handler, no_claims)[0] == 401


def test_abort(aws: Aws) -> None:
    upload_id = create()["upload_id"]
    status, presigned = route("POST", upload_id, "parts", ALICE, {"parts": [{"part_number": 1}]})
    put_parts(presigned, [1])
    caller = caller_from_claims(ALICE)
    assert deps.multipart_service().abort(caller, upload_id) == {"upload_id": upload_id, "status": "deleted"}
    assert aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads", []) == []
    status, body = route("POST", upload_id, "complete", ALICE)
    assert status == 409 and body["error"]["details"] == {"status": "deleted"}
