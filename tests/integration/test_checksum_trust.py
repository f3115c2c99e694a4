"""The checksum theft on moto: bob's presigned PUT (no sha256 declared) carries an UNSIGNED SHA-256 claiming alice's
content. moto stores the claimed checksum without checking it (as the local stack's S3 did before its guard
refused unsigned headers); the ingest must not trust it: bob's upload is his own bytes, alice's stay hers."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import requests

from dfd.handlers import download, ingest, metadata, upload
from tests.integration.conftest import Aws
from tests.support import ALICE, BOB, ApiUser, LambdaContext, api_event, call, sqs_batch

ALICE_DATA = b"alice's quarterly numbers, confidential\n" * 50
JUNK = b"bob's junk\n" * 30


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def post_upload(user: ApiUser, data: bytes, **extra: Any) -> dict[str, Any]:
    status, answer = call(
        upload.handler, api_event("POST", "/upload", body={"filename": "f.bin", "size": len(data), **extra}, user=user)
    )
    assert status == 201, answer
    return answer


def deliver(aws: Aws) -> None:
    messages = aws.drain()
    assert messages, "S3 sent no notification"
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}


def forged_put(answer: dict[str, Any], body: bytes, claimed: bytes) -> None:
    """The returned headers plus an unsigned checksum naming `claimed`'s SHA-256 (the body does not match it)."""
    headers = {
        **answer["headers"],
        "x-amz-sdk-checksum-algorithm": "SHA256",
        "x-amz-checksum-sha256": b64sha(claimed),
    }
    assert requests.put(answer["upload_url"], data=body, headers=headers, timeout=10).status_code == 200


def fetched(user: ApiUser, upload_id: str) -> bytes:
    status, link = call(download.handler, api_event("GET", f"/download/{upload_id}", user=user))
    assert status == 200, link
    return requests.get(link["download_url"], timeout=10).content


def test_an_unsigned_checksum_does_not_hand_bob_alices_bytes(aws: Aws) -> None:
    alice = post_upload(ALICE, ALICE_DATA, sha256=hashlib.sha256(ALICE_DATA).hexdigest())
    assert requests.put(alice["upload_url"], data=ALICE_DATA, headers=alice["headers"], timeout=10).status_code == 200
    deliver(aws)

    bob = post_upload(BOB, JUNK)
    forged_put(bob, JUNK, ALICE_DATA)
    stored = aws.s3.head_object(Bucket=aws.settings.bucket, Key=bob["key"], ChecksumMode="ENABLED")
    assert stored["ChecksumSHA256"] == b64sha(ALICE_DATA)  # the forgery took: moto kept the claimed checksum
    deliver(aws)

    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{bob['upload_id']}", user=BOB))
    assert status == 200 and meta["status"] == "stored" and meta["hash"] == hashlib.sha256(JUNK).hexdigest()
    assert fetched(BOB, bob["upload_id"]) == JUNK
    assert fetched(ALICE, alice["upload_id"]) == ALICE_DATA
    aws.assert_invariants()


def test_junk_claiming_an_unknown_hash_is_not_the_stored_copy_of_that_content(aws: Aws) -> None:
    bob = post_upload(BOB, JUNK)
    forged_put(bob, JUNK, ALICE_DATA)  # alice's content is not stored yet: bob would plant his junk as its copy
    deliver(aws)

    alice = post_upload(ALICE, ALICE_DATA, sha256=hashlib.sha256(ALICE_DATA).hexdigest())
    assert requests.put(alice["upload_url"], data=ALICE_DATA, headers=alice["headers"], timeout=10).status_code == 200
    deliver(aws)

    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{alice['upload_id']}", user=ALICE))
    assert status == 200 and meta["status"] == "stored"
    assert fetched(ALICE, alice["upload_id"]) == ALICE_DATA
    assert fetched(BOB, bob["upload_id"]) == JUNK
    aws.assert_invariants()
