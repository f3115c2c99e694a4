"""The uploads aggregate's contract (dfd.uploads.ports; dfd.adapters.dynamo.uploads): registration against the
quota, multipart records, an upload ended or cancelled once, the reconcile's pending uploads.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dfd.core import clock
from dfd.core.conflicts import (
    CommitRefused,
    MultipartAttached,
    QuotaRefused,
)
from dfd.core.records import TenantUsage, UploadStatus, UploadVia
from dfd.uploads.ports import NewMultipart
from tests.integration.contract.support import (
    PENDING_LIMIT,
    QUOTA,
    Repository,
    _now,
    due,
    new_upload,
    refused,
    registered,
    repo_settings,
)


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


def _ended(repo: Repository) -> tuple[int, int]:
    """The counters' expired and failed uploads, summed over the shards."""
    shards = repo.counter_shards(consistent=True).values()
    return sum(s.expired_uploads for s in shards), sum(s.failed_uploads for s in shards)


def _rejected(repo: Repository) -> int:
    """The counters' rejected uploads, summed over the shards."""
    return sum(s.rejected_uploads for s in repo.counter_shards(consistent=True).values())


def test_pending_uploads_are_due_after_their_grace_and_settle_once(repo: Repository) -> None:
    first, _ = registered(repo, 1, size=100)
    second, _ = registered(repo, 2, size=200)
    grace = repo_settings(repo).reconcile_grace_seconds
    assert due(repo.due_uploads, repo, _now()) == [] or grace == 0
    later = _now() + timedelta(seconds=grace)
    assert sorted(u.upload_id for u in due(repo.due_uploads, repo, later)) == [first.upload_id, second.upload_id]
    assert (repo.count_redrive(first.upload_id, later), repo.count_redrive(first.upload_id, later)) == (1, 2)
    assert repo.give_up_upload(first, UploadStatus.FAILED, later, counter_shard=1, failure="never ingested")
    once = repo.give_up_upload(first, UploadStatus.FAILED, later, counter_shard=2, failure="never ingested")
    assert not once and _ended(repo) == (0, 1)  # once, and counted once
    assert repo.count_redrive(first.upload_id, later) is None  # no longer pending
    failed = repo.get_upload(first.upload_id)
    assert failed is not None and (failed.status, failed.failure, failed.failed_at) == (
        UploadStatus.FAILED,
        "never ingested",
        clock.iso(later),
    )
    assert failed.redrives == 2 and failed.quota_bytes == 0
    assert repo.give_up_upload(second, UploadStatus.EXPIRED, later, counter_shard=0)
    assert _ended(repo) == (1, 1)
    expired = repo.get_upload(second.upload_id)
    assert expired is not None and expired.status == UploadStatus.EXPIRED and expired.expired_at == clock.iso(later)
    assert due(repo.due_uploads, repo, later) == []  # out of the index
    assert repo.tenant_usage("acme") == TenantUsage()  # their quota bytes released


def test_a_rejected_upload_is_recorded_and_counted_once(repo: Repository) -> None:
    upload = new_upload(1, size=700)
    record = repo.record_rejected_upload(upload, "too_large", _now(), counter_shard=1)
    assert (record.status, record.failure, record.size, record.tenant) == (
        UploadStatus.REJECTED,
        "too_large",
        700,
        "acme",
    )
    assert repo.get_upload(upload.upload_id) == record and _rejected(repo) == 1
    again = repo.record_rejected_upload(upload, "quota_exceeded", _now() + timedelta(minutes=1), counter_shard=2)
    assert again == record and _rejected(repo) == 1  # the first record stands, counted once
    assert repo.tenant_usage("acme") == TenantUsage()
    registered(repo, 2, size=10)
    pending = repo.record_rejected_upload(new_upload(2, size=10), "too_large", _now(), counter_shard=0)
    assert pending.status == UploadStatus.PENDING and _rejected(repo) == 1  # registered first: not rejected
    marked = dataclasses.replace(new_upload(3, size=700), incarnation="drop-3")
    assert repo.record_rejected_upload(marked, "too_large", _now(), counter_shard=0).incarnation == "drop-3"
    assert record.incarnation is None and _rejected(repo) == 2  # none given: none written


def test_an_upload_id_registered_again_is_refused_and_counts_nothing(repo: Repository) -> None:
    """Two deliveries of one drop-zone object register the same id (derived from its version): the second one's
    put of a new item is refused (the drop zone reads the record the first wrote), nothing counted twice."""
    upload = dataclasses.replace(new_upload(1, size=10), via=UploadVia.S3, incarnation="first")
    repo.register_upload(upload, _now(), pending_limit=False)
    usage = repo.tenant_usage("acme")
    again = dataclasses.replace(upload, incarnation="second")
    refused(CommitRefused, lambda: repo.register_upload(again, _now() + timedelta(seconds=1), pending_limit=False))
    # counted once: its bytes (a drop-zone registration is not among the pending uploads' count)
    assert repo.tenant_usage("acme") == usage and (usage.pending_count, usage.pending_bytes) == (0, 10)
    record = repo.get_upload(upload.upload_id)
    assert record is not None and record.incarnation == "first"


def test_a_drop_zone_registration_is_neither_held_to_the_pending_limit_nor_counted_in_it(repo: Repository) -> None:
    repo.register_upload(new_upload(91, size=10), _now(), pending_limit=False)  # its bytes are there already
    record = repo.get_upload(new_upload(91).upload_id)
    assert record is not None and record.pending_uncounted and record.quota_bytes == 10
    assert repo.tenant_usage("acme") == TenantUsage(pending_bytes=10, used_bytes=10)
    for index in range(1, PENDING_LIMIT + 1):  # the limit is the other uploads' still
        registered(repo, index, size=10)
    refused(QuotaRefused, lambda: repo.register_upload(new_upload(90, size=10), _now()))
    repo.register_upload(new_upload(92, size=10), _now(), pending_limit=False)
    assert repo.tenant_usage("acme").pending_count == PENDING_LIMIT
    over = refused(QuotaRefused, lambda: repo.register_upload(new_upload(93, size=QUOTA), _now(), pending_limit=False))
    assert over is not None  # the bytes quota still holds
    # what ends one releases its bytes only
    first, second = repo.get_upload(new_upload(91).upload_id), repo.get_upload(new_upload(92).upload_id)
    assert first is not None and second is not None
    assert repo.give_up_upload(first, UploadStatus.EXPIRED, _now(), counter_shard=0)
    assert repo.cancel_upload(
        second.upload_id, UploadStatus.PENDING, _now(), tenant="acme", quota_bytes=10, counted=False
    )
    assert repo.tenant_usage("acme") == TenantUsage(
        pending_count=PENDING_LIMIT, pending_bytes=10 * PENDING_LIMIT, used_bytes=10 * PENDING_LIMIT
    )


def test_a_pending_drop_zone_upload_is_rejected_once_its_bytes_released(repo: Repository) -> None:
    repo.register_upload(new_upload(1, size=40), _now(), pending_limit=False)
    record = repo.get_upload(new_upload(1).upload_id)
    assert record is not None
    assert repo.reject_pending_upload(record, "archived_storage_class", _now(), counter_shard=1)
    assert _rejected(repo) == 1
    assert not repo.reject_pending_upload(record, "archived_storage_class", _now(), counter_shard=2)  # once
    assert _rejected(repo) == 1  # counted once
    rejected = repo.get_upload(record.upload_id)
    assert rejected is not None and rejected.status == UploadStatus.REJECTED and rejected.quota_bytes == 0
    assert (rejected.failure, rejected.failed_at) == ("archived_storage_class", clock.iso(_now()))
    assert repo.tenant_usage("acme") == TenantUsage()


def test_how_each_upload_came_in_is_kept_and_read_by_every_reader(repo: Repository) -> None:
    """`via` as registered, on the item and through both indexes: GET /uploads' OwnerIndex, the reconcile's
    PendingIndex (each projects the record's fields)."""
    registered(repo, 1)  # POST /upload's presigned PUT: NewUpload's default
    repo.register_upload(dataclasses.replace(new_upload(2), via=UploadVia.LFS), _now())
    repo.register_upload(dataclasses.replace(new_upload(3), via=UploadVia.S3), _now())
    repo.register_multipart_upload(
        dataclasses.replace(new_upload(4, size=600, tenant="beta"), via=UploadVia.MULTIPART),
        NewMultipart("alice", "beta", 5 * 2**20, 2),
        _now(),
    )
    rejected = repo.record_rejected_upload(
        dataclasses.replace(new_upload(5), via=UploadVia.S3), "too_large", _now(), counter_shard=0
    )
    assert rejected.via == UploadVia.S3 and rejected.status == UploadStatus.REJECTED
    want = {
        new_upload(1).upload_id: UploadVia.PRESIGNED,
        new_upload(2).upload_id: UploadVia.LFS,
        new_upload(3).upload_id: UploadVia.S3,
        new_upload(4).upload_id: UploadVia.MULTIPART,
        new_upload(5).upload_id: UploadVia.S3,
    }
    assert {upload_id: record.via for upload_id, record in repo.get_uploads(list(want)).items()} == want
    listed, _ = repo.owner_uploads("alice", 10, None)
    assert {record.upload_id: record.via for record in listed} == want
    pending = due(repo.due_uploads, repo, _now() + timedelta(days=1), limit=10)
    assert {record.upload_id: record.via for record in pending} == {
        upload_id: via for upload_id, via in want.items() if upload_id != rejected.upload_id
    }
