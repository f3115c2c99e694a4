"""DeleteService on the in-memory ports: the decisions (delete, cancel, already), the retries after a concurrent
change, the tombstone at the last reference, and the ingest of an object for a cancelled upload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dfd.deletes import DeleteService
from dfd.errors import Forbidden, NotFound, ServiceUnavailable
from dfd.events import ObjectRef
from dfd.ingest import Ingestor, Outcome
from dfd.multipart import MultipartService
from dfd.uploads import UploadRequest, UploadService
from tests.unit.fakes import FakeObjectStore, FakeRepository
from tests.unit.test_multipart import ADMIN, ALICE, BOB, CAROL, settings

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DATA = b"reference counted" * 10


class World:
    def __init__(self) -> None:
        self.settings = settings()
        self.repo = FakeRepository(self.settings)
        self.objects = FakeObjectStore()
        multipart = MultipartService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.deletes = DeleteService(self.settings, self.repo, multipart, now=lambda: NOW, sleep=lambda _: None)
        self.uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=lambda _: None)

    def upload(self, caller: Any, data: bytes = DATA) -> str:
        answer = self.uploads.create(UploadRequest("f.bin", len(data), "application/octet-stream", None), caller)
        assert answer.status == 201
        self.objects.put("b", answer.body["key"], data)
        assert self.ingestor.ingest(ObjectRef("b", answer.body["key"])).outcome in (Outcome.STORED, Outcome.DUPLICATE)
        return str(answer.body["upload_id"])


@pytest.fixture
def world() -> World:
    return World()


def test_rules_and_the_last_reference_tombstones(world: World) -> None:
    first, second = world.upload(ALICE), world.upload(BOB)
    with pytest.raises(NotFound):
        world.deletes.delete(BOB, first)
    with pytest.raises(Forbidden):
        world.deletes.delete(CAROL, first)
    assert world.deletes.delete(ALICE, first).outcome == "deleted"
    assert world.deletes.delete(ALICE, first).outcome == "already"
    (digest,) = world.repo.files
    assert world.repo.files[digest]["live_refs"] == 1 and ("acme", digest) not in world.repo.tenant_refs
    result = world.deletes.delete(ADMIN, second)
    assert result.outcome == "deleted" and result.tombstoned
    assert world.repo.files[digest]["state"] == "tombstoned" and world.repo.files[digest]["generation"] == 2
    assert world.repo.counter_totals()["deleted_uploads"] == 2


def test_a_concurrent_upload_between_read_and_write_is_followed(world: World) -> None:
    """The delete read the last reference; a new upload of the content lands before its transaction: the
    tombstone's condition fails, the delete reads again and only decrements."""
    first = world.upload(ALICE)
    world.repo.after_tenant_file = lambda: world.upload(CAROL) and None
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "deleted" and not result.tombstoned and result.attempts == 2
    (file,) = world.repo.files.values()
    assert file["live_refs"] == 1 and file["state"] == "live"
    assert world.repo.tenant_refs[("acme", file["hash"])]["upload_count"] == 1


def test_a_cancelled_upload_s_object_is_deleted_and_counted_nowhere(world: World) -> None:
    answer = world.uploads.create(UploadRequest("f.bin", len(DATA), "text/plain", None), ALICE)
    upload_id = answer.body["upload_id"]
    assert world.deletes.delete(ALICE, upload_id).outcome == "cancelled"
    world.objects.put("b", answer.body["key"], DATA)
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.REJECTED and result.deleted and result.detail["reason"] == "upload deleted"
    assert not world.repo.files and world.repo.counter_totals()["total_uploads"] == 0
    assert world.repo.uploads[upload_id]["status"] == "deleted"


def test_an_upload_of_tombstoned_content_resurrects_it_with_its_own_bytes(world: World) -> None:
    first = world.upload(ALICE)
    (digest,) = world.repo.files
    old_key = world.repo.files[digest]["s3_key"]
    assert world.deletes.delete(ALICE, first).tombstoned
    # the precheck never answers 409 for tombstoned content: the bytes must be uploaded
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), BOB)
    assert answer.status == 201
    sha = UploadRequest("h.bin", len(DATA), "text/plain", digest)
    assert world.uploads.create(sha, ALICE).status == 201
    world.objects.put("b", answer.body["key"], DATA)
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.STORED and result.detail["resurrected_generation"] == 3
    file = world.repo.files[digest]
    assert file["state"] == "live" and file["generation"] == 3 and file["live_refs"] == 1
    assert file["s3_key"] == answer.body["key"] and file["reap_key"] == old_key
    assert world.repo.uploads[answer.body["upload_id"]]["status"] == "stored"
    assert world.repo.tenant_refs[("globex", digest)]["upload_count"] == 1
    totals = world.repo.counter_totals()
    assert totals["total_files"] == 1 and totals["total_uploads"] == 2 and totals["duplicates_avoided"] == 0
    # a duplicate of the resurrected content is an ordinary duplicate again
    world.upload(ALICE)
    assert world.repo.files[digest]["live_refs"] == 2


def test_a_second_resurrection_waits_for_the_reaper_of_the_first(world: World) -> None:
    first = world.upload(ALICE)
    world.deletes.delete(ALICE, first)
    second = world.upload(ALICE)  # resurrected: the first generation's object awaits the reaper
    world.deletes.delete(ALICE, second)
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), ALICE)
    world.objects.put("b", answer.body["key"], DATA)
    with pytest.raises(ServiceUnavailable):
        world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert world.repo.uploads[answer.body["upload_id"]]["status"] == "pending"


def test_a_lost_answer_is_retried_and_changes_nothing_more(world: World) -> None:
    """The transaction commits but its answer is lost (a timeout): the retry reads the upload deleted and
    stops; the references were removed exactly once."""
    first, second = world.upload(ALICE), world.upload(CAROL)
    commit = world.repo.commit_delete

    def lost(*args: Any, **kwargs: Any) -> bool:
        commit(*args, **kwargs)
        raise ServiceUnavailable("the answer was lost")

    world.repo.commit_delete = lost  # type: ignore[method-assign]
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "already" and result.attempts == 2
    (file,) = world.repo.files.values()
    assert file["live_refs"] == 1 and world.repo.tenant_refs[("acme", file["hash"])]["upload_count"] == 1
    assert world.repo.counter_totals()["deleted_uploads"] == 1
    assert world.repo.uploads[second]["status"] != "deleted"


def test_a_throttled_transaction_is_retried(world: World) -> None:
    first = world.upload(ALICE)
    world.repo.faults.append(ServiceUnavailable("throttled"))
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "deleted" and result.tombstoned and result.attempts == 2
