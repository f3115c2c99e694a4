"""Pure logic: ids and keys, filenames, tokens, checksums, request validation, event parsing, config."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dfd.core import clock
from dfd.core.config import ConfigError, Settings
from dfd.core.errors import BadRequest, InvalidEvent, TooLarge, ValidationFailed
from dfd.core.hashing import b64_to_hex, hex_to_b64, sha256_of_chunks
from dfd.core.ids import clean_filename, event_key, upload_id_from_key, valid_content_type, version_token
from dfd.core.notifications import ObjectRef, is_sqs_batch, refs_from_message_body, refs_from_payload
from dfd.queries.service import content_disposition, parse_limit
from dfd.queries.tokens import MAX_TOKEN_CHARS, decode_token, encode_token
from dfd.uploads.service import parse_request
from tests.support import eventbridge, fixture, minimal_record, s3_notification

BASE_ENV = {
    "DDB_TABLE": "f",
    "DDB_COUNTERS_TABLE": "c",
    "UPLOADS_TABLE": "u",
    "EVENTS_TABLE": "e",
    "TENANT_FILES_TABLE": "t",
    "S3_BUCKET": "b",
}


def test_config_validates_at_init() -> None:
    settings = Settings.from_env(BASE_ENV)
    assert settings.upload_prefix == "uploads/" and settings.counter_shards == 16
    assert settings.shard_ids[0] == "shard#000" and len(settings.shard_ids) == 16
    for broken in (
        {},
        BASE_ENV | {"COUNTER_SHARDS": "0"},
        BASE_ENV | {"COUNTER_SHARDS": "101"},
        BASE_ENV | {"COUNTER_SHARDS": "many"},
        BASE_ENV | {"UPLOAD_PREFIX": "uploads"},
        BASE_ENV | {"UPLOAD_PREFIX": "/uploads/"},
        BASE_ENV | {"S3_BUCKET": " "},
        BASE_ENV | {"PARALLEL_PART_BYTES": "1000"},
        BASE_ENV | {"ALLOWED_ORIGINS": "*,https://app.example.com"},
        BASE_ENV | {"ALLOWED_ORIGINS": "https://app.example.com/path"},
        BASE_ENV | {"ALLOWED_ORIGINS": "app.example.com"},
    ):
        with pytest.raises(ConfigError):
            Settings.from_env(broken)


def test_config_defaults_are_the_dataclass_defaults() -> None:
    from_env = Settings.from_env(BASE_ENV)
    direct = Settings(
        files_table="f", counters_table="c", uploads_table="u", events_table="e", tenant_files_table="t", bucket="b"
    )
    assert from_env == direct
    assert from_env.upload_url_expires == 900 and from_env.parallel_workers == 8
    assert from_env.allowed_origins == ("*",)
    tuned = Settings.from_env(
        BASE_ENV
        | {
            "PARALLEL_WORKERS": " 4 ",
            "RECONCILE_GRACE_SECONDS": "0",
            "ALLOWED_ORIGINS": "https://app.example.com, http://127.0.0.1:8765,",
        }
    )
    assert tuned.parallel_workers == 4 and tuned.reconcile_grace_seconds == 0
    assert tuned.allowed_origins == ("https://app.example.com", "http://127.0.0.1:8765")


def test_keys_and_identity() -> None:
    assert upload_id_from_key("uploads/", "uploads/" + "a" * 32) == "a" * 32
    assert upload_id_from_key("uploads/", "uploads/photo.jpg") is None
    assert upload_id_from_key("uploads/", "other/" + "a" * 32) is None
    assert version_token(None, '"abc"') == "abc"
    assert version_token("null", '"abc"') == "abc"
    assert version_token("3HL4kqtJlcpXroDTDmJ", '"abc"') == "v:3HL4kqtJlcpXroDTDmJ"
    assert event_key("b", "uploads/x", "abc") == "b/uploads/x#abc"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("report.pdf", "report.pdf"),
        ("C:\\Users\\me\\report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("  spaced name.txt ", "spaced name.txt"),
        ("tab\there.txt", "tabhere.txt"),
        ("e\u0301te\u0301.txt", "\u00e9t\u00e9.txt"),
        ("日本語.txt", "日本語.txt"),
    ],
)
def test_clean_filename(raw: str, clean: str) -> None:
    assert clean_filename(raw) == clean


@pytest.mark.parametrize("raw", ["", "/", "dir/", "..", ".", "\x00\x01", "a/" + "\u200b"])
def test_clean_filename_refuses_empty_results(raw: str) -> None:
    with pytest.raises(ValueError):
        clean_filename(raw)


def test_content_types() -> None:
    for good in ("text/plain", "application/vnd.api+json", "text/plain; charset=utf-8", 'multipart/x; b="a b"'):
        assert valid_content_type(good), good
    for bad in ("text", "text/", "/plain", "text/plain\r\nx: y", "a b/c", "x" * 300 + "/y"):
        assert not valid_content_type(bad), bad


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_tokens_round_trip_and_refuse_anything_else() -> None:
    key = {"hash": "0123456789abcdef" * 4}
    token = encode_token(key)
    assert decode_token(token) == key
    assert json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) == key  # opaque, not secret
    malformed = [
        "",
        "%%%",
        "a" * 1000,  # over MAX_TOKEN_CHARS
        token[:-1],  # cut: the JSON no longer closes
        token + "A",  # a length no base64 has
        token[:10] + "!" + token[11:],  # not base64url
        _b64(b"\xff\xfe"),  # not UTF-8
        _b64(b"[]"),
        _b64(b"{}"),
        _b64(b'{"hash": 5}'),
        _b64(b'{"hash": null}'),
        encode_token({"hash": "nothex"}),
        encode_token({"hash": "A" * 64}),  # hashes are lowercase
        encode_token({"hash": "a" * 63}),
        encode_token({"hash": "a" * 64 + "\n"}),
        encode_token({"hash": "a" * 64, "x": "y"}),  # a key the file table does not have
    ]
    for bad in malformed:
        with pytest.raises(BadRequest) as raised:
            decode_token(bad)
        assert raised.value.code == "invalid_token", bad
    assert len(encode_token(key)) <= MAX_TOKEN_CHARS


def test_checksums() -> None:
    digest = hashlib.sha256(b"abc").hexdigest()
    assert b64_to_hex(hex_to_b64(digest)) == digest
    assert b64_to_hex("not base64!") is None
    assert b64_to_hex("AAAA") is None  # not 32 bytes
    assert b64_to_hex(hex_to_b64(digest) + "-3") is None  # composite multipart checksum
    assert sha256_of_chunks([b"a", b"b", b"c"]) == (digest, 3)


def test_parse_request() -> None:
    request = parse_request({"filename": "a.txt", "size": 5}, 10)
    assert request.content_type == "application/octet-stream" and request.sha256 is None
    with pytest.raises(TooLarge):
        parse_request({"filename": "a.txt", "size": 11}, 10)
    with pytest.raises(ValidationFailed):
        parse_request({"filename": "a.txt", "size": 5, "sha256": "A" * 64}, 10)


def test_limits_and_disposition() -> None:
    assert parse_limit(None) == 50 and parse_limit("1") == 1 and parse_limit("1000") == 1000
    for bad in ("", "0", "1001", "x", "-3", "٣"):
        with pytest.raises(BadRequest):
            parse_limit(bad)
    value = content_disposition('résumé "final".pdf')
    assert value.startswith('attachment; filename="r_sum_ _final_.pdf"')
    assert "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf" in value


def test_event_shapes() -> None:
    expected = [ObjectRef("dfd-file-service", "uploads/example.txt")]
    assert refs_from_payload(fixture("s3-put.json")) == expected
    assert refs_from_payload(fixture("s3-minimal.json")) == expected
    assert refs_from_payload(fixture("eventbridge-object-created.json")) == expected
    assert refs_from_payload(fixture("s3-test-event.json")) == []
    sqs = fixture("sqs-s3-put.json")
    assert is_sqs_batch(sqs) and not is_sqs_batch(fixture("s3-put.json"))
    assert refs_from_message_body(sqs["Records"][0]["body"]) == expected
    assert refs_from_message_body(sqs["Records"][1]["body"]) == []
    for key in ("uploads/a b+c.txt", "uploads/ü/日本.txt", "uploads/100%.txt"):
        for make in (s3_notification, minimal_record, eventbridge):
            assert refs_from_payload(make("b", key)) == [ObjectRef("b", key)]


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        "string",
        {},
        {"Records": []},
        {"Records": "x"},
        {"Records": [1]},
        {"Records": [{"s3": {}}]},
        {"Records": [{"s3": {"bucket": {"name": "b"}, "object": {}}}]},
        {"Records": [{"s3": {"bucket": {"name": ""}, "object": {"key": "k"}}}]},
        {"Records": [{"s3": {"bucket": {"name": "b"}, "object": {"key": 5}}}]},
        {"Records": [{"s3": {"bucket": {"name": "b"}, "object": {"key": "k" * 1025}}}]},
        {"detail-type": "Object Created", "source": "aws.s3"},
        {"detail-type": "Object Created", "source": "aws.s3", "detail": {"bucket": {}}},
    ],
)
def test_malformed_events(payload: object) -> None:
    with pytest.raises(InvalidEvent):
        refs_from_payload(payload)


def test_malformed_message_bodies() -> None:
    for body in (None, "", "{", json.dumps([1])):
        with pytest.raises(InvalidEvent):
            refs_from_message_body(body)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("text/plain", True),
        ('text/plain; charset="utf-8"', True),
        ('multipart/form-data; boundary="a b:c"', True),
        ('text/plain; charset="日本"', False),  # no HTTP client can send it
        ('text/plain; x="\u0085"', False),
        ('text/plain; x="a\\"b"', False),
        ('text/plain; x="\x7f"', False),
    ],
)
def test_content_type_parameters_are_printable_ascii(value: str, valid: bool) -> None:
    assert valid_content_type(value) is valid


class DynamoLikeScan:
    """Scan as DynamoDB pages it: a LastEvaluatedKey whenever the page stopped at Limit — even on the table's
    last item (moto leaves it out there, so only a stand-in shows the difference)."""

    def __init__(self, hashes: list[str]) -> None:
        self.hashes = sorted(hashes)
        self.requests: list[dict[str, Any]] = []

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        after = kwargs.get("ExclusiveStartKey", {}).get("hash", {}).get("S", "")
        rest = [h for h in self.hashes if h > after]
        page = rest[: kwargs["Limit"]]
        response: dict[str, Any] = {"Items": [{"hash": {"S": h}} for h in page]}
        if len(page) == kwargs["Limit"]:
            response["LastEvaluatedKey"] = {"hash": {"S": page[-1]}}
        return response


@pytest.mark.parametrize("count", [4, 5, 6])
def test_hashes_last_page_has_no_token_even_when_dynamodb_gives_one(count: int) -> None:
    from dfd.adapters.dynamo import Repository

    hashes = [f"{i:064x}" for i in range(count)]
    client = DynamoLikeScan(hashes)
    repo = Repository(client, Settings.from_env(BASE_ENV))
    seen: list[str] = []
    start: dict[str, str] | None = None
    for _ in range(count):
        items, start = repo.scan_files(2, start)
        assert len(items) <= 2
        seen += [item.hash for item in items]
        if start is None:
            break
        assert items, "a token must lead to a non-empty page"
    assert start is None and seen == hashes
    assert len(client.requests) == (count + 1) // 2  # one request a page, no empty last page


def test_one_time_format_written_and_read() -> None:
    moment = datetime(2026, 11, 22, 3, 0, 5, 999_000, tzinfo=UTC)
    text = clock.iso(moment)
    assert text == "2026-11-22T03:00:05Z"
    assert clock.parse(text) == moment.replace(microsecond=0) and clock.parse(text).utcoffset() == timedelta(0)
    for bad in ("", "yesterday", "2026-13-01T00:00:00Z"):
        with pytest.raises(ValueError):
            clock.parse(bad)
