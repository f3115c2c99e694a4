"""The ingest decision and the upload service on in-memory ports (tests/unit/fakes/): every outcome and
every retry path, in milliseconds. tests/integration runs the same flows on moto's DynamoDB and S3."""

from __future__ import annotations

import dataclasses

import pytest

from dfd.core.conflicts import CommitRefused
from dfd.core.errors import ServiceUnavailable, TransactionRetryable
from dfd.core.ids import TENANT_HEADER, hints_checksum, tenant_from_metadata, tenant_metadata, upload_id_from_key
from dfd.core.notifications import ObjectRef
from dfd.core.objects import ObjectInfo
from dfd.core.records import EventRecord, FileRecord, TenantRef, TenantUsage, UploadStatus
from dfd.core.retry import Backoff
from dfd.ingest.service import MAX_ATTEMPTS, IngestResult, Outcome
from dfd.uploads.service import UploadRequest
from tests.support import ALICE, BOB, CAROL, DAVE, ApiUser
from tests.unit.ingest_world import BUCKET, NOW, World, expect, sha


@pytest.fixture
def world() -> World:
    return World()


# ---------------------------------------------------------------------------------------------- the outcomes
@pytest.mark.parametrize("checksum", [False, True])
def test_new_content_is_stored(world: World, checksum: bool) -> None:
    data = b"new content\n" * 10
    key = world.upload(data, "report.txt", checksum=checksum)
    result = world.ingest(key)
    assert result.outcome == Outcome.STORED and not result.deleted and result.attempts == 1
    assert result.hash == sha(data) and result.size == len(data)
    assert result.hashed_bytes == (0 if checksum else len(data))  # a stored checksum spares the read
    assert hints_checksum(result.upload_id) is checksum
    file = world.repo.files[sha(data)]
    assert file["s3_key"] == key and file["filename"] == "report.txt" and file["upload_count"] == 1
    upload = world.repo.uploads[upload_id_from_key("uploads/", key) or ""]
    assert upload["status"] == "stored" and upload["hash"] == sha(data) and "pending_shard" not in upload
    assert (world.repo.get_event(result.event_key or "") or EventRecord("")).outcome == "stored"
    assert world.totals() == {
        "total_files": 1,
        "total_bytes_stored": len(data),
        "total_uploads": 1,
        "duplicates_avoided": 0,
        "total_s3_size_saved": 0,
        "deleted_uploads": 0,
    }
    assert world.objects.streams == (0 if checksum else 1)
    world.assert_invariants()


def test_known_content_is_a_duplicate_and_its_bytes_are_deleted(world: World) -> None:
    data = b"twice\n" * 20
    first = world.upload(data, "one.txt")
    second = world.upload(data, "two.txt")
    assert world.ingest(first).outcome == Outcome.STORED
    result = world.ingest(second)
    assert result.outcome == Outcome.DUPLICATE and result.deleted and result.bytes_saved == len(data)
    assert (BUCKET, second) not in world.objects.objects and (BUCKET, first) in world.objects.objects
    assert world.repo.files[sha(data)]["upload_count"] == 2
    upload = world.repo.uploads[result.upload_id or ""]
    assert upload["status"] == "duplicate" and upload["filename"] == "two.txt"
    totals = world.totals()
    assert totals["total_files"] == 1 and totals["duplicates_avoided"] == 1
    assert totals["total_s3_size_saved"] == len(data) and totals["total_uploads"] == 2
    world.assert_invariants()


def test_a_redelivered_event_is_a_replay_that_changes_nothing(world: World) -> None:
    key = world.upload(b"once")
    assert world.ingest(key).outcome == Outcome.STORED
    before = (dict(world.totals()), {k: dict(v) for k, v in world.repo.files.items()})
    result = world.ingest(key)
    assert result.outcome == Outcome.REPLAY and result.detail["recorded_outcome"] == "stored"
    assert not result.deleted and (BUCKET, key) in world.objects.objects
    assert (world.totals(), world.repo.files) == before


def test_replay_of_a_duplicate_finishes_its_delete(world: World) -> None:
    """The function died between the commit and the delete: the redelivery deletes, counts nothing."""
    data = b"crashy" * 10
    world.ingest(world.upload(data))
    second = world.upload(data)

    class Crash(Exception):
        pass

    def crash(result: IngestResult) -> None:
        raise Crash

    with pytest.raises(Crash):
        world.ingest(second, after_commit=crash)
    assert (BUCKET, second) in world.objects.objects
    counted = world.totals()
    result = world.ingest(second)
    assert result.outcome == Outcome.REPLAY and result.detail["recorded_outcome"] == "duplicate"
    assert result.deleted and (BUCKET, second) not in world.objects.objects
    assert world.totals() == counted
    world.assert_invariants()


def test_the_stored_copy_itself_is_canonical_once_its_event_expired(world: World) -> None:
    # an object put straight into the bucket: its event record is an item of its own, which expires (an upload's
    # is carried by the upload item, which does not)
    key = "uploads/direct/canonical.bin"
    world.objects.put(BUCKET, key, b"canonical")
    event_key = world.ingest(key).event_key or ""
    del world.repo.events[event_key]  # expired (TTL)
    counted = world.totals()
    result = world.ingest(key)
    assert result.outcome == Outcome.CANONICAL and not result.deleted
    assert (BUCKET, key) in world.objects.objects and world.totals() == counted
    assert world.repo.events[event_key]["outcome"] == "stored"  # recorded again: sweeps stop re-driving it
    world.assert_invariants()


@pytest.mark.parametrize(
    ("bucket", "key", "reason"),
    [
        ("other", "uploads/x", "other bucket"),
        (BUCKET, "elsewhere/x", "outside the upload prefix"),
        (BUCKET, "uploads/folder/", "outside the upload prefix"),
    ],
)
def test_objects_that_are_not_ours_are_ignored(world: World, bucket: str, key: str, reason: str) -> None:
    world.objects.put(bucket, key, b"not ours")
    result = world.ingestor().ingest(ObjectRef(bucket, key))
    assert result.outcome == Outcome.IGNORED and result.detail["reason"] == reason
    assert world.repo.transactions == 0 and not world.repo.events


def test_a_missing_object_is_gone(world: World) -> None:
    result = world.ingest("uploads/" + "0" * 32)
    assert result.outcome == Outcome.GONE and world.repo.transactions == 0


def test_an_object_deleted_between_head_and_get_is_gone(world: World) -> None:
    key = world.upload(b"vanishing", checksum=True)
    world.objects.objects[(BUCKET, key)].checksum_sha256 = None  # the HEAD finds no stored checksum: GET follows
    world.objects.before_stream = lambda info: world.objects.objects.pop((info.bucket, info.key))
    result = world.ingest(key)
    assert result.outcome == Outcome.GONE and world.repo.transactions == 0


def test_an_object_overwritten_while_read_is_superseded(world: World) -> None:
    key = world.upload(b"old bytes", checksum=True)
    world.objects.objects[(BUCKET, key)].checksum_sha256 = None
    world.objects.before_stream = lambda info: world.objects.put(info.bucket, info.key, b"newer bytes")
    result = world.ingest(key)
    assert result.outcome == Outcome.SUPERSEDED and world.repo.transactions == 0
    assert not world.repo.events and (BUCKET, key) in world.objects.objects


def test_a_short_read_is_superseded(world: World) -> None:
    key = world.upload(b"0123456789", checksum=True)
    world.objects.objects[(BUCKET, key)].checksum_sha256 = None

    def truncate(info: ObjectInfo) -> None:  # same ETag, fewer bytes than the HEAD said
        world.objects.objects[(info.bucket, info.key)].data = b"01234"

    world.objects.before_stream = truncate
    result = world.ingest(key)
    assert result.outcome == Outcome.SUPERSEDED and world.repo.transactions == 0


def test_a_second_put_at_a_processed_upload_key_is_rejected(world: World) -> None:
    """The presigned URL used again after the duplicate's bytes were deleted: deleted, counted rejected only."""
    data = b"dup" * 10
    world.ingest(world.upload(data))
    second = world.upload(data)
    assert world.ingest(second).outcome == Outcome.DUPLICATE
    counted = world.totals()
    world.objects.put(BUCKET, second, b"something else entirely")
    result = world.ingest(second)
    assert result.outcome == Outcome.REJECTED and result.deleted
    assert (BUCKET, second) not in world.objects.objects and world.totals() == counted
    assert world.counted("rejected_uploads") == 1
    assert (world.repo.get_event(result.event_key or "") or EventRecord("")).outcome == "rejected"
    assert world.repo.uploads[result.upload_id or ""]["status"] == "duplicate"
    replay = world.ingest(second)  # gone now
    assert replay.outcome == Outcome.GONE
    world.assert_invariants()


def test_a_rejected_version_replayed_before_its_delete_is_counted_once(world: World) -> None:
    data = b"dup" * 10
    world.ingest(world.upload(data))
    second = world.upload(data)
    assert world.ingest(second).outcome == Outcome.DUPLICATE
    world.objects.put(BUCKET, second, b"something else entirely")
    delete = world.objects.delete
    world.objects.delete = lambda *args: False  # type: ignore[method-assign,assignment]  # lost before its delete
    assert world.ingest(second).outcome == Outcome.REJECTED and (BUCKET, second) in world.objects.objects
    world.objects.delete = delete  # type: ignore[method-assign]
    replay = world.ingest(second)  # the redelivery finds the record and deletes the version
    assert (BUCKET, second) not in world.objects.objects and replay.outcome in (Outcome.REJECTED, Outcome.REPLAY)
    assert world.counted("rejected_uploads") == 1
    world.assert_invariants()


def test_a_stored_object_overwritten_in_place_is_a_conflict_never_deleted(world: World) -> None:
    key = world.upload(b"original")
    assert world.ingest(key).outcome == Outcome.STORED
    counted = world.totals()
    world.objects.put(BUCKET, key, b"overwritten by a direct put")
    result = world.ingest(key)
    # the key's claim outranks the upload's (also failed) condition
    assert result.outcome == Outcome.CONFLICT and result.detail["stored_hash"] == sha(b"original")
    assert not result.deleted and (BUCKET, key) in world.objects.objects and world.totals() == counted
    assert (world.repo.get_event(result.event_key or "") or EventRecord("")).outcome == "conflict"
    assert world.ingest(key).outcome == Outcome.REPLAY  # operators are told once


def test_a_duplicate_at_a_claimed_key_is_a_conflict(world: World) -> None:
    """Content A stored at k1, content B at k2; k2 overwritten with A: never delete k2 (B's only copy)."""
    first = world.upload(b"content A")
    second = world.upload(b"content B")
    world.ingest(first)
    world.ingest(second)
    world.objects.put(BUCKET, second, b"content A")
    result = world.ingest(second)
    assert result.outcome == Outcome.CONFLICT and result.detail["stored_hash"] == sha(b"content B")
    assert (BUCKET, second) in world.objects.objects and world.repo.files[sha(b"content A")]["upload_count"] == 1


# ---------------------------------------------------------------------------------------------- retry paths
def test_a_lost_race_is_redone_as_a_duplicate(world: World) -> None:
    data = b"racy" * 10
    winner, loser = world.upload(data), world.upload(data)
    world.repo.after_state = lambda: expect(world.ingest(winner), Outcome.STORED)
    result = world.ingest(loser)
    assert result.outcome == Outcome.DUPLICATE and result.attempts == 2 and result.deleted
    assert world.totals()["total_files"] == 1 and world.totals()["duplicates_avoided"] == 1
    world.assert_invariants()


def test_a_concurrent_delivery_of_the_same_event_counts_once(world: World) -> None:
    key = world.upload(b"twice delivered")
    world.repo.after_state = lambda: expect(world.ingest(key), Outcome.STORED)
    result = world.ingest(key)
    assert result.outcome == Outcome.REPLAY and result.detail["recorded_outcome"] == "stored"
    assert world.totals()["total_uploads"] == 1
    world.assert_invariants()


def test_a_file_that_vanished_before_the_duplicate_commit_is_stored_anew(world: World) -> None:
    data = b"short-lived" * 5
    first, second = world.upload(data), world.upload(data)
    world.ingest(first)

    def record_deleted() -> None:  # an operator removed the record (and its bytes) meanwhile
        stored = world.repo.files.pop(sha(data))
        del world.repo.claims[(BUCKET, stored["s3_key"])]
        world.objects.objects.pop((BUCKET, stored["s3_key"]))
        world.repo.counters.clear()
        world.repo.tenant_refs.clear()  # and every tenant's reference to it, and its uploads
        world.repo.uploads[upload_id_from_key("uploads/", first) or ""]["status"] = "deleted"

    world.repo.after_state = record_deleted
    result = world.ingest(second)
    assert result.outcome == Outcome.STORED and result.attempts == 2 and not result.deleted
    assert world.repo.files[sha(data)]["s3_key"] == second and (BUCKET, second) in world.objects.objects
    world.assert_invariants()


def test_a_file_record_that_turned_out_to_be_this_object_is_canonical(world: World) -> None:
    data = b"moved" * 5
    first, second = world.upload(data), world.upload(data)
    world.ingest(first)

    def record_now_names_second() -> None:
        world.repo.files[sha(data)]["s3_key"] = second

    world.repo.after_state = record_now_names_second
    result = world.ingest(second)
    assert result.outcome == Outcome.CANONICAL and result.attempts == 2 and not result.deleted
    assert (BUCKET, second) in world.objects.objects


@pytest.mark.parametrize(
    "fault",
    [
        TransactionRetryable("cancelled: ['TransactionConflict']"),
        CommitRefused(None, "cancelled for no known condition"),
    ],
)
def test_conflicts_back_off_then_commit(world: World, fault: Exception) -> None:
    key = world.upload(b"retried")
    world.repo.faults = [fault, fault]
    result = world.ingest(key)
    assert result.outcome == Outcome.STORED and result.attempts == 3
    assert len(world.sleeps) == 2
    for attempt, slept in enumerate(world.sleeps, start=1):  # exponential, jittered by 0.5 to 1.5
        assert 0.02 * 2**attempt * 0.5 <= slept <= 0.02 * 2**attempt * 1.5
    assert world.totals()["total_uploads"] == 1
    world.assert_invariants()


@pytest.mark.parametrize("fault", [TransactionRetryable("conflict"), CommitRefused(None, "cancelled")])
def test_exhausted_attempts_raise_service_unavailable(world: World, fault: Exception) -> None:
    key = world.upload(b"never commits")
    world.repo.faults = [fault] * MAX_ATTEMPTS
    with pytest.raises(ServiceUnavailable):
        world.ingest(key)
    assert world.repo.transactions == MAX_ATTEMPTS and world.repo.committed == 0
    assert len(world.sleeps) == MAX_ATTEMPTS - 1  # no pause after the last attempt
    assert max(world.sleeps) <= Backoff.LONGEST
    assert world.ingest(key).outcome == Outcome.STORED  # the redelivery commits


def test_what_botocore_gave_up_on_is_not_retried(world: World) -> None:
    """Throttling and transient errors are botocore's to retry (dfd.core.retry): the ServiceUnavailable it leaves
    fails the record at once (its queue delivers it again), without a second layer of attempts."""
    key = world.upload(b"throttled")
    world.repo.faults = [ServiceUnavailable("throttled")]
    with pytest.raises(ServiceUnavailable):
        world.ingest(key)
    assert world.repo.transactions == 1 and world.sleeps == []
    assert world.ingest(key).outcome == Outcome.STORED


# ---------------------------------------------------------------------------------------------- uploads
def test_an_upload_is_issued_as_a_presigned_put(world: World) -> None:
    data = b"to upload"
    answer = world.service().create(UploadRequest("a.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 201
    body = answer.body
    assert body["method"] == "PUT" and body["bucket"] == BUCKET and body["key"] == "uploads/" + body["upload_id"]
    assert body["expires_in"] == 900 and body["expires_at"] == "2026-03-01T12:15:00Z"
    assert body["headers"]["x-amz-checksum-sha256"] and hints_checksum(body["upload_id"])
    record = world.repo.uploads[body["upload_id"]]
    assert record["status"] == "pending" and record["sha256"] == sha(data) and record["pending_shard"]
    assert record["created_at"] == "2026-03-01T12:00:00Z" and record["expires_at"] == body["expires_at"]
    assert world.repo.transactions == 0 and world.totals()["total_uploads"] == 0


def test_known_content_is_answered_409_and_counted_with_the_stored_size(world: World) -> None:
    data = b"already here" * 3
    world.ingest(world.upload(data))
    answer = world.service().create(UploadRequest("b.txt", 999, "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 409 and answer.body["duplicate"] is True
    assert answer.body["file"]["upload_count"] == 2 and world.repo.files[sha(data)]["upload_count"] == 2
    totals = world.totals()
    assert totals["duplicates_avoided"] == 1 and totals["total_s3_size_saved"] == len(data)  # stored, not 999
    assert totals["total_uploads"] == 2 and len(world.objects.presigned) == 1  # only the first upload's
    world.assert_invariants()


def test_a_precheck_whose_record_vanished_issues_an_upload(world: World) -> None:
    data = b"about to vanish"
    world.repo.files[sha(data)] = {"hash": sha(data), "size": len(data), "s3_key": "uploads/x", "upload_count": 1}
    world.repo.files[sha(data)].update(live_refs=1)
    world.repo.tenant_refs[("acme", sha(data))] = {"tenant": "acme", "hash": sha(data), "upload_count": 1}
    # deleted between the read and the write
    world.repo.after_tenant_file = lambda: world.repo.files.pop(sha(data), None)
    answer = world.service().create(UploadRequest("c.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 201 and answer.body["upload_id"] in world.repo.uploads
    assert world.repo.transactions == 1 and world.repo.committed == 0 and world.totals()["duplicates_avoided"] == 0


@pytest.mark.parametrize("when", ["before the read", "between the read and the write"])
def test_a_precheck_of_lost_content_issues_an_upload(world: World, when: str) -> None:
    """A content the reconcile marked lost has no copy: the caller must upload it again (no 409, nothing counted)."""
    data = b"lost content"
    world.repo.files[sha(data)] = {"hash": sha(data), "size": len(data), "s3_key": "uploads/z", "upload_count": 1}
    world.repo.tenant_refs[("acme", sha(data))] = {"tenant": "acme", "hash": sha(data), "upload_count": 1}

    def mark_lost() -> None:
        world.repo.files[sha(data)].update(state="lost", lost_at="2026-11-23T00:00:00Z")

    if when == "before the read":
        mark_lost()
    else:
        world.repo.after_tenant_file = mark_lost
    answer = world.service().create(UploadRequest("c.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 201 and answer.body["upload_id"] in world.repo.uploads
    assert world.totals()["duplicates_avoided"] == 0 and world.repo.files[sha(data)]["upload_count"] == 1


def test_a_precheck_looks_again_after_the_record_vanished(world: World) -> None:
    """Deleted between the read and the write, then stored again by another upload: the second look counts."""
    data = b"flapping"
    record = {"hash": sha(data), "size": len(data), "s3_key": "uploads/y", "upload_count": 1, "live_refs": 1}
    world.repo.files[sha(data)] = dict(record)
    world.repo.tenant_refs[("acme", sha(data))] = {"tenant": "acme", "hash": sha(data), "upload_count": 1}
    reads: list[str] = []
    real = world.repo.tenant_file

    def flapping(tenant: str, digest: str) -> tuple[FileRecord | None, TenantRef | None]:
        reads.append(digest)
        if len(reads) > 1:
            world.repo.files[digest] = dict(record)  # stored again
        found = real(tenant, digest)
        if len(reads) == 1:
            world.repo.files.pop(digest)  # ... and it is gone when the transaction runs
        return found

    world.repo.tenant_file = flapping  # type: ignore[method-assign]
    answer = world.service().create(UploadRequest("d.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 409 and len(reads) == 2
    assert world.repo.transactions == 2 and world.repo.committed == 1 and world.totals()["duplicates_avoided"] == 1


# ---------------------------------------------------------------------------------------------- the tenant hint
@pytest.mark.parametrize("tenant", ["acme", "user:00000000-0000-4000-8000-00000000da7e", "équipe 東京", "50%/x"])
def test_the_tenant_hint_is_header_safe_and_round_trips(tenant: str) -> None:
    (value,) = tenant_metadata(tenant).values()
    assert value.isascii() and value.isprintable() and " " not in value
    assert tenant_from_metadata(tenant_metadata(tenant)) == tenant
    assert tenant_from_metadata(None) is None and tenant_from_metadata({"dfd-tenant": ""}) is None
    assert tenant_from_metadata({"dfd-tenant": "%ff"}) is None  # not UTF-8: no hint


def test_the_presigned_put_signs_the_uploaders_tenant(world: World) -> None:
    answer = world.service().create(UploadRequest("a.txt", 3, "text/plain", None), DAVE.caller)
    assert answer.body["headers"][TENANT_HEADER] == "user:" + DAVE.sub
    assert world.objects.presigned[-1]["metadata"] == tenant_metadata("user:" + DAVE.sub)


@pytest.mark.parametrize("hint", [True, False])
@pytest.mark.parametrize(("second_user", "status"), [(CAROL, "duplicate"), (BOB, "stored")])
def test_the_hint_tells_the_commit_whether_the_tenant_holds_the_content(
    world: World, hint: bool, second_user: ApiUser, status: str
) -> None:
    """With the hint, one transaction however the tenants relate; without it, a cross-tenant duplicate is
    assumed held and corrected by a cancelled transaction. Same result either way."""
    data = b"hinted" * 30
    expect(world.ingest(world.upload(data, user=ALICE, hint=hint)), Outcome.STORED)
    assert world.repo.state_reads[-1] == ("acme" if hint else None)
    before = world.repo.transactions
    result = world.ingest(world.upload(data, "second.txt", user=second_user, hint=hint))
    assert result.outcome == Outcome.DUPLICATE and result.deleted
    assert result.detail["upload_status"] == status
    assert world.repo.transactions - before == (2 if status == "stored" and not hint else 1)
    world.assert_invariants()


def test_a_wrong_hint_costs_a_retry_never_a_wrong_result(world: World) -> None:
    data = b"lying metadata" * 9
    expect(world.ingest(world.upload(data, user=ALICE)), Outcome.STORED)
    key = world.upload(data, user=BOB, hint=False)
    world.objects.objects[(BUCKET, key)].metadata = tenant_metadata("acme")  # claims to be acme's
    result = world.ingest(key)
    assert result.outcome == Outcome.DUPLICATE and result.detail == {"tenant": "globex", "upload_status": "stored"}
    assert ("globex", sha(data)) in world.repo.tenant_refs and world.repo.tenant_refs[("acme", sha(data))][
        "upload_count"
    ] == 1
    world.assert_invariants()


# ---------------------------------------------------------------------------------------------- the last copy
def test_a_new_upload_of_content_marked_lost_becomes_its_stored_copy(world: World) -> None:
    """The reconcile marked the content lost: its next upload is adopted without asking S3 and clears the mark."""
    data = b"marked lost" * 20
    first = world.upload(data, user=ALICE)
    expect(world.ingest(first), Outcome.STORED)
    del world.objects.objects[(BUCKET, first)]
    world.repo.files[sha(data)].update(state="lost", lost_at="2026-11-23T00:00:00Z")
    second = world.upload(data, "again.txt", user=CAROL)
    result = world.ingest(second)
    assert result.outcome == Outcome.DUPLICATE and not result.deleted and result.detail["adopted_from"] == first
    assert world.objects.heads == []  # a lost record names no object: no HeadObject
    file = world.repo.files[sha(data)]
    assert file["s3_key"] == second and "state" not in file and "lost_at" not in file
    world.assert_invariants()


def test_a_duplicate_of_lost_content_becomes_its_stored_copy(world: World) -> None:
    """The stored object was deleted out of band: the next upload of the content is kept as the stored copy."""
    data = b"precious" * 20
    first = world.upload(data, user=ALICE)
    expect(world.ingest(first), Outcome.STORED)
    del world.objects.objects[(BUCKET, first)]
    second = world.upload(data, "again.txt", user=CAROL)
    counted = world.totals()
    result = world.ingest(second)
    assert result.outcome == Outcome.DUPLICATE and not result.deleted
    assert result.detail["adopted_from"] == first and result.detail["upload_status"] == "stored"
    assert (BUCKET, second) in world.objects.objects and world.objects.heads == [(BUCKET, first)]
    file = world.repo.files[sha(data)]
    assert file["s3_key"] == second and file["etag"] == world.objects.objects[(BUCKET, second)].etag
    assert (BUCKET, first) not in world.repo.claims and world.repo.claims[(BUCKET, second)]["hash"] == sha(data)
    assert world.repo.uploads[upload_id_from_key("uploads/", second) or ""]["status"] == "stored"
    assert world.totals()["duplicates_avoided"] == counted["duplicates_avoided"] + 1
    world.assert_invariants()
    # a late replay of its event deletes nothing: it is the stored copy now
    replay = world.ingest(second)
    assert replay.outcome == Outcome.REPLAY and not replay.deleted and (BUCKET, second) in world.objects.objects
    # and the next duplicate is deleted as usual, after one HeadObject of the new stored copy
    third = world.upload(data, user=BOB)
    assert world.ingest(third).deleted and world.objects.heads[-1] == (BUCKET, second)
    world.assert_invariants()


def test_a_replayed_duplicate_confirms_the_stored_copy_before_deleting(world: World) -> None:
    data = b"crash then loss" * 5
    first = world.upload(data)
    world.ingest(first)
    second = world.upload(data)

    def crash_and_lose(result: IngestResult) -> None:
        del world.objects.objects[(BUCKET, first)]
        raise RuntimeError("crash after the commit")

    with pytest.raises(RuntimeError):
        world.ingest(second, after_commit=crash_and_lose)
    result = world.ingest(second)
    assert result.outcome == Outcome.REPLAY and not result.deleted and result.detail["adopted_from"] == first
    assert world.repo.files[sha(data)]["s3_key"] == second
    world.assert_invariants()


def test_a_stored_copy_adopted_concurrently_is_followed(world: World) -> None:
    """Two duplicates find the stored copy lost: one adopts; the other sees the record moved and deletes."""
    data = b"two survivors" * 7
    first = world.upload(data)
    world.ingest(first)
    second, third = world.upload(data), world.upload(data)
    del world.objects.objects[(BUCKET, first)]
    original_exists = world.objects.exists

    def adopt_in_between(bucket: str, key: str, etag: str | None) -> bool:
        world.objects.exists = original_exists  # type: ignore[method-assign]
        expect(world.ingest(third), Outcome.DUPLICATE)  # adopts the content first
        return original_exists(bucket, key, etag)

    world.objects.exists = adopt_in_between  # type: ignore[method-assign]
    result = world.ingest(second)
    assert result.outcome == Outcome.DUPLICATE and result.deleted and "adopted_from" not in result.detail
    assert world.repo.files[sha(data)]["s3_key"] == third and (BUCKET, second) not in world.objects.objects
    world.assert_invariants()


# ---------------------------------------------------------------------------------------------- expired events
def test_a_duplicate_whose_event_record_expired_is_a_replay(world: World) -> None:
    """The bytes outlived the Events items (30-day TTL): the upload item carries its event, which stays (replay)."""
    data = b"ttl" * 40
    world.ingest(world.upload(data))
    second = world.upload(data)
    with pytest.raises(RuntimeError):
        world.ingest(second, after_commit=lambda result: (_ for _ in ()).throw(RuntimeError("crash")))
    counted = world.totals()
    world.repo.events.clear()  # expired
    result = world.ingest(second)
    assert result.outcome == Outcome.REPLAY and result.detail["recorded_outcome"] == "duplicate" and result.deleted
    assert world.totals() == counted and world.repo.tenant_refs[("acme", sha(data))]["upload_count"] == 2
    world.assert_invariants()


# ---------------------------------------------------------------------------------------------- trusted checksums
@pytest.mark.parametrize("declared", [False, True])
def test_a_stored_checksum_the_upload_did_not_sign_is_not_trusted(world: World, declared: bool) -> None:
    """bob's object claims alice's content through a checksum nobody signed (an unsigned header, a trailer): the
    ingest hashes his bytes, so his upload is his junk — never alice's content."""
    alice_data = b"alice's secret report\n" * 20
    alice_key = world.upload(alice_data, checksum=True)
    expect(world.ingest(alice_key), Outcome.STORED)
    junk = b"bob's junk\n" * 7
    # declared: bob's URL signed the SHA-256 of his junk, yet S3 kept another; not declared: nothing was signed
    bob_key = world.upload(junk, checksum=declared, user=BOB)
    world.objects.objects[(BUCKET, bob_key)].checksum_sha256 = sha(alice_data)
    result = world.ingest(bob_key)
    expect(result, Outcome.STORED)
    assert result.hash == sha(junk) and result.hashed_bytes == len(junk)
    assert (
        world.repo.files[sha(alice_data)]["s3_key"] == alice_key
        and world.repo.files[sha(alice_data)]["upload_count"] == 1
    )
    assert world.repo.files[sha(junk)]["s3_key"] == bob_key
    world.assert_invariants()


def test_the_signed_checksum_spares_the_read(world: World) -> None:
    data = b"declared and verified\n" * 9
    key = world.upload(data, checksum=True)
    result = world.ingest(key)
    expect(result, Outcome.STORED)
    assert result.hashed_bytes == 0 and world.objects.streams == 0 and "checksum_untrusted" not in result.detail


def test_a_precheck_meeting_a_concurrent_transaction_pauses_and_looks_again(world: World) -> None:
    """A TransactionConflict on the precheck's commit is retried after dfd.core.retry's pause (it was a 503 before)."""
    data = b"contended precheck"
    world.repo.files[sha(data)] = {"hash": sha(data), "size": len(data), "s3_key": "uploads/w", "upload_count": 1}
    world.repo.files[sha(data)].update(live_refs=1)
    world.repo.tenant_refs[("acme", sha(data))] = {"tenant": "acme", "hash": sha(data), "upload_count": 1}
    world.repo.faults = [TransactionRetryable("cancelled: ['TransactionConflict']")]
    service = world.service()
    pauses: list[float] = []
    service._backoff = Backoff(pauses.append)
    answer = service.create(UploadRequest("c.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 409 and answer.body["duplicate"] is True
    assert world.repo.transactions == 2 and len(pauses) == 1 and 0 < pauses[0] <= Backoff.LONGEST
    assert world.totals()["duplicates_avoided"] == 1


# ---------------------------------------------------------------------------------------------- the quota
def test_an_expired_upload_ingested_late_is_held_to_its_tenant_s_quota() -> None:
    world = World(dataclasses.replace(World().settings, tenant_quota_bytes=100))
    usage = world.repo.tenant_usage
    late = world.upload(b"l" * 60, "late.txt")
    late_id = upload_id_from_key("uploads/", late) or ""
    # the reconcile expires it (its object not seen yet): its 60 bytes released, then taken by another upload
    assert world.repo.end_pending_upload(late_id, UploadStatus.EXPIRED, NOW, tenant=ALICE.caller.tenant, quota_bytes=60)
    other = world.upload(b"o" * 60, "other.txt")
    result = world.ingest(late)
    assert result.outcome == Outcome.REJECTED and result.detail["reason"] == "quota_exceeded" and result.deleted
    assert not world.objects.exists(BUCKET, late, None) and sha(b"l" * 60) not in world.repo.files
    assert world.repo.uploads[late_id]["status"] == "expired" and usage(ALICE.caller.tenant).used_bytes == 60
    assert world.counted("rejected_uploads") == 1
    assert world.ingest(late).outcome == Outcome.GONE  # a redelivery finds nothing left
    assert world.counted("rejected_uploads") == 1
    assert world.ingest(other).outcome == Outcome.STORED and usage(ALICE.caller.tenant).used_bytes == 60
    # an expired upload whose bytes fit is stored and counted
    fits = world.upload(b"f" * 30, "fits.txt")
    fits_id = upload_id_from_key("uploads/", fits) or ""
    assert world.repo.end_pending_upload(fits_id, UploadStatus.EXPIRED, NOW, tenant=ALICE.caller.tenant, quota_bytes=30)
    assert usage(ALICE.caller.tenant).used_bytes == 60
    assert world.ingest(fits).outcome == Outcome.STORED
    assert usage(ALICE.caller.tenant) == TenantUsage(stored_bytes=90, used_bytes=90)
