"""Outcome events from committed changes (dfd.events.outcomes, dfd.adapters.publisher) on the in-memory ports: every
transition of every path the fakes model (the API's register, 409 precheck, delete and cancel; the ingest's stored,
duplicate, cross-tenant duplicate, resurrection and replay; the reconcile's expire and fail) emits exactly one event, a
write that changed nothing emits none, and a re-delivered change carries the same event_id."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from dfd.adapters.publisher import publish
from dfd.core.config import Settings
from dfd.core.notifications import ObjectRef
from dfd.core.records import FileRecord, UploadRecord, UploadStatus, UploadVia
from dfd.deletes.service import DeleteService
from dfd.events.outcomes import DetailType, OutcomeEvent, event_id, file_events, upload_events
from dfd.identity.caller import Caller
from dfd.ingest.service import Ingestor, Outcome
from dfd.uploads.multipart import MultipartService
from dfd.uploads.service import UploadRequest, UploadService
from tests.unit.fakes import FakeObjectStore, FakeRepository
from tests.unit.feed import TABLES, FakeStream, RecordingSink, stream_record

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ALICE = Caller(owner="alice-sub", tenant="acme", is_admin=False)
CAROL = Caller(owner="carol-sub", tenant="acme", is_admin=False)
BOB = Caller(owner="bob-sub", tenant="globex", is_admin=False)
DATA = b"published once" * 10
OTHER = b"other content" * 10


class World:
    def __init__(self) -> None:
        self.settings = Settings(
            files_table="f", counters_table="c", uploads_table="u", events_table="e", tenant_files_table="t", bucket="b"
        )
        self.repo = FakeRepository(self.settings)
        self.objects = FakeObjectStore()
        multipart = MultipartService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.deletes = DeleteService(self.settings, self.repo, multipart, now=lambda: NOW, sleep=lambda _: None)
        self.uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=lambda _: None)
        self.stream = FakeStream(self.repo)
        self.sink = RecordingSink()
        self.records: list[dict[str, Any]] = []

    def step(self) -> list[tuple[str, str | None]]:
        """Publish what the last operation committed: (detail type, upload id or sha256) per event."""
        records = self.stream.drain()
        self.records += records
        result = publish(records, TABLES, self.sink)
        assert not result.failed
        return [(e.detail_type.value, e.upload_id or e.sha256) for e in result.published]

    def register(self, caller: Caller, data: bytes = DATA, sha256: str | None = None) -> dict[str, Any]:
        answer = self.uploads.create(UploadRequest("f.bin", len(data), "application/octet-stream", sha256), caller)
        return {"status": answer.status, **answer.body}

    def put_and_ingest(self, body: dict[str, Any], data: bytes = DATA) -> Outcome:
        self.objects.put("b", body["key"], data)
        return self.ingestor.ingest(ObjectRef("b", body["key"])).outcome


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def world() -> World:
    return World()


def test_every_path_emits_exactly_one_event_per_transition(world: World) -> None:
    first = world.register(ALICE)
    assert world.step() == []  # registered, pending: no outcome
    assert world.put_and_ingest(first) == Outcome.STORED
    assert world.step() == [("Upload Stored", first["upload_id"]), ("File Stored", digest(DATA))]
    assert world.ingestor.ingest(ObjectRef("b", first["key"])).outcome == Outcome.REPLAY
    assert world.step() == []  # a replay changed nothing

    same_tenant = world.register(CAROL)
    world.step()
    assert world.put_and_ingest(same_tenant) == Outcome.DUPLICATE
    assert world.step() == [("Upload Deduplicated", same_tenant["upload_id"])]

    # another tenant: new to it (its upload's status is `stored`), yet globally a duplicate
    cross = world.register(BOB)
    world.step()
    assert world.put_and_ingest(cross) == Outcome.DUPLICATE
    assert world.repo.uploads[cross["upload_id"]]["status"] == "stored"
    assert world.step() == [("Upload Deduplicated", cross["upload_id"])]

    precheck = world.register(ALICE, sha256=digest(DATA))
    assert precheck["status"] == 409
    assert world.step() == [("Upload Deduplicated", precheck["upload_id"])]

    pending = world.register(ALICE, OTHER)
    world.step()
    assert world.deletes.delete(ALICE, pending["upload_id"]).outcome == "cancelled"
    assert world.step() == [("Upload Deleted", pending["upload_id"])]
    assert world.deletes.delete(ALICE, pending["upload_id"]).outcome == "already"
    assert world.step() == []

    for status, kind in (("expired", "Upload Expired"), ("failed", "Upload Failed")):
        ended = world.register(BOB, OTHER)
        world.step()
        assert world.repo.end_pending_upload(ended["upload_id"], status, NOW, tenant="globex", quota_bytes=len(OTHER))
        assert world.step() == [(kind, ended["upload_id"])]

    for upload in (first, same_tenant, cross, precheck):
        caller = {"alice-sub": ALICE, "carol-sub": CAROL, "bob-sub": BOB}[
            world.repo.uploads[upload["upload_id"]]["owner"]
        ]
        assert world.deletes.delete(caller, upload["upload_id"]).outcome == "deleted"
        assert world.step() == [("Upload Deleted", upload["upload_id"])]
    assert world.repo.files[digest(DATA)]["live_refs"] == 0

    # tombstoned content uploaded again: stored anew with this upload's bytes (generation 2)
    again = world.register(BOB)
    world.step()
    assert world.put_and_ingest(again) == Outcome.STORED
    assert world.step() == [("Upload Stored", again["upload_id"]), ("File Stored", digest(DATA))]

    # the reaper's delete of a record (ASL on AWS; its change is all the publisher sees)
    world.repo.files.pop(digest(DATA))
    assert world.step() == [("File Removed", digest(DATA))]

    ids = [event.event_id for event in world.sink.taken]
    assert len(ids) == len(set(ids))
    # a whole re-delivery of the stream publishes the same events, ids included
    again_sink = RecordingSink()
    publish(world.records, TABLES, again_sink)
    assert [e.event_id for e in again_sink.taken] == ids
    assert again_sink.taken == world.sink.taken


def test_a_refused_entry_fails_its_record_only_and_is_published_with_the_same_id(world: World) -> None:
    first, second = world.register(ALICE), world.register(BOB, OTHER)
    world.put_and_ingest(first)
    world.put_and_ingest(second, OTHER)
    records = world.stream.drain()
    stored_second = event_id("upload", second["upload_id"], "processed")
    sink = RecordingSink(refuse={stored_second})
    result = publish(records, TABLES, sink)
    failed = [r for r in records if r["dynamodb"]["SequenceNumber"] in result.failed]
    assert len(failed) == 1 and failed[0]["dynamodb"]["NewImage"]["upload_id"]["S"] == second["upload_id"]
    retry = publish(failed, TABLES, sink)
    assert retry.failed == []
    assert [e.event_id for e in retry.published] == [stored_second]


def upload(status: UploadStatus, **fields: Any) -> UploadRecord:
    return UploadRecord(upload_id="a" * 32, status=status, owner="o", tenant="t", filename="f", size=3, **fields)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, upload(UploadStatus.PENDING), []),
        (upload(UploadStatus.PENDING), upload(UploadStatus.PENDING), []),
        (upload(UploadStatus.PENDING), upload(UploadStatus.STORED, outcome=UploadStatus.STORED), ["Upload Stored"]),
        (upload(UploadStatus.PENDING), upload(UploadStatus.STORED), ["Upload Stored"]),
        (
            upload(UploadStatus.PENDING),
            upload(UploadStatus.STORED, outcome=UploadStatus.DUPLICATE),
            ["Upload Deduplicated"],
        ),
        (None, upload(UploadStatus.DUPLICATE, outcome=UploadStatus.DUPLICATE), ["Upload Deduplicated"]),
        (upload(UploadStatus.DUPLICATE), upload(UploadStatus.STORED), []),  # adopted as the stored copy
        (upload(UploadStatus.FAILED), upload(UploadStatus.STORED), ["Upload Stored"]),  # redriven from the DLQ
        (upload(UploadStatus.STORED), upload(UploadStatus.DELETED), ["Upload Deleted"]),
        (upload(UploadStatus.PENDING), upload(UploadStatus.EXPIRED), ["Upload Expired"]),
        (upload(UploadStatus.PENDING), upload(UploadStatus.FAILED), ["Upload Failed"]),
        (upload(UploadStatus.DELETED), None, []),  # its TTL
    ],
)
def test_upload_transitions(old: UploadRecord | None, new: UploadRecord | None, expected: list[str]) -> None:
    events = upload_events(old, new, committed_at="2026-03-01T12:00:00.000Z")
    assert [e.detail_type.value for e in events] == expected


def test_ids_name_the_record_and_the_transition_only() -> None:
    def ids(old: UploadRecord, new: UploadRecord, at: str) -> list[str]:
        return [e.event_id for e in upload_events(old, new, committed_at=at)]

    pending, stored = upload(UploadStatus.PENDING), upload(UploadStatus.STORED, processed_at="x")
    assert ids(pending, stored, "2026-03-01T12:00:00.000Z") == ids(pending, stored, "2027-01-01T00:00:00.000Z")
    assert ids(pending, stored, "t") != ids(stored, upload(UploadStatus.DELETED), "t")


def file(generation: int, **fields: Any) -> FileRecord:
    return FileRecord(hash="h" * 64, size=5, s3_key="k", bucket="b", etag="e", generation=generation, **fields)


def test_file_transitions() -> None:
    at = "2026-03-01T12:00:00.000Z"

    def kinds(old: FileRecord | None, new: FileRecord | None) -> list[str]:
        return [e.detail_type.value for e in file_events(old, new, committed_at=at)]

    assert kinds(None, file(1)) == ["File Stored"]
    assert kinds(file(1), file(1, live_refs=2)) == []
    assert kinds(file(1), file(1, lost=True)) == []
    assert kinds(file(1), file(2)) == ["File Stored"]
    assert kinds(file(2), None) == ["File Removed"]
    assert len({e.event_id for g in (1, 2) for e in file_events(None, file(g), committed_at=at)}) == 2
    removed = file_events(file(1), None, committed_at=at)[0]
    assert set(removed.detail()) == {"event_id", "occurred_at", "sha256", "size"}  # no uploader, no tenant


def test_an_image_of_no_record_publishes_nothing_and_is_not_retried() -> None:
    keys_only = stream_record(TABLES.uploads, 7, None, {"upload_id": "a" * 32})
    other = stream_record("TenantFiles", 8, None, {"tenant": "t", "hash": "h"})
    sink = RecordingSink()
    result = publish([keys_only, other], TABLES, sink)
    assert result.failed == [] and sink.taken == [] and [n for n, _ in result.skipped] == ["7", "8"]


def test_upload_detail_names_the_uploader() -> None:
    pending = upload(UploadStatus.PENDING, via=UploadVia.LFS)
    stored = upload(UploadStatus.STORED, hash="c" * 64, via=UploadVia.LFS)
    [event] = upload_events(pending, stored, committed_at="t")
    assert isinstance(event, OutcomeEvent) and event.detail_type is DetailType.UPLOAD_STORED
    assert event.detail() == {
        "event_id": event.event_id,
        "occurred_at": "t",
        "tenant": "t",
        "owner": "o",
        "upload_id": "a" * 32,
        "filename": "f",
        "via": "lfs",
        "sha256": "c" * 64,
        "size": 3,
    }


@pytest.mark.parametrize(
    ("status", "stamp"),
    [(UploadStatus.DELETED, "deleted_at"), (UploadStatus.FAILED, "failed_at"), (UploadStatus.EXPIRED, "expired_at")],
)
def test_occurred_at_is_the_record_s_own_time_of_the_transition(status: UploadStatus, stamp: str) -> None:
    ended = upload(status, **{stamp: "2026-03-01T12:34:56Z"})
    [event] = upload_events(upload(UploadStatus.PENDING), ended, committed_at="2026-03-01T12:35:00.000Z")
    assert event.occurred_at == "2026-03-01T12:34:56Z"
    [event] = upload_events(upload(UploadStatus.PENDING), upload(status), committed_at="2026-03-01T12:35:00.000Z")
    assert event.occurred_at == "2026-03-01T12:35:00.000Z"  # no such time on the record: the commit's
