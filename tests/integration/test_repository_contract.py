"""The repository's contract (dfd.core.repository.Repository), one suite run against both implementations: the
in-memory FakeRepository the unit tests use (tests/unit/fakes.py) and the DynamoDB adapter, on moto and on AWS's
DynamoDB Local (the engine of make run and the e2e stacks). Every condition —
replays, races, quota refusals, delete and resurrection transitions, multipart records — must give the same
records and the same typed conflicts, carrying the same records, so the fake cannot drift from the adapter.

A lost response (the write applied, its answer lost, retried) only exists on the wire: tests/integration/
test_lost_responses.py proves the adapter's handling of it end to end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from dfd.adapters.dynamo import Repository as DynamoRepository
from dfd.core import clock
from dfd.core.config import Settings
from dfd.core.conflicts import (
    CommitRefused,
    DeleteRaced,
    EventRecorded,
    FileAppeared,
    FileChanged,
    FileVanished,
    KeyClaimed,
    LeaseLost,
    MultipartAttached,
    PendingReleased,
    QuotaRefused,
    ReapPending,
    ReferenceMissing,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.ids import event_key
from dfd.core.records import ContentState, TenantUsage, UploadRecord, UploadStatus
from dfd.core.repository import Repository
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.uploads.ports import NewMultipart, NewUpload, PrecheckDuplicate, UploadDeletion
from tests.unit.fakes import FakeRepository

BUCKET = "dfd-files-local"
QUOTA = 1000
PENDING_LIMIT = 3
DIGEST = "a" * 64
OTHER = "b" * 64


def _now() -> datetime:
    return datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(params=["fake", "dynamo", "dynamodb-local"])
def repo(request: pytest.FixtureRequest) -> Iterator[Repository]:
    if request.param == "fake":
        base = Settings.from_env()
        yield FakeRepository(_limits(base))
        return
    if request.param == "dynamodb-local":  # AWS's own emulator: the engine make run and the e2e stacks use
        client, settings = request.getfixturevalue("local_dynamodb")
        yield DynamoRepository(client, _limits(settings))
        return
    aws = request.getfixturevalue("aws")
    yield DynamoRepository(boto3.client("dynamodb"), _limits(aws.settings))


def _limits(settings: Settings) -> Settings:
    return dataclasses.replace(settings, tenant_quota_bytes=QUOTA, tenant_pending_limit=PENDING_LIMIT)


def new_upload(n: int, size: int = 100, tenant: str = "acme", owner: str = "alice") -> NewUpload:
    upload_id = f"{n:032x}"
    now = _now()
    return NewUpload(
        upload_id,
        f"f{n}.bin",
        size,
        "text/plain",
        None,
        f"uploads/{upload_id}",
        BUCKET,
        now + timedelta(hours=1),
        owner,
        tenant,
    )


def version(n: int, digest: str = DIGEST, size: int = 100, upload_id: str | None = None) -> ObjectVersion:
    # an object at an upload key has that upload's id (ingest: dfd.core.ids.upload_id_from_key); one with none was put
    # straight into the bucket, at another key
    key = f"uploads/{n:032x}" if upload_id is not None else f"uploads/direct/{n}.bin"
    return ObjectVersion(event_key(BUCKET, key, f"etag{n}"), BUCKET, key, f'"etag{n}"', size, digest, upload_id)


def registered(repo: Repository, n: int, size: int = 100, tenant: str = "acme") -> tuple[UploadRecord, ObjectVersion]:
    upload = new_upload(n, size, tenant)
    repo.register_upload(upload, _now())
    record = repo.get_upload(upload.upload_id)
    assert record is not None
    return record, version(n, size=size, upload_id=upload.upload_id)


def commit(repo: Repository, kind: str, v: ObjectVersion, share: TenantShare | None, shard: int = 0) -> None:
    call = repo.commit_stored if kind == "stored" else repo.commit_duplicate
    call(v, filename="f.bin", content_type="text/plain", counter_shard=shard, now=_now(), tenant=share)


def refused(kind: type[CommitRefused], call: Any) -> CommitRefused:
    with pytest.raises(CommitRefused) as raised:
        call()
    assert type(raised.value) is kind, f"{type(raised.value).__name__} raised, {kind.__name__} expected"
    return raised.value


# ---------------------------------------------------------------------------------------------- uploads
def test_a_registered_upload_is_pending_and_counted_against_its_tenant(repo: Repository) -> None:
    record, _ = registered(repo, 1, size=300)
    assert record.status == UploadStatus.PENDING and record.quota_bytes == 300
    assert (record.owner, record.tenant, record.filename, record.size) == ("alice", "acme", "f1.bin", 300)
    assert record.created_at == clock.iso(_now()) and not record.multipart
    assert repo.tenant_usage("acme") == TenantUsage(pending_count=1, pending_bytes=300, used_bytes=300)
    assert repo.tenant_usage("acme", consistent=False) == repo.tenant_usage("acme")  # GET /me's read
    assert repo.tenant_usage("other") == TenantUsage()


def test_quota_refusals_register_nothing(repo: Repository) -> None:
    registered(repo, 1, size=600)
    too_big = refused(QuotaRefused, lambda: repo.register_upload(new_upload(2, size=500), _now()))
    assert too_big.item == TenantUsage(pending_count=1, pending_bytes=600, used_bytes=600)
    assert repo.get_upload(new_upload(2).upload_id) is None
    over = refused(QuotaRefused, lambda: repo.register_upload(new_upload(3, size=QUOTA + 1, tenant="beta"), _now()))
    assert over.item in (None, TenantUsage())  # larger than the whole quota: refused before any write
    registered(repo, 4, size=10)
    registered(repo, 5, size=10)
    limit = refused(QuotaRefused, lambda: repo.register_upload(new_upload(6, size=10), _now()))
    assert limit.item is not None and limit.item.pending_count == PENDING_LIMIT
    assert repo.tenant_usage("acme").pending_count == PENDING_LIMIT


def test_multipart_records(repo: Repository) -> None:
    upload = new_upload(1, size=600)
    repo.register_multipart_upload(upload, NewMultipart("alice", "acme", 5 * 2**20, 2), _now())
    repo.attach_s3_upload(upload.upload_id, "s3-1", part_checksums=True)
    attached = refused(MultipartAttached, lambda: repo.attach_s3_upload(upload.upload_id, "s3-2", part_checksums=False))
    assert attached.item is not None and attached.item.s3_upload_id == "s3-1" and attached.item.part_checksums
    repo.mark_multipart_completed(upload.upload_id, _now())
    repo.mark_multipart_completed(upload.upload_id, _now() + timedelta(minutes=1))  # the first success is kept
    repo.mark_multipart_completed("f" * 32, _now())  # gone: nothing to note
    record = repo.get_upload(upload.upload_id)
    assert record is not None and record.multipart and (record.part_size, record.part_count) == (5 * 2**20, 2)
    assert record.completed_at == clock.iso(_now()) and record.status == UploadStatus.PENDING


def test_an_upload_ends_or_is_cancelled_once_releasing_its_quota_bytes(repo: Repository) -> None:
    first, _ = registered(repo, 1, size=100)
    second, _ = registered(repo, 2, size=200)
    assert not repo.end_pending_upload(first.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=99)
    assert repo.end_pending_upload(first.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=100)
    assert not repo.end_pending_upload(first.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=100)
    expired = repo.get_upload(first.upload_id)
    assert expired is not None and expired.status == UploadStatus.EXPIRED and expired.quota_bytes == 0
    assert repo.cancel_upload(first.upload_id, UploadStatus.EXPIRED, _now())
    assert not repo.cancel_upload(first.upload_id, UploadStatus.EXPIRED, _now())  # deleted already
    assert not repo.cancel_upload(second.upload_id, UploadStatus.FAILED, _now(), tenant="acme", quota_bytes=200)
    assert repo.cancel_upload(second.upload_id, UploadStatus.PENDING, _now(), tenant="acme", quota_bytes=200)
    cancelled = repo.get_upload(second.upload_id)
    assert cancelled is not None and cancelled.status == UploadStatus.DELETED
    assert cancelled.deleted_at == clock.iso(_now())
    assert repo.tenant_usage("acme") == TenantUsage()


# ---------------------------------------------------------------------------------------------- contents
def test_new_content_then_its_replay_and_the_race_it_loses(repo: Repository) -> None:
    record, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", held=False, counted=False, pending_bytes=100), shard=1)
    file = repo.get_file(DIGEST, consistent=True)
    assert file is not None and file.state == ContentState.LIVE and file.s3_key == v.key and file.etag == v.etag
    assert (file.upload_count, file.live_refs, file.generation, file.stores, file.saved_bytes) == (1, 1, 1, 1, 0)
    upload = repo.get_upload(record.upload_id)
    assert upload is not None and upload.status == UploadStatus.STORED and upload.hash == DIGEST
    assert upload.event_key == v.event_key and upload.quota_bytes == 0
    claim = repo.get_claim(BUCKET, v.key)
    assert claim is not None and claim.hash == DIGEST
    event = repo.get_event(v.event_key)
    assert event is not None and event.outcome == "stored" and event.upload_id == record.upload_id
    _, ref = repo.tenant_file("acme", DIGEST)
    assert ref is not None and ref.holds and ref.upload_count == 1 and ref.size == 100
    assert repo.tenant_usage("acme") == TenantUsage(stored_bytes=100, used_bytes=100)
    totals = repo.counter_totals()
    assert (totals["total_files"], totals["total_uploads"], totals["total_bytes_stored"]) == (1, 1, 100)
    # the same version again: its event is recorded (whatever else the commit would change)
    replay = refused(EventRecorded, lambda: commit(repo, "stored", v, None))
    assert replay.item is not None and replay.item.event_key == v.event_key and replay.item.outcome == "stored"
    # another object of the same content, committed as new: the file appeared (lost race)
    other = version(2)
    appeared = refused(FileAppeared, lambda: commit(repo, "stored", other, None))
    assert appeared.item is not None and appeared.item.s3_key == v.key
    # a second object version at the processed upload's key: the upload is taken
    again = dataclasses.replace(v, event_key="ev#again", etag='"again"')
    taken = refused(KeyClaimed, lambda: commit(repo, "duplicate", again, None))
    assert taken.item is not None and taken.item.hash == DIGEST
    assert repo.counter_totals() == totals


def test_duplicates_and_their_conflicts(repo: Repository) -> None:
    vanished = refused(FileVanished, lambda: commit(repo, "duplicate", version(1), None))
    assert vanished.item is None
    stored = version(1)
    commit(repo, "stored", stored, None)
    # the stored object's own key again (another version of it): its claim answers first
    claimed = refused(
        KeyClaimed, lambda: commit(repo, "duplicate", dataclasses.replace(stored, event_key="ev#x"), None)
    )
    assert claimed.item is not None and claimed.item.hash == DIGEST
    record, dup = registered(repo, 2)
    wrong = refused(TenantRefChanged, lambda: commit(repo, "duplicate", dup, TenantShare("acme", True, True, 100)))
    assert wrong.item is None  # assumed held, absent
    commit(repo, "duplicate", dup, TenantShare("acme", False, False, 100))
    upload = repo.get_upload(record.upload_id)
    assert upload is not None and upload.status == UploadStatus.STORED  # new for its tenant
    _, third = registered(repo, 3)
    absent = refused(TenantRefChanged, lambda: commit(repo, "duplicate", third, TenantShare("acme", False, False, 100)))
    assert absent.item is not None and absent.item.upload_count == 1  # the reference exists: held
    commit(repo, "duplicate", third, TenantShare("acme", True, True, 100))
    upload = repo.get_upload(third.upload_id or "")
    assert upload is not None and upload.status == UploadStatus.DUPLICATE
    file = repo.get_file(DIGEST, consistent=True)
    assert file is not None and (file.upload_count, file.live_refs, file.saved_bytes) == (3, 3, 200)
    _, ref = repo.tenant_file("acme", DIGEST)
    assert ref is not None and ref.upload_count == 2 and ref.filename == "f.bin"
    assert repo.tenant_usage("acme") == TenantUsage(stored_bytes=100, used_bytes=100)
    totals = repo.counter_totals()
    assert (totals["duplicates_avoided"], totals["total_s3_size_saved"], totals["total_uploads"]) == (2, 200, 3)


def test_an_upload_processed_or_released_meanwhile(repo: Repository) -> None:
    commit(repo, "stored", version(9, digest=OTHER), None)
    _, v = registered(repo, 1)
    first = dataclasses.replace(v, hash=OTHER)
    commit(repo, "duplicate", first, TenantShare("acme", False, False, 100))
    second = dataclasses.replace(v, event_key="ev#second", etag='"second"', key="uploads/elsewhere")
    taken = refused(UploadTaken, lambda: commit(repo, "stored", second, TenantShare("acme", False, False, 0)))
    assert taken.item is not None and taken.item.event_key == first.event_key
    late, late_v = registered(repo, 2)
    assert repo.end_pending_upload(late.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=100)
    released = refused(PendingReleased, lambda: commit(repo, "stored", late_v, TenantShare("acme", False, False, 100)))
    assert released.item is not None and released.item.status == UploadStatus.EXPIRED
    commit(repo, "stored", late_v, TenantShare("acme", False, False, 0))
    cancelled, cancelled_v = registered(repo, 3)
    assert repo.cancel_upload(cancelled.upload_id, UploadStatus.PENDING, _now(), tenant="acme", quota_bytes=100)
    deleted = refused(
        UploadTaken, lambda: commit(repo, "stored", dataclasses.replace(cancelled_v, hash="c" * 64), None)
    )
    assert deleted.item is not None and deleted.item.status == UploadStatus.DELETED


def test_record_event_once(repo: Repository) -> None:
    v = version(1)
    assert repo.record_event(v, "conflict", _now())
    # another delivery (a record of another second: an identical one is taken for our own lost response)
    assert not repo.record_event(v, "conflict", _now() + timedelta(seconds=1))
    event = repo.get_event(v.event_key)
    assert event is not None and event.outcome == "conflict" and event.key == v.key


# ---------------------------------------------------------------------------------------------- deletes
def test_deletes_tombstone_then_resurrection(repo: Repository) -> None:
    first, v1 = registered(repo, 1)
    commit(repo, "stored", v1, TenantShare("acme", False, False, 100))
    second, v2 = registered(repo, 2)
    commit(repo, "duplicate", v2, TenantShare("acme", True, True, 100))
    raced = refused(
        DeleteRaced,
        lambda: repo.commit_delete(
            UploadDeletion(first.upload_id, UploadStatus.DUPLICATE, DIGEST, "acme"), counter_shard=0, now=_now()
        ),
    )
    assert raced.item is None
    for record in (first, second):
        deletion = UploadDeletion(
            record.upload_id, UploadStatus.STORED if record is first else UploadStatus.DUPLICATE, DIGEST, "acme"
        )
        repo.commit_delete(deletion, counter_shard=0, now=_now())
    file = repo.get_file(DIGEST, consistent=True)
    assert file is not None and file.tombstoned and file.state == ContentState.TOMBSTONED
    assert file.reap_after == clock.iso(_now() + timedelta(seconds=repo_settings(repo).delete_grace_seconds))
    assert file.tombstone_shard is not None
    _, ref = repo.tenant_file("acme", DIGEST)
    assert ref is not None and not ref.holds and ref.reap_shard is not None and ref.reap_after == clock.iso(_now())
    assert repo.counter_totals()["deleted_uploads"] == 2
    assert repo.tenant_usage("acme").stored_bytes == 100  # a reference at 0 is counted until the reaper
    deleted = repo.get_upload(first.upload_id)
    assert deleted is not None and deleted.status == UploadStatus.DELETED and deleted.deleted_at == clock.iso(_now())
    missing = refused(
        ReferenceMissing,
        lambda: repo.commit_delete(
            UploadDeletion(second.upload_id, UploadStatus.DELETED, DIGEST, None), counter_shard=0, now=_now()
        ),
    )
    assert missing.item is None
    # precheck of tombstoned content: no new reference
    precheck = PrecheckDuplicate("e" * 32, "alice", "acme", DIGEST, "p.bin", 100, "text/plain")
    refused(FileVanished, lambda: repo.commit_precheck_duplicate(precheck, counter_shard=0, now=_now()))
    # resurrection: a new generation whose copy is this object; the old one goes to the reaper
    third, v3 = registered(repo, 3)
    resurrect = repo.commit_resurrect
    stale = dataclasses.replace(file, generation=file.generation + 5)
    refused(
        FileChanged,
        lambda: resurrect(v3, stale, filename="f", content_type="t", counter_shard=0, now=_now(), tenant=None),
    )
    share = TenantShare("acme", held=False, counted=True, pending_bytes=100)
    resurrect(v3, file, filename="f", content_type="t", counter_shard=0, now=_now(), tenant=share)
    live = repo.get_file(DIGEST, consistent=True)
    assert live is not None and live.state == ContentState.LIVE and (live.generation, live.stores) == (2, 2)
    assert (live.s3_key, live.reap_key, live.live_refs, live.upload_count) == (v3.key, v1.key, 1, 3)
    upload = repo.get_upload(third.upload_id)
    assert upload is not None and upload.status == UploadStatus.STORED
    assert repo.tenant_usage("acme") == TenantUsage(stored_bytes=100, used_bytes=100)
    # the previous generation still awaits the reaper: a second resurrection must wait
    repo.commit_delete(
        UploadDeletion(third.upload_id, UploadStatus.STORED, DIGEST, "acme"), counter_shard=0, now=_now()
    )
    again = repo.get_file(DIGEST, consistent=True)
    assert again is not None and again.tombstoned
    _, v4 = registered(repo, 4)
    pending = refused(
        ReapPending,
        lambda: resurrect(v4, again, filename="f", content_type="t", counter_shard=0, now=_now(), tenant=None),
    )
    assert pending.item is not None and pending.item.reap_key == v1.key


def repo_settings(repo: Repository) -> Settings:
    settings = getattr(repo, "settings", None) or repo._s
    assert isinstance(settings, Settings)
    return settings


# ---------------------------------------------------------------------------------------------- precheck, adoption
def test_precheck_duplicate(repo: Repository) -> None:
    _, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", False, False, 100))
    absent = PrecheckDuplicate("d" * 32, "bob", "beta", DIGEST, "p.bin", 100, "text/plain")
    gone = refused(TenantRefChanged, lambda: repo.commit_precheck_duplicate(absent, counter_shard=0, now=_now()))
    assert gone.item is None
    precheck = PrecheckDuplicate("e" * 32, "carol", "acme", DIGEST, "p.bin", 100, "text/plain")
    repo.commit_precheck_duplicate(precheck, counter_shard=0, now=_now())
    upload = repo.get_upload(precheck.upload_id)
    assert upload is not None and upload.status == UploadStatus.DUPLICATE and upload.owner == "carol"
    assert upload.processed_at == clock.iso(_now()) and upload.hash == DIGEST
    file, ref = repo.tenant_file("acme", DIGEST)
    assert file is not None and (file.upload_count, file.live_refs, file.saved_bytes) == (2, 2, 100)
    assert ref is not None and ref.upload_count == 2 and ref.first_upload_id == v.upload_id
    assert repo.tenant_file("acme", DIGEST, consistent=False) == (file, ref)  # an LFS pull's first read
    assert repo.counter_totals()["duplicates_avoided"] == 1


def test_adopting_a_copy_of_lost_content(repo: Repository) -> None:
    stored = version(1)
    commit(repo, "stored", stored, None)
    file = repo.get_file(DIGEST, consistent=True)
    assert file is not None
    record, dup = registered(repo, 2)
    commit(repo, "duplicate", dup, TenantShare("acme", False, False, 100))
    moved = dataclasses.replace(file, s3_key="uploads/else")
    changed = refused(FileChanged, lambda: repo.adopt_copy(dup, moved, _now()))
    assert changed.item is not None and changed.item.s3_key == stored.key
    repo.adopt_copy(dup, file, _now())
    adopted = repo.get_file(DIGEST, consistent=True)
    assert adopted is not None and (adopted.s3_key, adopted.etag) == (dup.key, dup.etag)
    assert repo.get_claim(BUCKET, stored.key) is None
    claim = repo.get_claim(BUCKET, dup.key)
    assert claim is not None and claim.hash == DIGEST
    upload = repo.get_upload(record.upload_id)
    assert upload is not None and upload.status == UploadStatus.STORED


# ---------------------------------------------------------------------------------------------- reads
def test_reads_and_pages(repo: Repository) -> None:
    for n, digest in enumerate((OTHER, DIGEST, "c" * 64), start=1):
        _, v = registered(repo, n)
        commit(repo, "stored", dataclasses.replace(v, hash=digest), TenantShare("acme", False, False, 100))
    state = repo.ingest_state(version(1, upload_id=f"{1:032x}").event_key, OTHER, f"{1:032x}", "acme")
    assert state.event is not None and state.file is not None and state.upload is not None
    assert state.tenant_ref is not None and state.tenant_ref.hash == OTHER
    bare = repo.ingest_state("ev#none", "d" * 64, None, "acme")
    assert (bare.event, bare.file, bare.upload, bare.tenant_ref) == (None, None, None, None)
    seen: list[str] = []
    start: dict[str, str] | None = None
    for _ in range(3):
        page, start = repo.scan_files(2, start)
        seen += [f.hash for f in page]
        if start is None:
            break
    assert sorted(seen) == [DIGEST, OTHER, "c" * 64] and start is None
    mine, start = repo.owner_uploads("alice", 2, None)
    assert len(mine) == 2 and start is not None
    rest, start = repo.owner_uploads("alice", 2, start)
    assert len(rest) == 1 and start is None
    assert {u.upload_id for u in mine + rest} == {f"{n:032x}" for n in (1, 2, 3)}


# ---------------------------------------------------------------------------------------------- the reconcile
def due(page: Any, repo: Repository, now: datetime, limit: int = 1) -> list[Any]:
    """Every item of a sparse index due by `now`, over all its shards, read `limit` at a time."""
    found: list[Any] = []
    for shard in range(repo_settings(repo).pending_shards):
        cursor = None
        while True:
            items, cursor = page(shard, now, limit, cursor)
            found += items
            if cursor is None:
                break
    return found


def test_pending_uploads_are_due_after_their_grace_and_settle_once(repo: Repository) -> None:
    first, _ = registered(repo, 1, size=100)
    second, _ = registered(repo, 2, size=200)
    grace = repo_settings(repo).reconcile_grace_seconds
    assert due(repo.due_uploads, repo, _now()) == [] or grace == 0
    later = _now() + timedelta(seconds=grace)
    assert sorted(u.upload_id for u in due(repo.due_uploads, repo, later)) == [first.upload_id, second.upload_id]
    assert (repo.count_redrive(first.upload_id, later), repo.count_redrive(first.upload_id, later)) == (1, 2)
    assert repo.give_up_upload(first, UploadStatus.FAILED, later, failure="never ingested")
    assert not repo.give_up_upload(first, UploadStatus.FAILED, later, failure="never ingested")  # once
    assert repo.count_redrive(first.upload_id, later) is None  # no longer pending
    failed = repo.get_upload(first.upload_id)
    assert failed is not None and (failed.status, failed.failure, failed.failed_at) == (
        UploadStatus.FAILED,
        "never ingested",
        clock.iso(later),
    )
    assert failed.redrives == 2 and failed.quota_bytes == 0
    assert repo.give_up_upload(second, UploadStatus.EXPIRED, later)
    expired = repo.get_upload(second.upload_id)
    assert expired is not None and expired.status == UploadStatus.EXPIRED and expired.expired_at == clock.iso(later)
    assert due(repo.due_uploads, repo, later) == []  # out of the index
    assert repo.tenant_usage("acme") == TenantUsage()  # their quota bytes released


def test_the_reaper_s_writes(repo: Repository) -> None:
    record, v1 = registered(repo, 1)
    commit(repo, "stored", v1, TenantShare("acme", False, False, 100))
    _, v2 = registered(repo, 2)
    commit(repo, "duplicate", v2, TenantShare("acme", True, True, 100))
    repo.commit_delete(UploadDeletion(f"{1:032x}", UploadStatus.STORED, DIGEST, "acme"), counter_shard=0, now=_now())
    (held,) = due(repo.due_references, repo, _now())  # marked by the delete, still counted once
    assert held.holds and not repo.reap_reference(held) and repo.unindex_reference(held)
    assert due(repo.due_references, repo, _now()) == []
    repo.commit_delete(UploadDeletion(f"{2:032x}", UploadStatus.DUPLICATE, DIGEST, "acme"), counter_shard=0, now=_now())
    grace_over = _now() + timedelta(seconds=repo_settings(repo).delete_grace_seconds)
    assert due(repo.due_contents, repo, _now()) == []
    (file,) = due(repo.due_contents, repo, grace_over)
    (ref,) = due(repo.due_references, repo, _now())
    assert (file.hash, file.live_refs, ref.upload_count, ref.size) == (DIGEST, 0, 0, 100)
    assert not repo.unindex_content(file) and not repo.unindex_reference(ref)  # both at 0
    assert not repo.reap_content(dataclasses.replace(file, generation=9), counter_shard=0)  # not that generation
    assert repo.reap_content(file, counter_shard=1)
    assert repo.get_file(DIGEST, consistent=True) is None and repo.get_claim(BUCKET, v1.key) is None
    totals = repo.counter_totals(consistent=True)
    assert (totals["total_files"], totals["total_bytes_stored"]) == (0, 0)
    assert repo.reap_reference(ref)
    assert repo.tenant_file("acme", DIGEST) == (None, None) and repo.tenant_usage("acme") == TenantUsage()
    assert due(repo.due_contents, repo, grace_over) == [] and due(repo.due_references, repo, _now()) == []
    assert record.upload_id  # the upload record stays (deleted)


def test_a_content_counted_again_leaves_the_reaper_s_index(repo: Repository) -> None:
    first, v1 = registered(repo, 1)
    commit(repo, "stored", v1, TenantShare("acme", False, False, 100))
    repo.commit_delete(
        UploadDeletion(first.upload_id, UploadStatus.STORED, DIGEST, "acme"), counter_shard=0, now=_now()
    )
    (tombstoned,) = due(repo.due_contents, repo, _now() + timedelta(days=1))
    _, v2 = registered(repo, 2)
    share = TenantShare("acme", held=False, counted=True, pending_bytes=100)
    repo.commit_resurrect(v2, tombstoned, filename="f", content_type="t", counter_shard=0, now=_now(), tenant=share)
    (resurrected,) = due(repo.due_contents, repo, _now() + timedelta(days=1))
    assert (resurrected.reap_key, resurrected.live_refs) == (v1.key, 1)
    assert not repo.unindex_content(resurrected)  # its older object first
    assert not repo.forget_older_generation(dataclasses.replace(resurrected, reap_etag='"other"'))
    assert repo.forget_older_generation(resurrected)
    assert repo.get_claim(BUCKET, v1.key) is None and repo.get_claim(BUCKET, v2.key) is not None
    assert repo.unindex_content(repo.get_file(DIGEST, consistent=True) or resurrected)
    assert due(repo.due_contents, repo, _now() + timedelta(days=1)) == []


def test_marking_lost_and_reading_many(repo: Repository) -> None:
    record, v1 = registered(repo, 1)
    commit(repo, "stored", v1, TenantShare("acme", False, False, 100))
    file = repo.get_file(DIGEST, consistent=True)
    assert file is not None
    assert not repo.mark_lost(dataclasses.replace(file, s3_key="uploads/elsewhere"), _now())  # names another object
    assert repo.mark_lost(file, _now())
    assert not repo.mark_lost(file, _now())  # once
    lost = repo.get_file(DIGEST, consistent=True)
    assert lost is not None and lost.state == ContentState.LOST and lost.lost_at == clock.iso(_now())
    assert set(repo.get_events([v1.event_key, "nope"])) == {v1.event_key}
    assert set(repo.get_uploads([record.upload_id, "0" * 32])) == {record.upload_id}
    assert repo.get_claims(BUCKET, [v1.key, "uploads/none"])[v1.key].hash == DIGEST


def test_the_lease(repo: Repository) -> None:
    until = _now() + timedelta(minutes=15)
    assert repo.take_lease("run-1", _now(), until).holder == "run-1"
    held = repo.take_lease("run-2", _now(), until)
    assert held.holder == "run-1" and held.expires_at == clock.iso(until)
    repo.note_sweep_due(_now())
    repo.renew_lease("run-1", until + timedelta(minutes=1))
    refused(LeaseLost, lambda: repo.renew_lease("run-2", until))
    repo.release_lease("run-2")  # not its lease: nothing
    repo.release_lease("run-1", swept_at=_now() - timedelta(seconds=1))
    taken = repo.take_lease("run-2", _now(), until)
    assert taken.holder == "run-2" and taken.sweep_due  # asked for after the last sweep started
    repo.release_lease("run-2", swept_at=_now())
    assert not repo.take_lease("run-3", _now(), until).sweep_due
    assert repo.take_lease("run-4", until + timedelta(seconds=1), until + timedelta(minutes=5)).holder == "run-4"


def test_an_upload_carries_the_event_of_the_version_that_processed_it(repo: Repository) -> None:
    """An ingest's commit of an object at an upload key writes its event record into the upload item (no item of
    its own); every read of events finds it there, and the other versions' records (a rejected second PUT, an
    object with no upload) where they are."""
    record, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", held=False, counted=False, pending_bytes=100))
    second = dataclasses.replace(v, event_key=event_key(BUCKET, v.key, "second"), etag='"second"')
    assert repo.record_event(second, "rejected", _now())
    never = event_key(BUCKET, v.key, "never")
    events = repo.get_events([v.event_key, second.event_key, never])
    assert sorted(events) == sorted([v.event_key, second.event_key])
    carried = events[v.event_key]
    assert (carried.outcome, carried.hash, carried.key, carried.etag) == ("stored", DIGEST, v.key, v.etag)
    assert (carried.upload_id, carried.size, carried.bucket) == (record.upload_id, 100, BUCKET)
    assert repo.get_event(v.event_key) == carried and events[second.event_key].outcome == "rejected"
    assert repo.ingest_state(v.event_key, DIGEST, record.upload_id).event == carried
    # the ingest's first read of another version at the key reads the upload item only (record_event finds it)
    assert repo.ingest_state(second.event_key, DIGEST, record.upload_id).event is None
    assert not repo.record_event(second, "rejected", _now() + timedelta(seconds=1))
    assert repo.get_event(never) is None and repo.ingest_state(never, DIGEST, record.upload_id).event is None
    # the upload item says which version processed it: a commit of this one again is a replay
    replay = refused(EventRecorded, lambda: commit(repo, "stored", v, None))
    assert replay.item == carried
    # an object put straight into the bucket (no upload id in its key) keeps an event item of its own
    key = "uploads/direct/x.bin"
    direct = ObjectVersion(event_key(BUCKET, key, "d"), BUCKET, key, '"d"', 100, OTHER, None)
    commit(repo, "stored", direct, None)
    found = repo.get_event(direct.event_key)
    assert found is not None and found.outcome == "stored" and found.upload_id is None
    assert repo.get_events([direct.event_key]) == {direct.event_key: found}
    # the keys' claims: the upload's carried by its item, the direct put's an item of its own; both read alike
    claims = repo.get_claims(BUCKET, [v.key, key, "uploads/direct/none.bin", f"uploads/{9:032x}"])
    assert sorted(claims) == sorted([v.key, key])
    assert (claims[v.key].hash, claims[key].hash) == (DIGEST, OTHER)
    assert repo.get_claim(BUCKET, v.key) == claims[v.key] and repo.get_claim(BUCKET, key) == claims[key]
    # the stored copy's key claimed: another version there is a conflict (the claim outranks the taken upload)
    claimed = refused(KeyClaimed, lambda: commit(repo, "duplicate", second, None))
    assert claimed.item == claims[v.key]
