"""Bad input of any kind gets a clear 4xx JSON error — never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dfd.handlers import admin_hashes, admin_stats, download, metadata, upload, uploads
from dfd.queries.tokens import encode_token
from tests.integration.support import Aws, upload_bytes
from tests.support import LambdaContext, api_event, call

GIB = 1024**3


@pytest.fixture(autouse=True)
def bad_input_changes_nothing(aws: Aws) -> Iterator[None]:
    """After every test of refused requests, the invariants of docs/design/invariants.md still hold."""
    yield
    aws.assert_invariants()


def assert_error(status: int, body: dict[str, Any], expected: int, code: str | None = None) -> None:
    assert status == expected, body
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    assert body["error"]["message"]
    if code:
        assert body["error"]["code"] == code


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("", "invalid_json"),
        ("{not json", "invalid_json"),
        ("[]", "validation_error"),
        ('"text"', "validation_error"),
        ("null", "validation_error"),
        ('{"size": 10}', "validation_error"),
        ('{"filename": "", "size": 10}', "validation_error"),
        ('{"filename": "' + "a" * 256 + '", "size": 10}', "validation_error"),
        ('{"filename": "../../", "size": 10}', "validation_error"),
        ('{"filename": "\\u0000\\u0007", "size": 10}', "validation_error"),
        ('{"filename": 5, "size": 10}', "validation_error"),
        ('{"filename": "a.txt"}', "validation_error"),
        ('{"filename": "a.txt", "size": 0}', "validation_error"),
        ('{"filename": "a.txt", "size": -1}', "validation_error"),
        ('{"filename": "a.txt", "size": 1.5}', "validation_error"),
        ('{"filename": "a.txt", "size": "10"}', "validation_error"),
        ('{"filename": "a.txt", "size": true}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "content_type": "not a type"}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "content_type": "text/plain\\r\\nx-evil: 1"}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "sha256": "ABC"}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "sha256": "' + "A" * 64 + '"}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "extra": 1}', "validation_error"),
        ("[" * 5000 + "]" * 5000, "invalid_json"),
        ('{"filename": "a.txt", "size": 1e400}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "sha256": "' + "a" * 64 + '\\n"}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "content_type": "text/plain\\n"}', "validation_error"),
        (
            '{"filename": "a.txt", "size": 10, "content_type": "text/plain; charset=\\"\u65e5\u672c\\""}',
            "validation_error",
        ),
        ('{"filename": "a.txt", "size": 10, "content_type": "text/plain; x=\\"\\u0085\\""}', "validation_error"),
        ('{"filename": "a.txt", "size": 10, "content_type": "text/plain;\\ncharset=x"}', "validation_error"),
    ],
)
def test_bad_upload_bodies_are_400(aws: Aws, raw: str, code: str) -> None:
    before = aws.snapshot()
    status, body = call(upload.handler, api_event("POST", "/upload", raw_body=raw))
    assert_error(status, body, 400, code)
    assert aws.snapshot() == before  # no upload record, no counter touched


def test_base64_body_and_too_large(aws: Aws) -> None:
    event = api_event("POST", "/upload", raw_body="//79")  # base64 of bytes that are not UTF-8
    event["isBase64Encoded"] = True
    status, body = call(upload.handler, event)
    assert_error(status, body, 400, "invalid_json")
    limit = 10_000 * 5 * GIB  # the default MaxUploadBytes: S3's largest object
    status, body = call(upload.handler, api_event("POST", "/upload", body={"filename": "big", "size": limit + 1}))
    assert_error(status, body, 400, "too_large")
    assert body["error"]["details"] == {"limit": limit} and "48.8 TiB" in body["error"]["message"]


def test_filenames_keep_only_the_last_component(aws: Aws) -> None:
    body = {"filename": "../../etc/pass\u0007wd", "size": 3}
    status, answer = call(upload.handler, api_event("POST", "/upload", body=body))
    assert status == 201
    _, meta = call(metadata.handler, api_event("GET", f"/metadata/{answer['upload_id']}"))
    assert meta["filename"] == "passwd"


@pytest.mark.parametrize(
    "bad",
    ["x", "123", "g" * 64, "A" * 64, "a" * 63, "a" * 65, "a" * 31, "..%2f", "%00", "a" * 64 + "\n", "b" * 32 + "\n"],
)
def test_bad_ids_are_400(aws: Aws, bad: str) -> None:
    for handler, route in ((metadata.handler, "/metadata/"), (download.handler, "/download/")):
        status, body = call(handler, api_event("GET", route + bad))
        assert_error(status, body, 400, "invalid_id")


def test_unknown_ids_are_404(aws: Aws) -> None:
    for ident in ("a" * 64, "b" * 32):
        for handler, route in ((metadata.handler, "/metadata/"), (download.handler, "/download/")):
            status, body = call(handler, api_event("GET", route + ident))
            assert_error(status, body, 404, "not_found")


@pytest.mark.parametrize("limit", ["", "0", "1001", "-1", "abc", "1.5", "1e3", " 5", "10\n", "٣"])
def test_bad_limits_are_400(aws: Aws, limit: str) -> None:
    for handler, route in ((admin_hashes.handler, "/admin/hashes"), (uploads.handler, "/uploads")):
        status, body = call(handler, api_event("GET", route, query={"limit": limit}))
        assert_error(status, body, 400, "invalid_limit")


def test_unknown_query_parameters_are_400(aws: Aws) -> None:
    for handler, route in ((admin_hashes.handler, "/admin/hashes"), (uploads.handler, "/uploads")):
        status, body = call(handler, api_event("GET", route, query={"limt": "5", "limit": "5"}))
        assert_error(status, body, 400, "unknown_parameter")
        assert body["error"]["details"] == {"parameters": ["limt"]}
        status, body = call(handler, api_event("GET", route, query={"limit": "5", "last_evaluated_key": ""}))
        assert status == 200, body
    # a route that takes none refuses any
    for handler, route in ((metadata.handler, "/metadata/" + "a" * 64), (admin_stats.handler, "/admin/stats")):
        status, body = call(handler, api_event("GET", route, query={"limit": "5"}))
        assert_error(status, body, 400, "unknown_parameter")


def test_tampered_tokens_are_400(aws: Aws) -> None:
    for i in range(3):
        upload_bytes(aws, f"content {i}".encode(), f"{i}.txt")
    _, page = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query={"limit": "1"}))
    token = page["last_evaluated_key"]
    assert token
    not_a_hash = encode_token({"hash": "F" * 64})
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]  # the JSON's closing `"}` breaks
    for bad in ["garbage", "!!!!", flipped, not_a_hash, token + "x", "e30", "a" * 600]:
        query = {"limit": "1", "last_evaluated_key": bad}
        status, body = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query=query))
        assert_error(status, body, 400, "invalid_token")
    query = {"limit": "1", "last_evaluated_key": token}
    status, body = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query=query))
    assert status == 200 and body["count"] == 1
    # any well-formed position is accepted (the listing is the admin's to read in full): past the last hash
    query = {"limit": "1", "last_evaluated_key": encode_token({"hash": "f" * 64})}
    status, body = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query=query))
    assert status == 200 and body["items"] == [] and body["last_evaluated_key"] is None


def test_unknown_route_is_404_json(aws: Aws) -> None:
    status, body = call(metadata.handler, api_event("GET", "/nope"))
    assert_error(status, body, 404, "not_found")


def test_cors_headers_on_api_responses(aws: Aws) -> None:
    event = api_event("GET", "/metadata/" + "a" * 64, headers={"origin": "https://app.example.com"})
    response = metadata.handler(event, LambdaContext())
    assert response["headers"]["Access-Control-Allow-Origin"] in ("*", "https://app.example.com")
