"""The local emulator's presigned-URL guard: S3's SigV4 query verification, expiry, body checksum."""

from __future__ import annotations

import base64
import hashlib
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config

from dfdlocal.s3auth import RECEIVED, PresignedS3Guard, Refused, verify_url

SECRETS = {"testing": "testing"}.get


def presign(**params: Any) -> str:
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:4566",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=Config(signature_version="s3v4"),
    )
    url: str = client.generate_presigned_url("put_object", Params={"Bucket": "b", "Key": "uploads/k", **params})
    return url


def test_signed_headers_bind_the_request() -> None:
    url = presign(ContentType="text/plain", ContentLength=3, IfNoneMatch="*")
    headers = {"content-type": "text/plain", "content-length": "3", "if-none-match": "*"}
    verify_url("PUT", url, headers, SECRETS)
    for changed in ({"content-type": "image/png"}, {"content-length": "4"}, {"if-none-match": "x"}):
        with pytest.raises(Refused) as refused:
            verify_url("PUT", url, headers | changed, SECRETS)
        assert refused.value.code == "SignatureDoesNotMatch"
    with pytest.raises(Refused):
        verify_url("GET", url, headers, SECRETS)
    with pytest.raises(Refused):
        verify_url("PUT", url.replace("uploads/k", "uploads/other"), headers, SECRETS)
    with pytest.raises(Refused) as refused:
        verify_url("PUT", url, headers, {}.get)
    assert refused.value.code == "InvalidAccessKeyId"


def test_expiry() -> None:
    url = presign(ContentType="text/plain")
    later = datetime.now(UTC) + timedelta(hours=2)
    with pytest.raises(Refused) as refused:
        verify_url("PUT", url, {"content-type": "text/plain"}, SECRETS, now=later)
    assert refused.value.status == 403 and refused.value.message == "Request has expired"


def test_guard_checks_the_body_checksum() -> None:
    data = b"abc"
    claimed = base64.b64encode(hashlib.sha256(data).digest()).decode()
    url = presign(ContentLength=3, ChecksumSHA256=claimed)
    seen: list[dict[str, Any]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append({"body": environ["wsgi.input"].read(), "algo": environ.get("HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM")})
        start_response("200 OK", [])
        return [b""]

    guard = PresignedS3Guard(app, SECRETS)
    path, query = url.split("127.0.0.1:4566", 1)[1].split("?", 1)

    def send(body: bytes) -> str:
        statuses: list[str] = []
        environ = {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": path,
            "RAW_URI": f"{path}?{query}",
            "QUERY_STRING": query,
            "HTTP_HOST": "127.0.0.1:4566",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_X_AMZ_CHECKSUM_SHA256": claimed,
            "wsgi.input": io.BytesIO(body),
        }
        b"".join(guard(environ, lambda status, headers: statuses.append(status)))
        return statuses[0]

    assert send(b"abd").startswith("400")
    assert not seen
    assert send(data).startswith("200")
    assert seen == [{"body": data, "algo": "SHA256"}]


def presign_part(**params: Any) -> str:
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:4566",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=Config(signature_version="s3v4"),
    )
    base = {"Bucket": "b", "Key": "uploads/k", "UploadId": "mp-1", "PartNumber": 2}
    url: str = client.generate_presigned_url("upload_part", Params={**base, **params})
    return url


class Recorder:
    """The app behind the guard: records what reached it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.seen.append(
            {"body": environ["wsgi.input"].read(), "algo": environ.get("HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM")}
        )
        start_response("200 OK", [])
        return [b""]


def send(
    guard: PresignedS3Guard, url: str, body: bytes, headers: dict[str, str], length: str | None = None
) -> tuple[str, bytes]:
    """One PUT through the guard as the emulator's WSGI server hands it over; (status line, body)."""
    path, query = url.split("127.0.0.1:4566", 1)[1].split("?", 1)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": path,
        "RAW_URI": f"{path}?{query}",
        "QUERY_STRING": query,
        "HTTP_HOST": "127.0.0.1:4566",
        "wsgi.input": io.BytesIO(body),
    }
    if length is None:
        length = str(len(body))
    if length:
        environ["CONTENT_LENGTH"] = length
    for name, value in headers.items():
        if name == "content-type":
            environ["CONTENT_TYPE"] = value
        elif name != "content-length":
            environ["HTTP_" + name.upper().replace("-", "_")] = value
    statuses: list[str] = []
    answer = b"".join(guard(environ, lambda status, _headers: statuses.append(status)))
    return statuses[0], answer


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def test_upload_part_signature_binds_part_number_upload_id_length_and_checksum() -> None:
    data = b"part two"
    url = presign_part(ContentLength=len(data), ChecksumSHA256=b64sha(data))
    headers = {"content-length": str(len(data)), "x-amz-checksum-sha256": b64sha(data)}
    verify_url("PUT", url, headers, SECRETS)
    for old, new in (("partNumber=2", "partNumber=3"), ("uploadId=mp-1", "uploadId=mp-2")):
        assert old in url
        with pytest.raises(Refused) as refused:
            verify_url("PUT", url.replace(old, new), headers, SECRETS)
        assert refused.value.code == "SignatureDoesNotMatch"
    for changed in ({"content-length": "9"}, {"x-amz-checksum-sha256": b64sha(b"other")}):
        with pytest.raises(Refused) as refused:
            verify_url("PUT", url, headers | changed, SECRETS)
        assert refused.value.code == "SignatureDoesNotMatch"
    without_checksum = {"content-length": str(len(data))}
    with pytest.raises(Refused) as refused:
        verify_url("PUT", url, without_checksum, SECRETS)
    assert refused.value.status == 403 and "x-amz-checksum-sha256" in refused.value.message


def test_guard_refuses_a_part_whose_body_differs_from_its_signed_checksum() -> None:
    data = b"the part's bytes"
    url = presign_part(ContentLength=len(data), ChecksumSHA256=b64sha(data))
    headers = {"x-amz-checksum-sha256": b64sha(data)}
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    status, body = send(guard, url, b"the part's BYTES", headers)
    assert status == "400 Bad Request"
    assert b"<Code>BadDigest</Code>" in body
    assert b"The SHA256 you specified did not match the calculated checksum." in body
    assert not app.seen
    assert send(guard, url, data, headers)[0] == "200 OK"
    assert app.seen == [{"body": data, "algo": "SHA256"}]


def test_guard_refuses_a_body_shorter_than_its_signed_content_length() -> None:
    data = b"0123456789"
    url = presign_part(ContentLength=len(data))
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    # the client announced (and signed) 10 bytes, then the connection ended after 4
    status, body = send(guard, url, data[:4], {}, length=str(len(data)))
    assert status == "400 Bad Request" and b"<Code>IncompleteBody</Code>" in body
    # a Content-Length other than the signed one does not match the signature
    status, body = send(guard, url, data[:4], {})
    assert status == "403 Forbidden" and b"<Code>SignatureDoesNotMatch</Code>" in body
    assert not app.seen
    assert send(guard, url, data, {})[0] == "200 OK"
    assert app.seen == [{"body": data, "algo": None}]


def test_guard_wants_a_content_length_on_a_put() -> None:
    url = presign(ContentType="text/plain")
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    status, body = send(guard, url, b"abc", {"content-type": "text/plain"}, length="")
    assert status == "411 Length Required" and b"<Code>MissingContentLength</Code>" in body
    assert not app.seen


def test_guard_drops_the_content_type_of_an_upload_part() -> None:
    """S3 ignores it; moto would parse a form-encoded part (curl --data-binary's default type) as a form."""
    data = b"a=1&b=2"
    url = presign_part(ContentLength=len(data))
    types: list[str | None] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        types.append(environ.get("CONTENT_TYPE"))
        start_response("200 OK", [])
        return [b""]

    guard = PresignedS3Guard(app, SECRETS)
    assert send(guard, url, data, {"content-type": "application/x-www-form-urlencoded"})[0] == "200 OK"
    plain = presign(ContentLength=len(data))  # a PutObject keeps its type (S3 stores it)
    assert send(guard, plain, data, {"content-type": "application/x-www-form-urlencoded"})[0] == "200 OK"
    assert types == [None, "application/x-www-form-urlencoded"]


class Trickle(io.RawIOBase):
    """A socket-like body: at most `step` bytes per read, and a count of the reads."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.reads = data, step, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        chunk, self.data = self.data[: min(size, self.step)], self.data[min(size, self.step) :]
        return chunk


def test_guard_hands_the_body_to_moto_as_the_bytes_it_read() -> None:
    """moto reads the body with werkzeug's Request.get_data: it gets the very bytes object the guard read (no
    copy), whether the body came in one read or in many."""
    from werkzeug.wrappers import Request

    data = bytes(range(256)) * 40
    url = presign_part(ContentLength=len(data), ChecksumSHA256=b64sha(data))
    handed: list[tuple[bytes, bytes]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        kept = environ["wsgi.input"].getvalue()
        handed.append((kept, Request(environ).get_data()))
        # the digests S3 keeps of the body, for the store (dfdlocal.s3store), of these very bytes only
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        assert RECEIVED.digests(kept) == (hashlib.sha256(data).digest(), md5)
        assert RECEIVED.digests(bytes(bytearray(kept))) is None
        start_response("200 OK", [])
        return [b""]

    guard = PresignedS3Guard(app, SECRETS)
    statuses: list[str] = []
    for step in (len(data), 1000):
        path, query = url.split("127.0.0.1:4566", 1)[1].split("?", 1)
        source = Trickle(data, step)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": path,
            "RAW_URI": f"{path}?{query}",
            "QUERY_STRING": query,
            "HTTP_HOST": "127.0.0.1:4566",
            "CONTENT_LENGTH": str(len(data)),
            "HTTP_X_AMZ_CHECKSUM_SHA256": b64sha(data),
            "wsgi.input": source,
        }
        b"".join(guard(environ, lambda status, _headers: statuses.append(status)))
        assert statuses.pop() == "200 OK"
        assert source.reads == -(-len(data) // step)
    assert [(kept == data, seen is kept) for kept, seen in handed] == [(True, True), (True, True)]
