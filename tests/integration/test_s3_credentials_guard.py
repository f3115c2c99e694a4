"""The local S3 with prefix-scoped credentials issued by the emulator's STS (AssumeRole on the template's
S3CredentialsRole with dfd.identity.s3access's session policy), requests signed by botocore itself: writes and multipart
calls under the prefix pass; every other key, every read, ACLs, SSE-C, listing outside the prefix, expired or
forged credentials are refused as S3 refuses them; aws-chunked bodies are decoded with every chunk signature,
the trailer signature and the trailing checksum verified, and moto stores the decoded bytes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import boto3
import pytest
import requests
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha256Checksum

from dfd.identity.s3access import prefix_for
from dfdlocal import s3auth, sigv4
from dfdlocal.names import ACCOUNT_ID, BUCKET, REGION
from tests.integration.support import Emulator, empty_s3_stack, s3_client, s3_credentials

ALICE = prefix_for("acme", "alice-sub")
BOB = prefix_for("acme", "bob-sub")
PART = 5 * 1024 * 1024  # S3's smallest part but the last


@pytest.fixture
def stack(emulator: Emulator) -> Emulator:
    return empty_s3_stack(emulator)


def refused(call: Any, status: int, code: str | None) -> None:
    with pytest.raises(ClientError) as error:
        call()
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == status, error.value.response
    if code is not None:  # HEAD answers carry no body, hence no code
        assert error.value.response["Error"]["Code"] == code


def stored(stack: Emulator, key: str) -> bytes:
    body: bytes = stack.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return body


# --------------------------------------------------------------------------------------------------------
# What the credentials may do
# --------------------------------------------------------------------------------------------------------
def test_put_object_under_the_prefix(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    client.put_object(Bucket=BUCKET, Key=ALICE + "notes/a.txt", Body=b"alice's notes")
    assert stored(stack, ALICE + "notes/a.txt") == b"alice's notes"


def test_multipart_calls_under_the_prefix(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    key = ALICE + "big.bin"
    data = bytes(range(256)) * (PART // 256) + b"tail"
    upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etags = [
        client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk)["ETag"]
        for number, chunk in ((1, data[:PART]), (2, data[PART:]))
    ]
    listed = client.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id)["Parts"]
    assert [part["ETag"] for part in listed] == etags
    client.complete_multipart_upload(
        Bucket=BUCKET,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    assert stored(stack, key) == data
    aborted = client.create_multipart_upload(Bucket=BUCKET, Key=ALICE + "gone.bin")["UploadId"]
    client.abort_multipart_upload(Bucket=BUCKET, Key=ALICE + "gone.bin", UploadId=aborted)
    assert "Uploads" not in stack.client("s3").list_multipart_uploads(Bucket=BUCKET)


def test_listing_inside_the_prefix_only(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    client.put_object(Bucket=BUCKET, Key=ALICE + "dir/a.txt", Body=b"a")
    stack.client("s3").put_object(Bucket=BUCKET, Key=BOB + "b.txt", Body=b"b")
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=ALICE)["Contents"]
    assert [item["Key"] for item in listed] == [ALICE + "dir/a.txt"]
    assert client.list_objects_v2(Bucket=BUCKET, Prefix=ALICE + "dir/", Delimiter="/")["KeyCount"] == 1
    for prefix in (BOB, "s3/", "", ALICE[:-1]):
        refused(lambda prefix=prefix: client.list_objects_v2(Bucket=BUCKET, Prefix=prefix), 403, "AccessDenied")
    refused(lambda: client.list_objects_v2(Bucket=BUCKET), 403, "AccessDenied")
    refused(lambda: client.head_bucket(Bucket=BUCKET), 403, None)


# --------------------------------------------------------------------------------------------------------
# What they may not
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [BOB + "x.txt", "uploads/0123456789abcdef0123456789abcdef/f", "s3/acme/x.txt", "x"])
def test_writes_outside_the_prefix_are_refused(stack: Emulator, key: str) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    refused(lambda: client.put_object(Bucket=BUCKET, Key=key, Body=b"x"), 403, "AccessDenied")
    refused(lambda: client.create_multipart_upload(Bucket=BUCKET, Key=key), 403, "AccessDenied")
    assert "Contents" not in stack.client("s3").list_objects_v2(Bucket=BUCKET)


def test_reads_deletes_acls_copies_and_sse_c_are_refused(stack: Emulator) -> None:
    client = s3_client(stack, s3_credentials(stack, ALICE))
    key = ALICE + "mine.txt"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"mine")
    refused(lambda: client.get_object(Bucket=BUCKET, Key=key), 403, "AccessDenied")
    refused(lambda: client.head_object(Bucket=BUCKET, Key=key), 403, None)
    refused(lambda: client.get_object_acl(Bucket=BUCKET, Key=key), 403, "AccessDenied")
    refused(lambda: client.put_object_acl(Bucket=BUCKET, Key=key, ACL="public-read"), 403, "AccessDenied")
    refused(
        lambda: client.put_object(Bucket=BUCKET, Key=ALICE + "acl", Body=b"x", ACL="public-read"), 403, "AccessDenied"
    )
    refused(
        lambda: client.put_object(Bucket=BUCKET, Key=ALICE + "grant", Body=b"x", GrantRead='uri="http://acs/AllUsers"'),
        403,
        "AccessDenied",
    )
    refused(lambda: client.delete_object(Bucket=BUCKET, Key=key), 403, "AccessDenied")
    refused(
        lambda: client.copy_object(Bucket=BUCKET, Key=ALICE + "copy.txt", CopySource={"Bucket": BUCKET, "Key": key}),
        403,
        "AccessDenied",
    )
    refused(lambda: client.list_multipart_uploads(Bucket=BUCKET), 403, "AccessDenied")
    refused(lambda: client.get_bucket_policy(Bucket=BUCKET), 403, "AccessDenied")
    ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}
    refused(lambda: client.put_object(Bucket=BUCKET, Key=ALICE + "ssec", Body=b"x", **ssec), 403, "AccessDenied")
    assert stored(stack, key) == b"mine"
    assert [o["Key"] for o in stack.client("s3").list_objects_v2(Bucket=BUCKET)["Contents"]] == [key]


def test_the_credentials_are_for_s3_only(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=stack.endpoint,
        region_name=REGION,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        config=Config(retries={"max_attempts": 1}),
    )
    refused(dynamodb.list_tables, 403, None)
    # signed for S3 but naming a DynamoDB operation: refused before DynamoDB's forwarding sees it
    target = {"X-Amz-Target": "DynamoDB_20120810.Scan"}
    request = _signed(credentials, "", b"{}", hashlib.sha256(b"{}").hexdigest(), target, method="POST", path="/")
    response = requests.post(request.url, data=b"{}", headers=dict(request.headers), timeout=10)
    assert (response.status_code, _code(response)) == (403, "AccessDenied")


def test_expired_credentials_are_refused(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    client = s3_client(stack, credentials)
    client.put_object(Bucket=BUCKET, Key=ALICE + "before", Body=b"x")
    from moto.sts.models import sts_backends

    (session,) = [
        r for r in sts_backends[ACCOUNT_ID]["aws"].assumed_roles if r.access_key_id == credentials["AccessKeyId"]
    ]
    session.expiration = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)  # the 900 s have passed
    refused(lambda: client.put_object(Bucket=BUCKET, Key=ALICE + "after", Body=b"x"), 400, "ExpiredToken")


def test_forged_credentials_are_refused(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    wrong_secret = {**credentials, "SecretAccessKey": credentials["SecretAccessKey"][:-1] + "x"}
    refused(
        lambda: s3_client(stack, wrong_secret).put_object(Bucket=BUCKET, Key=ALICE + "f", Body=b"x"),
        403,
        "SignatureDoesNotMatch",
    )
    other = s3_credentials(stack, BOB)
    wrong_token = {**credentials, "SessionToken": other["SessionToken"]}
    refused(
        lambda: s3_client(stack, wrong_token).put_object(Bucket=BUCKET, Key=ALICE + "f", Body=b"x"), 403, "InvalidToken"
    )
    unknown = {**credentials, "AccessKeyId": "ASIA" + "Z" * 16}
    refused(
        lambda: s3_client(stack, unknown).put_object(Bucket=BUCKET, Key=ALICE + "f", Body=b"x"),
        403,
        "InvalidAccessKeyId",
    )
    assert "Contents" not in stack.client("s3").list_objects_v2(Bucket=BUCKET)


def test_a_signed_payload_must_be_the_body_sent(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    request = _signed(credentials, ALICE + "f", b"the signed body", hashlib.sha256(b"the signed body").hexdigest())
    response = requests.put(request.url, data=b"another body!!!", headers=dict(request.headers), timeout=10)
    assert (response.status_code, _code(response)) == (400, "XAmzContentSHA256Mismatch")
    checksum = base64.b64encode(zlib.crc32(b"other").to_bytes(4, "big")).decode()
    request = _signed(credentials, ALICE + "f", b"body", "UNSIGNED-PAYLOAD", {"x-amz-checksum-crc32": checksum})
    response = requests.put(request.url, data=b"body", headers=dict(request.headers), timeout=10)
    assert (response.status_code, _code(response)) == (400, "BadDigest")


def test_the_stack_s_own_credentials_work_as_before(stack: Emulator) -> None:
    own = stack.client("s3")
    own.put_object(Bucket=BUCKET, Key="uploads/anything", Body=b"x")
    assert own.get_object(Bucket=BUCKET, Key="uploads/anything")["Body"].read() == b"x"


# --------------------------------------------------------------------------------------------------------
# aws-chunked bodies
# --------------------------------------------------------------------------------------------------------
class _Payload(S3SigV4Auth):
    """botocore's S3 signer with the x-amz-content-sha256 the test chooses (botocore sends trailers only over
    HTTPS and never signs chunks)."""

    def __init__(self, credentials: Credentials, payload: str) -> None:
        super().__init__(credentials, "s3", REGION)
        self._payload = payload

    def payload(self, request: Any) -> str:
        return self._payload


def _signed(
    credentials: dict[str, Any],
    key: str,
    body: Any,
    payload: str,
    headers: dict[str, str] | None = None,
    method: str = "PUT",
    path: str | None = None,
) -> AWSRequest:
    url = _ENDPOINT[0] + (path if path is not None else f"/{BUCKET}/{quote(key)}")
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    creds = Credentials(credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"])
    _Payload(creds, payload).add_auth(request)
    return request


_ENDPOINT: list[str] = []


@pytest.fixture(autouse=True)
def _endpoint(emulator: Emulator) -> Iterator[None]:
    _ENDPOINT[:] = [emulator.endpoint]
    yield


def _code(response: requests.Response) -> str:
    text = response.text
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0] if "<Code>" in text else ""


def _chunked_headers(data: bytes, trailer: str | None) -> dict[str, str]:
    headers = {"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": str(len(data))}
    if trailer:
        headers["X-Amz-Trailer"] = trailer
    return headers


DATA = bytes(range(256)) * 1200 + b"end"  # 307,203 bytes: botocore's wrapper sends it in 1 MiB chunks, ours 64 KiB


@pytest.mark.parametrize("transfer", ["content-length", "chunked"])
@pytest.mark.parametrize(
    ("trailer", "checksum"), [("x-amz-checksum-crc32", Crc32Checksum), ("x-amz-checksum-sha256", Sha256Checksum)]
)
def test_an_unsigned_payload_with_a_trailing_checksum_is_decoded_and_verified(
    stack: Emulator, transfer: str, trailer: str, checksum: Any
) -> None:
    """botocore's own aws-chunked encoding (AwsChunkedWrapper), as it sends it over HTTPS."""
    credentials = s3_credentials(stack, ALICE)
    encoded = AwsChunkedWrapper(
        io.BytesIO(DATA), checksum_cls=checksum, checksum_name=trailer, chunk_size=64 * 1024
    ).read()
    request = _signed(
        credentials, ALICE + "chunked", encoded, sigv4.STREAMING_UNSIGNED_TRAILER, _chunked_headers(DATA, trailer)
    )
    headers = dict(request.headers)
    body: Any = encoded if transfer == "content-length" else iter([encoded[:1000], encoded[1000:]])
    response = requests.put(request.url, data=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert stored(stack, ALICE + "chunked") == DATA
    head = stack.client("s3").head_object(Bucket=BUCKET, Key=ALICE + "chunked", ChecksumMode="ENABLED")
    algorithm = trailer.removeprefix("x-amz-checksum-").upper()
    assert head[f"Checksum{algorithm}"] == sigv4.checksum_of(trailer, DATA)  # stored, as S3 stores a verified one

    forged = encoded.replace(sigv4.checksum_of(trailer, DATA).encode(), sigv4.checksum_of(trailer, b"other").encode())
    response = requests.put(request.url, data=forged, headers=headers, timeout=10)
    assert (response.status_code, _code(response)) == (400, "BadDigest")
    tampered = encoded.replace(DATA[1000:1010], b"x" * 10, 1)
    response = requests.put(request.url, data=tampered, headers=headers, timeout=10)
    assert (response.status_code, _code(response)) == (400, "BadDigest")
    assert stored(stack, ALICE + "chunked") == DATA


def _signed_chunks(
    request: AWSRequest, secret: str, data: bytes, trailer: str | None, tamper: int | None = None
) -> bytes:
    """The aws-chunked body of S3's API reference (sigv4-streaming): 64 KiB chunks, each signed with the previous
    signature, the first with the header's; then the trailer and its signature."""
    amz_date = request.headers["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = s3auth.signing_key(secret, amz_date[:8], REGION, "s3")
    previous = str(request.headers["Authorization"]).rsplit("Signature=", 1)[1]
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)] + [b""]
    out = b""
    for index, chunk in enumerate(chunks):
        text = "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                amz_date,
                scope,
                previous,
                sigv4.EMPTY_SHA256,
                hashlib.sha256(chunk).hexdigest(),
            ]
        )
        previous = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        shown = "f" * 64 if index == tamper else previous
        out += f"{len(chunk):x};chunk-signature={shown}\r\n".encode() + chunk
        out += b"\r\n" if chunk or trailer is None else b""
    if trailer is not None:
        line = f"{trailer}:{sigv4.checksum_of(trailer, data)}"
        text = "\n".join(
            ["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous, hashlib.sha256((line + "\n").encode()).hexdigest()]
        )
        signature = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        shown = "f" * 64 if tamper == len(chunks) else signature
        out += f"{line}\r\nx-amz-trailer-signature:{shown}\r\n\r\n".encode()
    return out


@pytest.mark.parametrize("trailer", [None, "x-amz-checksum-crc32c"])
def test_signed_chunks_are_verified_one_by_one(stack: Emulator, trailer: str | None) -> None:
    credentials = s3_credentials(stack, ALICE)
    payload = sigv4.STREAMING_SIGNED_TRAILER if trailer else sigv4.STREAMING_SIGNED
    request = _signed(credentials, ALICE + "signed", b"", payload, _chunked_headers(DATA, trailer))
    headers = dict(request.headers)
    secret = credentials["SecretAccessKey"]
    response = requests.put(
        request.url, data=_signed_chunks(request, secret, DATA, trailer), headers=headers, timeout=10
    )
    assert response.status_code == 200, response.text
    assert stored(stack, ALICE + "signed") == DATA
    chunks = len(DATA) // 65536 + 1  # the data chunks, then the empty one
    for tamper in (0, chunks - 1, chunks, *((chunks + 1,) if trailer else ())):
        body = _signed_chunks(request, secret, DATA, trailer, tamper=tamper)
        response = requests.put(request.url, data=body, headers=headers, timeout=10)
        assert (response.status_code, _code(response)) == (403, "SignatureDoesNotMatch"), tamper
    wrong_length = {**headers, "X-Amz-Decoded-Content-Length": str(len(DATA) + 1)}
    response = requests.put(
        request.url, data=_signed_chunks(request, secret, DATA, trailer), headers=wrong_length, timeout=10
    )
    assert response.status_code == 403  # a signed header changed


def test_a_decoded_length_other_than_the_body_s_is_refused(stack: Emulator) -> None:
    credentials = s3_credentials(stack, ALICE)
    headers = _chunked_headers(DATA, "x-amz-checksum-crc32")
    headers["X-Amz-Decoded-Content-Length"] = str(len(DATA) - 1)
    encoded = AwsChunkedWrapper(
        io.BytesIO(DATA), checksum_cls=Crc32Checksum, checksum_name="x-amz-checksum-crc32"
    ).read()
    request = _signed(credentials, ALICE + "short", encoded, sigv4.STREAMING_UNSIGNED_TRAILER, headers)
    response = requests.put(request.url, data=encoded, headers=dict(request.headers), timeout=10)
    assert (response.status_code, _code(response)) == (400, "IncompleteBody")


# --------------------------------------------------------------------------------------------------------
# A restart of the local stack
# --------------------------------------------------------------------------------------------------------
def test_issued_credentials_survive_a_restart_until_they_expire(stack: Emulator, tmp_path: Any) -> None:
    """What the stack keeps in its data directory (dfdlocal.stspersist) and puts back at start."""
    from moto.sts.models import sts_backends

    from dfdlocal import stspersist

    credentials, expired = s3_credentials(stack, ALICE), s3_credentials(stack, BOB)
    for role in sts_backends[ACCOUNT_ID]["aws"].assumed_roles:
        if role.access_key_id == expired["AccessKeyId"]:
            role.expiration = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    stspersist.save_sessions(tmp_path)
    assert (tmp_path / stspersist.STS_SESSIONS).stat().st_mode & 0o777 == 0o600
    empty_s3_stack(stack)  # the restart
    refused(
        lambda: s3_client(stack, credentials).put_object(Bucket=BUCKET, Key=ALICE + "f", Body=b"x"),
        403,
        "InvalidAccessKeyId",
    )

    assert stspersist.restore_sessions(tmp_path) == 1  # the expired one is gone
    s3_client(stack, credentials).put_object(Bucket=BUCKET, Key=ALICE + "f", Body=b"x")
    assert stored(stack, ALICE + "f") == b"x"
    refused(
        lambda: s3_client(stack, credentials).put_object(Bucket=BUCKET, Key=BOB + "f", Body=b"x"), 403, "AccessDenied"
    )
    refused(
        lambda: s3_client(stack, expired).put_object(Bucket=BUCKET, Key=BOB + "f", Body=b"x"), 403, "InvalidAccessKeyId"
    )
    assert stspersist.restore_sessions(tmp_path) == 0  # already there


def test_every_successful_sts_call_saves_the_sessions(stack: Emulator, tmp_path: Any) -> None:
    from dfdlocal import stspersist

    credentials = s3_credentials(stack, ALICE)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response(environ["answer"], [])
        return [b"<AssumeRoleResponse/>"]

    saved = tmp_path / stspersist.STS_SESSIONS
    middleware = stspersist.PersistSts(app, tmp_path)
    sts = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=x"
    s3_call = sts.replace("/sts/", "/s3/")
    for authorization, answer in ((s3_call, "200 OK"), (sts, "403 Forbidden")):
        b"".join(middleware({"HTTP_AUTHORIZATION": authorization, "answer": answer}, lambda *a: None))
        assert not saved.exists()
    b"".join(middleware({"HTTP_AUTHORIZATION": sts, "answer": "200 OK"}, lambda *a: None))
    assert [kept["access_key_id"] for kept in json.loads(saved.read_text())] == [credentials["AccessKeyId"]]


def test_only_the_bucket_owner_full_control_acl_is_accepted_on_a_write(stack: Emulator) -> None:
    """rclone before 1.61 sends an ACL on every write: bucket-owner-full-control (a no-op on the BucketOwnerEnforced
    bucket, the one ACL S3 accepts there) passes, on a PUT and a multipart upload; any other is refused."""
    client = s3_client(stack, s3_credentials(stack, ALICE))
    client.put_object(Bucket=BUCKET, Key=ALICE + "owner.txt", Body=b"owned", ACL="bucket-owner-full-control")
    assert stored(stack, ALICE + "owner.txt") == b"owned"
    created = client.create_multipart_upload(Bucket=BUCKET, Key=ALICE + "owner.bin", ACL="bucket-owner-full-control")
    client.abort_multipart_upload(Bucket=BUCKET, Key=ALICE + "owner.bin", UploadId=created["UploadId"])
    for acl in ("private", "bucket-owner-read", "authenticated-read"):
        refused(
            lambda acl=acl: client.put_object(Bucket=BUCKET, Key=ALICE + acl, Body=b"x", ACL=acl), 403, "AccessDenied"
        )
