"""The local S3 decides on the request it then serves: a repeated query parameter, a virtual-hosted Host, a
target moto would read otherwise are refused or read as moto reads them; an UploadId acts on its own key's
upload only, whoever signs; a write that tags needs the tagging permission; a storage class the drop zone's move
cannot read is refused; a key over 1,024 bytes is S3's KeyTooLongError; a body of a form Content-Type is
stored as sent, with that type. Requests signed by botocore against the emulator with the template's
S3CredentialsRole and dfd.identity.s3access's session policy."""

from __future__ import annotations

import hashlib
import http.client
from typing import Any
from urllib.parse import quote, urlsplit

import boto3
import pytest
import requests
from botocore.config import Config

from dfd.handlers import upload
from dfdlocal.names import BUCKET
from tests.integration.support import Emulator, Local, empty_s3_stack, s3_client, s3_credentials
from tests.integration.test_s3_credentials_guard import (
    _ENDPOINT,
    ALICE,
    BOB,
    _code,
    _signed,
    refused,
    stored,
)
from tests.support import api_event
from tests.support import call as call_handler

EMPTY = hashlib.sha256(b"").hexdigest()


@pytest.fixture
def stack(emulator: Emulator) -> Emulator:
    _ENDPOINT[:] = [emulator.endpoint]
    return empty_s3_stack(emulator)


def _send(request: Any, body: bytes = b"") -> requests.Response:
    return requests.request(request.method, request.url, data=body, headers=dict(request.headers), timeout=10)


def _keys(stack: Emulator) -> list[str]:
    return [item["Key"] for item in stack.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])]


@pytest.mark.parametrize(
    "query",
    [
        f"list-type=2&prefix=uploads%2F&prefix={quote(ALICE, safe='')}",
        f"list-type=2&prefix={quote(ALICE, safe='')}&prefix=s3%2F",
        f"list-type=2&list-type=1&prefix={quote(ALICE, safe='')}",
        f"list-type=2&prefix={quote(ALICE, safe='')}&delimiter=%2F&delimiter=",
    ],
)
def test_a_repeated_query_parameter_lists_nothing(stack: Emulator, query: str) -> None:
    credentials = s3_credentials(stack, ALICE)
    s3_client(stack, credentials).put_object(Bucket=BUCKET, Key=ALICE + "mine.txt", Body=b"mine")
    stack.client("s3").put_object(Bucket=BUCKET, Key="uploads/theirs", Body=b"theirs")
    stack.client("s3").put_object(Bucket=BUCKET, Key=BOB + "bob.txt", Body=b"bob")
    request = _signed(credentials, "", b"", EMPTY, method="GET", path=f"/{BUCKET}?{query}")
    response = _send(request)
    assert (response.status_code, _code(response)) == (400, "InvalidArgument"), response.text
    assert "theirs" not in response.text and "bob.txt" not in response.text


def test_a_repeated_part_number_or_upload_id_is_refused(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    client = s3_client(stack, credentials)
    upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=ALICE + "big")["UploadId"]
    for query in (f"partNumber=1&partNumber=2&uploadId={upload_id}", f"partNumber=1&uploadId={upload_id}&uploadId=x"):
        request = _signed(
            credentials, "", b"part", "UNSIGNED-PAYLOAD", method="PUT", path=f"/{BUCKET}/{ALICE}big?{query}"
        )
        response = _send(request, b"part")
        assert (response.status_code, _code(response)) == (400, "InvalidArgument")
    assert client.list_parts(Bucket=BUCKET, Key=ALICE + "big", UploadId=upload_id).get("Parts", []) == []


def test_an_upload_id_acts_on_its_own_key_s_upload_only(stack: Emulator) -> None:
    bob = s3_client(stack, s3_credentials(stack, BOB))
    bob_id = bob.create_multipart_upload(Bucket=BUCKET, Key=BOB + "bob.bin")["UploadId"]
    bob.upload_part(Bucket=BUCKET, Key=BOB + "bob.bin", UploadId=bob_id, PartNumber=1, Body=b"bob's part")
    alice = s3_client(stack, s3_credentials(stack, ALICE))
    mine = ALICE + "mine.bin"
    calls = {
        "UploadPart": lambda: alice.upload_part(Bucket=BUCKET, Key=mine, UploadId=bob_id, PartNumber=2, Body=b"a"),
        "ListParts": lambda: alice.list_parts(Bucket=BUCKET, Key=mine, UploadId=bob_id),
        "Complete": lambda: alice.complete_multipart_upload(
            Bucket=BUCKET, Key=mine, UploadId=bob_id, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": "x"}]}
        ),
        "Abort": lambda: alice.abort_multipart_upload(Bucket=BUCKET, Key=mine, UploadId=bob_id),
    }
    for name, call in calls.items():
        refused(call, 404, "NoSuchUpload")
        assert [u["UploadId"] for u in stack.client("s3").list_multipart_uploads(Bucket=BUCKET)["Uploads"]] == [
            bob_id
        ], name
    own = stack.client("s3")  # the stack's own credentials are held to it too
    refused(lambda: own.list_parts(Bucket=BUCKET, Key="uploads/other", UploadId=bob_id), 404, "NoSuchUpload")
    assert len(bob.list_parts(Bucket=BUCKET, Key=BOB + "bob.bin", UploadId=bob_id)["Parts"]) == 1
    assert _keys(stack) == []


def test_the_upload_id_of_a_presigned_part_url_completes_nothing_elsewhere(stack: Emulator) -> None:
    own = stack.client("s3")
    key = "uploads/0123456789abcdef0123456789abcdef"
    upload_id = own.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    signer = boto3.client("s3", endpoint_url=stack.endpoint, config=Config(signature_version="s3v4"))
    url = signer.generate_presigned_url(
        "upload_part", Params={"Bucket": BUCKET, "Key": key, "UploadId": upload_id, "PartNumber": 1}
    )
    assert requests.put(url, data=b"part one", timeout=10).status_code == 200
    alice = s3_client(stack, s3_credentials(stack, ALICE))
    refused(
        lambda: alice.complete_multipart_upload(
            Bucket=BUCKET,
            Key=ALICE + "x",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": "x"}]},
        ),
        404,
        "NoSuchUpload",
    )
    # a SigV2 URL (which moto takes unverified) for that part at another key: no upload of that key
    sigv2 = own.generate_presigned_url(
        "upload_part", Params={"Bucket": BUCKET, "Key": "uploads/other", "UploadId": upload_id, "PartNumber": 1}
    )
    assert "AWSAccessKeyId=" in sigv2
    assert requests.put(sigv2, data=b"part one", timeout=10).status_code == 404
    assert _keys(stack) == []
    assert len(own.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id)["Parts"]) == 1


def test_prefix_credentials_complete_no_upload_at_an_upload_key(stack: Emulator) -> None:
    """The UploadId of the caller's own presigned part URL, at that URL's own key ``uploads/<id>``: the session
    grants no write there, so CompleteMultipartUpload (s3:PutObject on the key) is refused and nothing lands."""
    own = stack.client("s3")
    key = "uploads/fedcba9876543210fedcba9876543210"
    upload_id = own.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    signer = boto3.client("s3", endpoint_url=stack.endpoint, config=Config(signature_version="s3v4"))
    url = signer.generate_presigned_url(
        "upload_part", Params={"Bucket": BUCKET, "Key": key, "UploadId": upload_id, "PartNumber": 1}
    )
    etag = requests.put(url, data=b"part one", timeout=10).headers["ETag"]
    alice = s3_client(stack, s3_credentials(stack, ALICE))
    refused(
        lambda: alice.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=upload_id, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        ),
        403,
        "AccessDenied",
    )
    assert _keys(stack) == []
    assert len(own.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id)["Parts"]) == 1


def _virtual(credentials: dict[str, Any], stack: Emulator, path: str, body: bytes) -> requests.Response:
    """A PUT signed for, and sent with, the virtual-hosted Host ``<bucket>.localhost:<port>``."""
    host = f"{BUCKET}.localhost:{urlsplit(stack.endpoint).port}"
    request = _signed(credentials, "", body, hashlib.sha256(body).hexdigest(), {"Host": host}, path=path)
    return _send(request, body)


def test_a_virtual_hosted_request_addresses_the_key_of_its_whole_path(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    response = _virtual(credentials, stack, f"/{BUCKET}/{ALICE}f.txt", b"doubled")
    assert (response.status_code, _code(response)) == (403, "AccessDenied")  # the key <bucket>/s3/...
    assert _keys(stack) == []
    response = _virtual(credentials, stack, f"/{ALICE}f.txt", b"virtual")
    assert response.status_code == 200, response.text
    assert _keys(stack) == [ALICE + "f.txt"] and stored(stack, ALICE + "f.txt") == b"virtual"


OWN_SIGNATURE = {  # the stack's own credentials: moto checks no signature, the request checks hold all the same
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host,"
    " Signature=0"
}


@pytest.mark.parametrize(
    ("target", "issued"),
    [
        (f"/{BUCKET}/{ALICE}f.txt#?uploadId=x", True),
        (f"/{BUCKET}/{ALICE}f.txt#?uploadId=x", False),
        (f"/{BUCKET}/{ALICE}f%FF.txt", False),  # (issued credentials: their signature of the path is checked first)
    ],
)
def test_a_target_moto_would_read_otherwise_is_refused(stack: Emulator, target: str, issued: bool) -> None:
    """(A leading ``//`` never reaches the guards: the HTTP server folds it to one ``/``.)"""
    headers = OWN_SIGNATURE
    if issued:
        headers = dict(
            _signed(s3_credentials(stack, ALICE), ALICE + "f.txt", b"x", hashlib.sha256(b"x").hexdigest()).headers
        )
    parts = urlsplit(stack.endpoint)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    connection.request("PUT", target, body=b"x", headers=headers)
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    assert (response.status, "<Code>InvalidURI</Code>" in text) == (400, True), text
    assert _keys(stack) == []


def test_a_write_that_tags_its_object_is_refused(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    refused(lambda: client.put_object(Bucket=BUCKET, Key=ALICE + "t", Body=b"x", Tagging="a=b"), 403, "AccessDenied")
    refused(lambda: client.create_multipart_upload(Bucket=BUCKET, Key=ALICE + "t", Tagging="a=b"), 403, "AccessDenied")
    assert _keys(stack) == []


def test_a_storage_class_the_move_cannot_read_is_refused(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    for name in ("GLACIER", "DEEP_ARCHIVE"):
        refused(
            lambda name=name: client.put_object(Bucket=BUCKET, Key=ALICE + name, Body=b"x", StorageClass=name),
            403,
            "AccessDenied",
        )
        refused(
            lambda name=name: client.create_multipart_upload(Bucket=BUCKET, Key=ALICE + name, StorageClass=name),
            403,
            "AccessDenied",
        )
    assert _keys(stack) == []
    for name in ("STANDARD", "GLACIER_IR", "INTELLIGENT_TIERING"):
        client.put_object(Bucket=BUCKET, Key=ALICE + name, Body=b"x", StorageClass=name)
    assert sorted(_keys(stack)) == sorted(ALICE + name for name in ("STANDARD", "GLACIER_IR", "INTELLIGENT_TIERING"))


def test_a_key_over_1024_bytes_is_key_too_long(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    longest = ALICE + "x" * (1024 - len(ALICE))
    refused(lambda: client.put_object(Bucket=BUCKET, Key=longest + "x", Body=b"x"), 400, "KeyTooLongError")
    refused(lambda: stack.client("s3").put_object(Bucket=BUCKET, Key="uploads/" + "x" * 1017, Body=b"x"), 400, None)
    client.put_object(Bucket=BUCKET, Key=longest, Body=b"x")
    assert _keys(stack) == [longest]


FORM = "application/x-www-form-urlencoded"


def _as_stored(stack: Emulator, key: str) -> tuple[bytes, str, str]:
    """(bytes, GetObject's Content-Type, HeadObject's Content-Type) of the object at ``key``."""
    own = stack.client("s3")
    got = own.get_object(Bucket=BUCKET, Key=key)
    return got["Body"].read(), got["ContentType"], own.head_object(Bucket=BUCKET, Key=key)["ContentType"]


@pytest.mark.parametrize("content_type", [FORM, "multipart/form-data; boundary=x"])
def test_a_form_typed_object_is_stored_as_sent_and_reads_nobody_s_fields(stack: Emulator, content_type: str) -> None:
    bob = s3_client(stack, s3_credentials(stack, BOB))
    bob_id = bob.create_multipart_upload(Bucket=BUCKET, Key=BOB + "bob.bin")["UploadId"]
    alice = s3_client(stack, s3_credentials(stack, ALICE))
    own = stack.client("s3")
    fields = f"uploadId={bob_id}&partNumber=1".encode()
    bodies = {ALICE + "key": b"key=x&evil", ALICE + "fields": fields, ALICE + "bytes": bytes(range(256))}
    for key, body in bodies.items():  # header-signed, with the issued credentials
        alice.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType=content_type)
    # presigned (no Authorization: moto's dispatcher would read a form for an Action), Content-Type signed
    unsigned_action = b"Action=AssumeRoleWithWebIdentity&Version=2011-06-15&key=x"
    for key, body in {"uploads/action": unsigned_action, "uploads/bytes": b"\xff\xfe" + fields}.items():
        params = {"Bucket": BUCKET, "Key": key, "ContentType": content_type}
        url = own.generate_presigned_url("put_object", Params=params)
        response = requests.put(url, data=body, headers={"Content-Type": content_type}, timeout=10)
        assert response.status_code == 200, response.text
        bodies[key] = body
    for key, body in bodies.items():
        assert _as_stored(stack, key) == (body, content_type, content_type), key
    assert sorted(_keys(stack)) == sorted(bodies)
    assert bob.list_parts(Bucket=BUCKET, Key=BOB + "bob.bin", UploadId=bob_id).get("Parts", []) == []


def test_a_form_typed_multipart_upload_and_copy_keep_their_bytes_and_declared_type(stack: Emulator) -> None:
    bob = s3_client(stack, s3_credentials(stack, BOB))
    bob_id = bob.create_multipart_upload(Bucket=BUCKET, Key=BOB + "bob.bin")["UploadId"]
    credentials = s3_credentials(stack, ALICE)
    alice = s3_client(stack, credentials)
    key = ALICE + "m"
    mine = alice.create_multipart_upload(Bucket=BUCKET, Key=key, ContentType=FORM)["UploadId"]
    part = f"uploadId={bob_id}&partNumber=1&key=x".encode()
    # a part's form body is the part's bytes (S3 ignores its Content-Type), never fields read as the query's
    request = _signed(
        credentials,
        "",
        part,
        hashlib.sha256(part).hexdigest(),
        {"Content-Type": FORM},
        path=f"/{BUCKET}/{key}?partNumber=1&uploadId={mine}",
    )
    response = _send(request, part)
    assert response.status_code == 200, response.text
    (listed,) = alice.list_parts(Bucket=BUCKET, Key=key, UploadId=mine)["Parts"]
    assert listed["Size"] == len(part)
    assert bob.list_parts(Bucket=BUCKET, Key=BOB + "bob.bin", UploadId=bob_id).get("Parts", []) == []
    alice.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=mine, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": listed["ETag"]}]}
    )
    assert _as_stored(stack, key) == (part, FORM, FORM)
    own = stack.client("s3")
    own.put_object(Bucket=BUCKET, Key="uploads/src", Body=b"copied", ContentType="text/plain")
    own.copy_object(
        Bucket=BUCKET,
        Key="uploads/copy",
        CopySource={"Bucket": BUCKET, "Key": "uploads/src"},
        MetadataDirective="REPLACE",
        ContentType=FORM,
    )
    assert _as_stored(stack, "uploads/copy") == (b"copied", FORM, FORM)
    assert sorted(_keys(stack)) == sorted([key, "uploads/src", "uploads/copy"])


def test_an_upload_declaring_a_form_content_type_is_stored(local: Local) -> None:
    """POST /upload accepts the type and presigns it (as on AWS); the PUT stores the bytes, ingest the file."""
    data = b"uploadId=x&partNumber=1&key=other&Action=AssumeRoleWithWebIdentity&" * 10
    body = {"filename": "form.txt", "size": len(data), "content_type": FORM}
    status, answer = call_handler(upload.handler, api_event("POST", "/upload", body=body))
    assert status == 201, answer
    assert answer["headers"]["content-type"] == FORM
    response = requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10)
    assert response.status_code == 200, response.text
    local.deliver()
    item = local.upload_item(answer["upload_id"])
    assert (item["status"], item["content_type"], item["size"]) == ("stored", FORM, str(len(data))), item
    assert item["hash"] == hashlib.sha256(data).hexdigest()
    local.assert_invariants()
