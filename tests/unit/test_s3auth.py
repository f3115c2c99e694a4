"""The local emulator's presigned-URL guard: S3's SigV4 query verification, expiry, body checksum."""

from __future__ import annotations

import base64
import hashlib
import io
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

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


# ---------------------------------------------------------------------------------------------- as strict as S3
def send_full(
    guard: PresignedS3Guard, url: str, body: bytes, headers: dict[str, str]
) -> tuple[str, list[tuple[str, str]], bytes]:
    """send(), with the answer's headers."""
    path, query = url.split("127.0.0.1:4566", 1)[1].split("?", 1)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": path,
        "RAW_URI": f"{path}?{query}",
        "QUERY_STRING": query,
        "HTTP_HOST": "127.0.0.1:4566",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answered: list[tuple[str, list[tuple[str, str]]]] = []
    payload = b"".join(guard(environ, lambda status, hdrs: answered.append((status, hdrs))))
    return answered[0][0], answered[0][1], payload


ALICE_B64 = b64sha(b"alice's content")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("x-amz-sdk-checksum-algorithm", "SHA256"),  # moto would take the checksum from the body
        ("x-amz-checksum-sha256", ALICE_B64),
        ("x-amz-checksum-crc32", "AAAAAA=="),
        ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
        ("x-amz-trailer", "x-amz-checksum-sha256"),
        ("x-amz-decoded-content-length", "3"),
        ("x-amz-storage-class", "GLACIER"),
        ("x-amz-acl", "public-read"),
        ("x-amz-tagging", "a=b"),
        ("x-amz-website-redirect-location", "https://evil.example/"),
        ("x-amz-meta-dfd-tenant", "acme"),
        ("x-amz-server-side-encryption", "AES256"),
        ("x-amz-object-lock-mode", "GOVERNANCE"),
    ],
)
def test_guard_refuses_every_unsigned_x_amz_header(name: str, value: str) -> None:
    data = b"x-amz-checksum-sha256:" + ALICE_B64.encode() + b"\njunk"
    url = presign(ContentLength=len(data))
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    status, _, body = send_full(guard, url, data, {name: value})
    assert status == "403 Forbidden", body
    assert b"<Code>AccessDenied</Code>" in body
    assert b"There were headers present in the request which were not signed" in body
    assert f"<HeadersNotSigned>{name}</HeadersNotSigned>".encode() in body
    assert not app.seen
    assert send_full(guard, url, data, {})[0] == "200 OK" and app.seen == [{"body": data, "algo": None}]


def test_signed_x_amz_headers_are_accepted_unsigned_ones_named() -> None:
    url = presign(ContentLength=3, Metadata={"dfd-tenant": "acme"})
    headers = {"content-length": "3", "x-amz-meta-dfd-tenant": "acme"}
    verify_url("PUT", url, headers, SECRETS)
    with pytest.raises(Refused) as refused:
        verify_url("PUT", url, headers | {"x-amz-acl": "public-read", "x-amz-tagging": "a=b"}, SECRETS)
    assert refused.value.status == 403 and refused.value.code == "AccessDenied"
    assert refused.value.extra == {"HeadersNotSigned": "x-amz-acl, x-amz-tagging"}


def test_guard_refuses_an_aws_chunked_body_even_unsigned_encoding() -> None:
    data = b"3\r\nabc\r\n0\r\n\r\n"
    url = presign(ContentLength=len(data))
    app = Recorder()
    status, _, body = send_full(PresignedS3Guard(app, SECRETS), url, data, {"content-encoding": "aws-chunked"})
    assert status == "400 Bad Request" and b"<Code>InvalidRequest</Code>" in body and b"aws-chunked" in body
    assert not app.seen


@pytest.mark.parametrize(
    ("params", "headers"),
    [
        ({"ChecksumCRC32": "NSRBwg=="}, {"x-amz-checksum-crc32": "NSRBwg=="}),
        ({"ChecksumAlgorithm": "CRC32"}, {"x-amz-sdk-checksum-algorithm": "CRC32"}),
    ],
)
def test_guard_refuses_a_checksum_it_cannot_verify_even_signed(params: dict[str, str], headers: dict[str, str]) -> None:
    data = b"abc"
    url = presign(ContentLength=len(data), **params)
    signed = parse_qs(urlsplit(url).query)["X-Amz-SignedHeaders"][0].split(";")
    assert set(headers) <= set(signed)
    app = Recorder()
    status, _, body = send_full(PresignedS3Guard(app, SECRETS), url, data, headers)
    assert status == "400 Bad Request" and b"<Code>InvalidRequest</Code>" in body, body
    assert not app.seen


def test_guard_verifies_a_signed_content_md5() -> None:
    data = b"abc"
    md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
    url = presign(ContentLength=len(data), ContentMD5=md5)
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    status, _, body = send_full(guard, url, b"abd", {"content-md5": md5})
    assert status == "400 Bad Request" and b"<Code>BadDigest</Code>" in body and not app.seen
    assert send_full(guard, url, data, {"content-md5": md5})[0] == "200 OK"


def test_a_part_of_an_upload_that_no_longer_exists_is_no_such_upload() -> None:
    data = b"late part"
    url = presign_part(ContentLength=len(data))
    app = Recorder()
    alive = {"mp-1": True}
    guard = PresignedS3Guard(app, SECRETS, multipart_exists=lambda bucket, key, upload: alive.get(upload, False))
    assert send_full(guard, url, data, {})[0] == "200 OK"
    alive["mp-1"] = False  # aborted or completed
    status, _, body = send_full(guard, url, data, {})
    assert status == "404 Not Found" and b"<Code>NoSuchUpload</Code>" in body and b"<UploadId>mp-1</UploadId>" in body
    assert len(app.seen) == 1

    def failing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        alive["mp-1"] = False  # completed between the guard's check and moto's (moto: KeyError, a 500)
        raise KeyError("mp-1")

    alive["mp-1"] = True
    guard = PresignedS3Guard(failing, SECRETS, multipart_exists=lambda bucket, key, upload: alive[upload])
    status, _, body = send_full(guard, url, data, {})
    assert status == "404 Not Found" and b"<Code>NoSuchUpload</Code>" in body


CORS = [("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "ETag")]


def test_every_answer_to_a_browser_carries_the_bucket_cors_headers() -> None:
    data = b"abc"
    seen_cors: list[tuple[str, str, str]] = []

    def cors(bucket: str, origin: str, method: str) -> list[tuple[str, str]]:
        seen_cors.append((bucket, origin, method))
        return CORS

    def moto(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("412 Precondition Failed", [("Content-Type", "application/xml"), ("Vary", "x")])
        return [b"<Error><Code>PreconditionFailed</Code></Error>"]

    origin = {"origin": "http://127.0.0.1:3000"}
    url = presign(ContentLength=len(data), ChecksumSHA256=b64sha(data))
    guard = PresignedS3Guard(moto, SECRETS, cors=cors)
    signed = {"x-amz-checksum-sha256": b64sha(data)}
    for body, headers, expected in (
        (b"abd", signed, "400"),  # BadDigest
        (data, signed | {"x-amz-acl": "public-read"}, "403"),  # an unsigned header
        (data, signed, "412"),  # moto's own answer
    ):
        status, answer_headers, _ = send_full(guard, url, body, headers | origin)
        assert status.startswith(expected)
        assert [h for h in answer_headers if h[0].lower().startswith("access-control-")] == CORS
        assert not [h for h in answer_headers if h[0].lower() == "vary"]
    assert seen_cors == [("b", "http://127.0.0.1:3000", "PUT")] * 3
    # no Origin: no CORS headers at all
    status, answer_headers, _ = send_full(guard, url, b"abd", signed)
    assert status.startswith("400") and not [h for h in answer_headers if h[0].startswith("Access-Control")]


# --------------------------------------------------------------------------------------------------------
# What every S3 request must be, whoever signed it (S3RequestChecks)
# --------------------------------------------------------------------------------------------------------
SIGNED_FOR_S3 = {"Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, x"}


def checked(
    method: str,
    path: str,
    query: str = "",
    headers: dict[str, str] | None = None,
    raw_uri: str | None = None,
    uploads: dict[str, tuple[str, str]] | None = None,
) -> tuple[int, bytes, list[str]]:
    """(status, body, what reached the app) of one request through S3RequestChecks; ``uploads``: upload id ->
    (bucket, key) of the uploads in progress."""
    from werkzeug.test import Client

    from dfdlocal.s3auth import S3RequestChecks

    seen: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b""]

    known = uploads or {}
    guard = S3RequestChecks(app, lambda bucket, key, upload: known.get(upload) == (bucket, key))
    sent = quote(path) + (f"?{query}" if query else "")  # the request line's target, as a server passes it on
    overrides = {"RAW_URI": sent if raw_uri is None else raw_uri}
    response = Client(guard).open(
        path,
        method=method,
        query_string=query,
        headers=SIGNED_FOR_S3 if headers is None else headers,
        environ_overrides=overrides,
    )
    return response.status_code, response.get_data(), seen


def test_an_upload_id_belongs_to_its_key_whoever_signs() -> None:
    uploads = {"bob-1": ("b", "s3/t/bob/f")}
    for method, query in (
        ("PUT", "partNumber=1&uploadId=bob-1"),
        ("GET", "uploadId=bob-1"),
        ("POST", "uploadId=bob-1"),
        ("DELETE", "uploadId=bob-1"),
    ):
        status, body, seen = checked(method, "/b/s3/t/alice/f", query, uploads=uploads)
        assert (status, seen) == (404, []) and b"<Code>NoSuchUpload</Code>" in body, method
        assert checked(method, "/b/s3/t/bob/f", query, uploads=uploads)[0] == 200
    presigned = "X-Amz-Credential=testing%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=x&uploadId=bob-1"
    assert checked("PUT", "/b/uploads/f", presigned + "&partNumber=1", headers={}, uploads=uploads)[0] == 404
    assert checked("PUT", "/b/s3/t/bob/f", presigned + "&partNumber=1", headers={}, uploads=uploads)[0] == 200


def test_a_key_longer_than_s3_s_is_refused() -> None:
    status, body, seen = checked("PUT", "/b/" + "é" * 513)  # 1,026 bytes
    assert (status, seen) == (400, []) and b"<Code>KeyTooLongError</Code>" in body
    assert checked("PUT", "/b/" + "é" * 512)[0] == 200


@pytest.mark.parametrize(
    "raw_uri", ["//b/s3/t/u/f", "/b/s3/t/u/f#?uploadId=x", "http://other/b/s3/t/u/f", "*", "/b/s3/t/u/%C3"]
)
def test_a_target_moto_would_read_otherwise_is_refused(raw_uri: str) -> None:
    status, body, seen = checked("PUT", "/b/s3/t/u/f", raw_uri=raw_uri)
    assert (status, seen) == (400, []) and b"<Code>InvalidURI</Code>" in body


def test_a_repeated_query_parameter_is_refused_for_everyone() -> None:
    status, body, seen = checked("GET", "/b", "list-type=2&prefix=a&prefix=b")
    assert (status, seen) == (400, []) and b"<ArgumentName>prefix</ArgumentName>" in body
    assert checked("GET", "/b", "list-type=2&prefix=a")[0] == 200


def test_requests_for_other_services_pass() -> None:
    other = {"Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sqs/aws4_request, x"}
    assert checked("POST", "/", "a=1&a=2", headers=other)[0] == 200
    assert checked("GET", "/b", "prefix=a&prefix=b", headers={})[0] == 200  # unsigned: the emulator's own API


FORMS = ["application/x-www-form-urlencoded", "Multipart/Form-Data; boundary=x"]


def _served(method: str, path: str, query: str, body: bytes, content_type: str) -> dict[str, Any]:
    """What moto's request reads of one S3 request through S3RequestChecks and an app of
    :func:`opaque_object_bodies` (a Flask app, as moto's are): its Content-Type, form, body and query."""
    from flask import Flask, request
    from werkzeug.test import Client

    from dfdlocal.s3auth import S3RequestChecks, opaque_object_bodies

    def create_app(service: str) -> Flask:
        app = Flask(service)

        @app.route("/<path:target>", methods=["GET", "PUT", "POST", "DELETE"])
        def serve(target: str) -> dict[str, Any]:
            form = request.form.to_dict()
            return {"type": request.headers.get("Content-Type"), "form": form, "body": request.get_data().hex()}

        return app

    served = opaque_object_bodies(create_app)("s3")
    guard = S3RequestChecks(served, lambda bucket, key, upload: (bucket, key, upload) == ("b", "k", "u-1"))
    headers = {**SIGNED_FOR_S3, "Content-Type": content_type}
    target = path + (f"?{query}" if query else "")
    response = Client(guard).open(
        path, method=method, query_string=query, data=body, headers=headers, environ_overrides={"RAW_URI": target}
    )
    assert response.status_code == 200, response.get_data()
    answer: dict[str, Any] = response.get_json()
    return answer


@pytest.mark.parametrize("content_type", FORMS)
def test_an_object_request_s_form_body_reaches_moto_as_bytes_with_its_declared_type(content_type: str) -> None:
    body = b"key=x&uploadId=bob-1&partNumber=1&evil\xff"
    for method, query in (
        ("PUT", ""),  # PutObject; CopyObject (REPLACE takes the Content-Type)
        ("POST", "uploads"),  # CreateMultipartUpload: the object's Content-Type
        ("PUT", "partNumber=1&uploadId=u-1"),
        ("POST", "uploadId=u-1"),
        ("DELETE", "uploadId=u-1"),
    ):
        served = _served(method, "/b/k", query, body, content_type)
        assert served == {"type": content_type, "form": {}, "body": body.hex()}, (method, query)
    served = _served("PUT", "/b", "", body, content_type)  # a bucket call
    assert served == {"type": content_type, "form": {}, "body": body.hex()}


def test_a_post_to_a_bucket_stays_a_form_upload() -> None:
    served = _served("POST", "/b", "", b"key=k&acl=private", "application/x-www-form-urlencoded")
    assert served["form"] == {"key": "k", "acl": "private"}


@pytest.mark.parametrize("content_type", FORMS)
def test_the_checks_hold_a_form_type_out_of_the_request_moto_routes(content_type: str) -> None:
    from werkzeug.test import Client

    from dfdlocal.s3auth import HELD_CONTENT_TYPE, S3RequestChecks

    types: list[tuple[str | None, str | None]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        types.append((environ.get("CONTENT_TYPE"), environ.get(HELD_CONTENT_TYPE)))
        start_response("200 OK", [])
        return [b""]

    guard = S3RequestChecks(app, lambda bucket, key, upload: False)
    form = {**SIGNED_FOR_S3, "Content-Type": content_type}
    for method, path in (("PUT", "/b/k"), ("GET", "/b/k"), ("PUT", "/b"), ("POST", "/b")):
        Client(guard).open(path, method=method, data=b"key=1", headers=form, environ_overrides={"RAW_URI": path})
    held = (None, content_type)
    assert types == [held, held, held, (content_type, None)]
    Client(guard).put("/b/k", data=b"x", headers={**SIGNED_FOR_S3, "Content-Type": "text/plain"})
    assert types[-1] == ("text/plain", None)


def test_a_presigned_url_with_a_repeated_parameter_is_refused() -> None:
    url = presign(ContentLength=3)
    app = Recorder()
    guard = PresignedS3Guard(app, SECRETS)
    for repeated in ("X-Amz-Signature=0", "X-Amz-Credential=x", "uploadId=x&uploadId=y"):
        status, _, body = send_full(guard, f"{url}&{repeated}", b"abc", {})
        assert status == "400 Bad Request" and b"<Code>InvalidArgument</Code>" in body, repeated
    assert not app.seen
    assert send_full(guard, url, b"abc", {})[0] == "200 OK"
