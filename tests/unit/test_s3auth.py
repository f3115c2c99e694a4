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

from dfdlocal.s3auth import PresignedS3Guard, Refused, verify_url

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
