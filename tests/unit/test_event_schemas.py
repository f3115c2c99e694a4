"""docs/events/: every detail type has a JSON Schema and an example that validates against it, and what the
publisher builds for each transition validates against its schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from dfd.adapters.eventbridge import entry
from dfd.core.records import FileRecord, UploadRecord, UploadStatus, UploadVia
from dfd.events.outcomes import DetailType, file_events, upload_events

DOCS = Path(__file__).resolve().parents[2] / "docs" / "events"
AT = "2026-03-01T12:00:00.000Z"
SLUGS = {kind: kind.value.lower().replace(" ", "-") for kind in DetailType}


def schema(kind: DetailType) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DOCS / f"{SLUGS[kind]}.schema.json").read_text())
    return loaded


@pytest.mark.parametrize("kind", list(DetailType))
def test_each_detail_type_has_a_valid_schema_and_example(kind: DetailType) -> None:
    Draft202012Validator.check_schema(schema(kind))
    example = json.loads((DOCS / f"{SLUGS[kind]}.example.json").read_text())
    Draft202012Validator(schema(kind)).validate(example)
    assert example["detail-type"] == kind.value
    assert SLUGS[kind] in (DOCS / "README.md").read_text()


def published(kind: DetailType, detail: dict[str, Any]) -> dict[str, Any]:
    return {"source": "dfd", "detail-type": kind.value, "detail": detail}


def test_what_the_publisher_builds_validates() -> None:
    digest = "ab" * 32
    base = UploadRecord(upload_id="c" * 32, status=UploadStatus.PENDING, owner="o", tenant="t", filename="f", size=4)
    changes = [
        (base, UploadRecord(**{**_fields(base), "status": UploadStatus.STORED, "hash": digest})),
        (
            base,
            UploadRecord(
                **{**_fields(base), "status": UploadStatus.STORED, "outcome": UploadStatus.DUPLICATE, "hash": digest}
            ),
        ),
        (base, UploadRecord(**{**_fields(base), "status": UploadStatus.DELETED})),
        (base, UploadRecord(**{**_fields(base), "status": UploadStatus.EXPIRED})),
        (base, UploadRecord(**{**_fields(base), "status": UploadStatus.FAILED})),
        (None, UploadRecord(**{**_fields(base), "status": UploadStatus.REJECTED, "failure": "too_large"})),
    ]
    events = [e for old, new in changes for e in upload_events(old, new, committed_at="2026-03-01T12:00:00.000Z")]
    content = FileRecord(hash=digest, size=4, s3_key="k", bucket="b", etag="e", generation=1)
    events += file_events(None, content, committed_at="2026-03-01T12:00:00.000Z")
    events += file_events(content, None, committed_at="2026-03-01T12:00:00.000Z")
    assert {e.detail_type for e in events} == set(DetailType)
    for event in events:
        document = json.loads(entry(event, "bus")["Detail"])
        Draft202012Validator(schema(event.detail_type)).validate(published(event.detail_type, document))


@pytest.mark.parametrize("via", [*UploadVia, None])
def test_every_upload_event_carries_how_its_object_came_in(via: UploadVia | None) -> None:
    """Each Upload event's detail names its upload's `via` (None: recorded before dfd kept it), and its schema
    requires it with exactly dfd's values."""
    base = UploadRecord(upload_id="c" * 32, status=UploadStatus.PENDING, owner="o", tenant="t", size=4, via=via)
    ends = [UploadStatus.STORED, UploadStatus.DELETED, UploadStatus.EXPIRED, UploadStatus.FAILED]
    events = [e for end in ends for e in upload_events(base, _with(base, status=end, hash="ab" * 32), committed_at=AT)]
    events += upload_events(None, _with(base, status=UploadStatus.REJECTED), committed_at=AT)
    events += upload_events(
        base, _with(base, status=UploadStatus.STORED, outcome=UploadStatus.DUPLICATE, hash="ab" * 32), committed_at=AT
    )
    assert {e.detail_type for e in events} == {kind for kind in DetailType if kind.is_upload}
    for event in events:
        detail = json.loads(entry(event, "bus")["Detail"])
        assert detail["via"] == (via.value if via is not None else None)
        Draft202012Validator(schema(event.detail_type)).validate(published(event.detail_type, detail))
        declared = schema(event.detail_type)["properties"]["detail"]
        assert "via" in declared["required"]
        assert declared["properties"]["via"]["enum"] == [*(v.value for v in UploadVia), None]


def _with(record: UploadRecord, **changed: Any) -> UploadRecord:
    return UploadRecord(**{**_fields(record), **changed})


def _fields(record: UploadRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
