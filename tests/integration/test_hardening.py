"""Client strings are echoed bounded and printable, traces never hold presigned URLs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dfd.core.observability import _provider, logger
from dfd.handlers import admin_hashes, download, metadata, upload
from tests.integration.support import Aws, upload_bytes
from tests.support import ADMIN, api_event, call

ROOT = "Root=1-67407c00-0123456789abcdef01234567;Parent=0123456789abcdef"


class LogLines:
    """The JSON lines the function logger writes, through a strict UTF-8 stream like Lambda's stdout; a line
    that cannot be written fails the test (logging.raiseExceptions) instead of vanishing."""

    def __init__(self) -> None:
        self.raw = io.BytesIO()
        stream = io.TextIOWrapper(self.raw, encoding="utf-8", errors="strict", write_through=True)
        self.handler = logging.StreamHandler(stream)
        self.handler.setFormatter(logger.registered_formatter)
        self.handler.handleError = self._raise  # type: ignore[method-assign]

    @staticmethod
    def _raise(record: logging.LogRecord) -> None:
        raise AssertionError(f"the log line of {record.msg!r} could not be written")

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.raw.getvalue().decode("utf-8").splitlines()]


@pytest.fixture
def log_lines() -> Iterator[LogLines]:
    captured = LogLines()
    inner = logging.getLogger(logger.name)
    inner.addHandler(captured.handler)
    try:
        yield captured
    finally:
        inner.removeHandler(captured.handler)


def post(raw: str) -> tuple[int, dict[str, Any]]:
    return call(upload.handler, api_event("POST", "/upload", raw_body=raw))


def test_unknown_fields_are_echoed_bounded(aws: Aws) -> None:
    names = [f"{i:04d}" + "x" * 10_000 for i in range(2_000)]
    body = {"filename": "a.txt", "size": 10} | dict.fromkeys(names, 1)
    status, answer = post(json.dumps(body))
    assert status == 400 and answer["error"]["code"] == "validation_error"
    details = answer["error"]["details"]
    assert details["count"] == 2_000
    assert len(details["fields"]) == 5
    assert all(len(name) <= 65 and name.startswith(f"{i:04d}x") for i, name in enumerate(details["fields"]))
    assert "2000 unknown field(s)" in answer["error"]["message"] and "1995 more" in answer["error"]["message"]
    assert len(json.dumps(answer)) < 2_000


def test_a_lone_surrogate_in_a_field_name_is_answered_and_logged(aws: Aws, log_lines: LogLines) -> None:
    status, answer = post('{"filename": "a.txt", "size": 10, "\\ud800evil": 1}')
    assert status == 400 and answer["error"]["code"] == "validation_error"
    assert answer["error"]["details"]["fields"] == ["\\ud800evil"]  # the escape as text: printable anywhere
    failures = [line for line in log_lines.lines() if line.get("message") == "request failed"]
    assert len(failures) == 1, log_lines.lines()
    assert failures[0]["status"] == 400 and "\\ud800evil" in failures[0]["error"]


def test_other_echoed_inputs_are_bounded(aws: Aws) -> None:
    """Path ids, query values and tokens are validated before anything is echoed: never quoted back."""
    evil = "\ud800" + "z" * 100_000
    for handler, event in (
        (metadata.handler, api_event("GET", f"/metadata/{evil}")),
        (download.handler, api_event("GET", f"/download/{evil}")),
        (admin_hashes.handler, api_event("GET", "/admin/hashes", query={"limit": evil}, user=ADMIN)),
        (admin_hashes.handler, api_event("GET", "/admin/hashes", query={"last_evaluated_key": evil}, user=ADMIN)),
    ):
        status, answer = call(handler, event)
        assert 400 <= status < 500, answer
        assert len(json.dumps(answer)) < 500 and "zzzz" not in json.dumps(answer)


class _Subsegment:
    def __init__(self, recorded: list[tuple[str, Any]]) -> None:
        self._recorded = recorded

    def put_annotation(self, key: str, value: Any) -> None:
        self._recorded.append(("annotation:" + key, value))

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self._recorded.append(("metadata:" + key, value))


class _Recorder:
    """Stands in for the X-Ray recorder: what the provider would record, kept for the test."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, Any]] = []

    @contextmanager
    def in_subsegment(self, name: str | None = None, **_: Any) -> Iterator[_Subsegment]:
        self.recorded.append(("subsegment", name))
        yield _Subsegment(self.recorded)

    def put_annotation(self, key: str, value: Any) -> None:
        self.recorded.append(("annotation:" + key, value))

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.recorded.append(("metadata:" + key, value))


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    """Tracing on and this invocation sampled: the repository's provider records into a fake recorder."""
    recorder = _Recorder()
    monkeypatch.setenv("AWS_XRAY_SDK_ENABLED", "true")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"{ROOT};Sampled=1")
    monkeypatch.setattr(_provider, "disabled", False)
    monkeypatch.setattr(_provider, "_recorder", recorder)
    return recorder


def test_no_presigned_url_reaches_the_trace(aws: Aws, traced: _Recorder) -> None:
    answer = upload_bytes(aws, b"traced bytes\n" * 100, "t.txt")
    status, link = call(download.handler, api_event("GET", f"/download/{answer['upload_id']}"))
    assert status == 200 and "X-Amz-Signature" in link["download_url"]
    assert "X-Amz-Signature" in answer["upload_url"]
    subsegments = [value for kind, value in traced.recorded if kind == "subsegment"]
    assert "## handler" in subsegments and len(subsegments) >= 2  # both functions were traced
    recorded = json.dumps([value for _, value in traced.recorded], default=str)
    assert "X-Amz-Signature" not in recorded and "X-Amz-Credential" not in recorded
    assert answer["upload_url"] not in recorded and link["download_url"] not in recorded
