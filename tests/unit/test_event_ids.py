"""Every event's `event_id` is unique per transition over the whole life of its record's key — across reaps and
stores again, deletes and uploads again, a record's TTL and a drop-zone object sent again alike — and the same for
every re-delivery of one change (dfd.events.outcomes): the real services over the fakes, their committed changes
published through the fake stream."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from dfd.adapters.publisher import publish
from dfd.core import clock
from dfd.core.notifications import ObjectRef
from dfd.core.records import FileRecord, UploadRecord, UploadStatus
from dfd.deletes.service import DeleteService
from dfd.events.outcomes import event_id, file_events, upload_events
from dfd.identity.caller import Caller
from dfd.identity.s3access import prefix_for
from dfd.ingest.service import Ingestor, Outcome
from dfd.reconcile.service import Reconciler
from dfd.uploads.multipart import MultipartService
from dfd.uploads.service import UploadRequest, UploadService
from tests.unit.callers import ADMIN, ALICE, settings
from tests.unit.fakes import FakeIngestQueue, FakeObjectStore, FakeRepository, run_reconcile
from tests.unit.feed import TABLES, FakeStream, RecordingSink

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
BUCKET = "b"
DATA = b"the same content, stored twice" * 4


class World:
    def __init__(self) -> None:
        self.now = START
        self.settings = settings(bucket=BUCKET, max_upload_bytes=1000)
        self.repo = FakeRepository(self.settings)
        self.objects = FakeObjectStore()
        clock_ = lambda: self.now  # noqa: E731
        multipart = MultipartService(self.settings, self.repo, self.objects, now=clock_)
        self.deletes = DeleteService(self.settings, self.repo, multipart, now=clock_, sleep=lambda _: None)
        self.uploads = UploadService(self.settings, self.repo, self.objects, now=clock_)
        self.ingestor = Ingestor(self.settings, self.repo, self.objects, now=clock_, sleep=lambda _: None)
        self.reconciler = Reconciler(self.settings, self.repo, self.objects, FakeIngestQueue(), workers=1, wall=clock_)
        self.stream = FakeStream(self.repo)
        self.sink = RecordingSink()
        self.records: list[dict[str, Any]] = []

    def published(self) -> list[str]:
        """The detail types the changes since the last call published."""
        records = self.stream.drain()
        self.records += records
        result = publish(records, TABLES, self.sink)
        assert not result.failed
        return [e.detail_type.value for e in result.published]

    def store(self, data: bytes = DATA, caller: Caller = ALICE) -> str:
        answer = self.uploads.create(UploadRequest("f.bin", len(data), "application/octet-stream", None), caller)
        assert answer.status == 201, answer
        self.objects.put(BUCKET, str(answer.body["key"]), data)
        assert self.ingest(str(answer.body["key"])) in (Outcome.STORED, Outcome.DUPLICATE)
        return str(answer.body["upload_id"])

    def ingest(self, key: str) -> Outcome:
        return self.ingestor.ingest(ObjectRef(BUCKET, key)).outcome

    def reap(self) -> None:
        self.now += timedelta(seconds=self.settings.delete_grace_seconds + 60)
        run_reconcile(self.reconciler, now=clock.iso(self.now))

    def ttl(self, upload_id: str) -> None:
        """DynamoDB's TTL deleting an upload record whose `ttl` passed (a stream REMOVE: no outcome)."""
        self.now += timedelta(days=self.settings.upload_ttl_days + 1)
        assert self.repo.uploads[upload_id].get("ttl") is not None
        del self.repo.uploads[upload_id]
        assert self.published() == []

    def drop(self, data: bytes, etag: str | None = None) -> tuple[str, str]:
        """An object put under ALICE's s3/ prefix, and its event: (outcome, upload id). `etag`: S3's ETag of a
        single PUT is the MD5 of its bytes — the same bytes sent again have the same one; given, the write also
        keeps one Last-Modified (S3's is to the second: the same bytes written again within it name one upload
        id, the case where only the record's incarnation tells the records apart)."""
        key = prefix_for(ALICE.tenant, ALICE.owner) + "dir/a.bin"
        self.objects.put(BUCKET, key, data)
        if etag is not None:
            self.objects.objects[(BUCKET, key)] = dataclasses.replace(
                self.objects.objects[(BUCKET, key)], etag=etag, last_modified="2026-01-01T00:00:00Z"
            )
        result = self.ingestor.ingest(ObjectRef(BUCKET, key))
        assert result.upload_id is not None
        return result.outcome.value, result.upload_id

    def ids(self) -> list[str]:
        return [event.event_id for event in self.sink.taken]

    def assert_unique_and_replayed_alike(self) -> None:
        ids = self.ids()
        assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
        again = RecordingSink()
        publish(self.records, TABLES, again)
        assert [event.event_id for event in again.taken] == ids


def test_a_content_reaped_and_stored_again_publishes_new_file_ids() -> None:
    world = World()
    first = world.store()
    assert world.published() == ["Upload Stored", "File Stored"]
    world.deletes.delete(ALICE, first)
    world.reap()
    assert world.published() == ["Upload Deleted", "File Removed"]
    second = world.store()  # the record is created again: generation 1 again
    assert world.repo.files[world.repo.uploads[second]["hash"]]["generation"] == 1
    assert world.published() == ["Upload Stored", "File Stored"]
    world.deletes.delete(ALICE, second)
    world.reap()
    assert world.published() == ["Upload Deleted", "File Removed"]
    files = [e for e in world.sink.taken if e.detail_type.value.startswith("File ")]
    assert len({e.event_id for e in files}) == 4
    world.assert_unique_and_replayed_alike()


def test_a_drop_zone_object_sent_again_after_its_record_s_ttl_publishes_new_upload_ids() -> None:
    world = World()
    big = b"x" * 2000  # over MaxUploadBytes: rejected
    outcome, rejected = world.drop(big, etag='"big"')
    assert outcome == "rejected" and world.published() == ["Upload Rejected"]
    world.ttl(rejected)
    outcome, again = world.drop(big, etag='"big"')
    assert (outcome, again) == ("rejected", rejected) and world.published() == ["Upload Rejected"]

    outcome, moved = world.drop(DATA, etag='"data"')
    assert outcome == "moved" and world.published() == []
    world.deletes.delete(ALICE, moved)  # cancelled while pending: the record keeps its TTL
    assert world.published() == ["Upload Deleted"]
    world.ttl(moved)
    outcome, same = world.drop(DATA, etag='"data"')
    assert (outcome, same) == ("moved", moved)
    assert world.ingest(f"uploads/{moved}") == Outcome.STORED
    assert world.published() == ["Upload Stored", "File Stored"]
    world.deletes.delete(ALICE, moved)
    assert world.published() == ["Upload Deleted"]

    outcome, failing = world.drop(b"never ingested" * 3, etag='"failing"')
    assert outcome == "moved"
    for _ in range(2):  # the reconcile gives up re-driving it, twice: a record between each
        assert world.repo.end_pending_upload(failing, UploadStatus.FAILED, world.now, tenant=ALICE.tenant)
        assert world.published() == ["Upload Failed"]
        world.ttl(failing)
        assert world.drop(b"never ingested" * 3, etag='"failing"') == ("moved", failing)
    world.assert_unique_and_replayed_alike()


def test_an_object_put_at_an_upload_key_after_its_record_s_ttl_publishes_new_upload_ids() -> None:
    world = World()
    answer = world.uploads.create(UploadRequest("f.bin", len(DATA), "application/octet-stream", None), ALICE)
    upload_id = str(answer.body["upload_id"])
    world.deletes.delete(ALICE, upload_id)
    assert world.published() == ["Upload Deleted"]
    world.ttl(upload_id)
    world.objects.put(BUCKET, f"uploads/{upload_id}", DATA)  # straight into the bucket, no registration
    assert world.ingest(f"uploads/{upload_id}") == Outcome.STORED
    assert world.repo.uploads[upload_id]["via"] == "bucket"
    assert world.published() == ["Upload Stored", "File Stored"]
    world.deletes.delete(ADMIN, upload_id)
    assert world.published() == ["Upload Deleted"]
    world.assert_unique_and_replayed_alike()


def test_a_record_written_before_incarnations_keeps_the_ids_it_was_published_with() -> None:
    file = FileRecord(hash="h" * 64, size=5, generation=2)
    digest = file.hash
    assert [e.event_id for e in file_events(None, file, committed_at="t")] == [event_id("file", digest, "2", "stored")]
    assert [e.event_id for e in file_events(file, None, committed_at="t")] == [event_id("file", digest, "2", "removed")]
    pending = UploadRecord(upload_id="a" * 32, status=UploadStatus.PENDING)
    deleted = dataclasses.replace(pending, status=UploadStatus.DELETED)
    assert [e.event_id for e in upload_events(pending, deleted, committed_at="t")] == [
        event_id("upload", "a" * 32, "deleted")
    ]
    # with an incarnation: another id, the same for every replay of the change
    marked = dataclasses.replace(file, incarnation="n1")
    stored = [e.event_id for e in file_events(None, marked, committed_at="t")]
    assert stored == [e.event_id for e in file_events(None, marked, committed_at="later")]
    assert stored != [event_id("file", digest, "2", "stored")]
    other = dataclasses.replace(file, incarnation="n2")
    assert stored != [e.event_id for e in file_events(None, other, committed_at="t")]
