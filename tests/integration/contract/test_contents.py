"""The contents aggregate's contract (dfd.ingest.ports, the precheck of dfd.uploads.ports;
dfd.adapters.dynamo.contents, .precheck, .adoption): the ingest's commits, their replays and races, the precheck's
duplicate, adoption.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dfd.core import clock
from dfd.core.conflicts import (
    EventRecorded,
    FileAppeared,
    FileChanged,
    FileVanished,
    KeyClaimed,
    PendingReleased,
    QuotaRefused,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.ids import event_key
from dfd.core.records import ContentState, TenantUsage, UploadStatus, UploadVia
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.uploads.ports import PrecheckDuplicate
from tests.integration.contract.support import (
    BUCKET,
    DIGEST,
    OTHER,
    Repository,
    _now,
    commit,
    new_upload,
    refused,
    registered,
    version,
)


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


def test_a_commit_of_an_upload_whose_quota_share_was_released_holds_the_quota(repo: Repository) -> None:
    late, late_v = registered(repo, 1, size=400)
    assert repo.end_pending_upload(late.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=400)
    registered(repo, 2, size=700)  # the released room, taken: 700 + 400 > QUOTA
    before = repo.tenant_usage("acme")
    share = TenantShare("acme", False, False, 0, released=True)
    over = refused(QuotaRefused, lambda: commit(repo, "stored", late_v, share))
    assert over.item == before == TenantUsage(pending_count=1, pending_bytes=700, used_bytes=700)
    record = repo.get_upload(late.upload_id)
    assert record is not None and record.status == UploadStatus.EXPIRED and record.event_key is None
    assert repo.get_file(DIGEST, consistent=True) is None and repo.tenant_usage("acme") == before
    # a share counted already adds no bytes: no quota to hold
    commit(repo, "stored", version(9, digest=OTHER), TenantShare("acme", False, False))
    counted = dataclasses.replace(late_v, hash=OTHER)
    commit(repo, "duplicate", counted, TenantShare("acme", True, True, 0, released=True))
    assert repo.tenant_usage("acme") == TenantUsage(
        pending_count=1, pending_bytes=700, used_bytes=800, stored_bytes=100
    )
    # bytes that fit are stored and counted
    fits, fits_v = registered(repo, 3, size=100)
    assert repo.end_pending_upload(fits.upload_id, UploadStatus.EXPIRED, _now(), tenant="acme", quota_bytes=100)
    commit(repo, "stored", dataclasses.replace(fits_v, hash="c" * 64), share)
    assert repo.tenant_usage("acme") == TenantUsage(
        pending_count=1, pending_bytes=700, used_bytes=900, stored_bytes=200
    )


def test_record_event_once(repo: Repository) -> None:
    v = version(1)
    assert repo.record_event(v, "conflict", _now())
    # another delivery (a record of another second: an identical one is taken for our own lost response)
    assert not repo.record_event(v, "conflict", _now() + timedelta(seconds=1))
    event = repo.get_event(v.event_key)
    assert event is not None and event.outcome == "conflict" and event.key == v.key


def _rejected(repo: Repository) -> int:
    return sum(s.rejected_uploads for s in repo.counter_shards(consistent=True).values())


def test_a_rejected_version_is_recorded_and_counted_once(repo: Repository) -> None:
    v = version(1)
    assert repo.record_rejected_event(v, _now(), counter_shard=1)
    event = repo.get_event(v.event_key)
    assert event is not None and event.outcome == "rejected" and _rejected(repo) == 1
    # a replay (another delivery: a record of another second) finds it and counts nothing
    assert not repo.record_rejected_event(v, _now() + timedelta(seconds=1), counter_shard=2)
    assert _rejected(repo) == 1 and repo.counter_totals()["total_uploads"] == 0
    assert not repo.record_event(v, "conflict", _now() + timedelta(seconds=2))  # one record per version


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
    assert upload.via == UploadVia.PRECHECK
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


def test_an_upload_carries_the_event_of_the_version_that_processed_it(repo: Repository) -> None:
    """An ingest's commit of an object at an upload key writes its event record into the upload item (no item of
    its own); every read of events finds it there, and the other versions' records (a rejected second PUT, an
    object with no upload) where they are."""
    record, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", held=False, counted=False, pending_bytes=100))
    second = dataclasses.replace(v, event_key=event_key(BUCKET, v.key, "second"), etag='"second"')
    assert repo.record_rejected_event(second, _now(), counter_shard=1)
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
    assert not repo.record_rejected_event(second, _now() + timedelta(seconds=1), counter_shard=2)
    assert _rejected(repo) == 1  # counted once
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


def test_a_commit_keeps_how_a_registered_upload_came_in_and_names_a_direct_put_bucket(repo: Repository) -> None:
    """The commit sets `via` only on an upload item it creates (an object put straight at an upload key, no
    registration): `bucket`; a registered upload keeps its own."""
    _, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", False, False, 100))
    kept = repo.get_upload(v.upload_id or "")
    assert kept is not None and kept.status == UploadStatus.STORED and kept.via == UploadVia.PRESIGNED
    direct = version(2, digest=OTHER, upload_id=f"{2:032x}")
    commit(repo, "stored", direct, None)
    created = repo.get_upload(f"{2:032x}")
    assert created is not None and created.owner is None and created.via == UploadVia.BUCKET


def test_an_upload_item_a_commit_creates_carries_its_incarnation_and_a_registered_one_its_own(
    repo: Repository,
) -> None:
    """An object put straight at an upload key: the commit creating its item writes the incarnation (a replay
    keeps it); a registration's incarnation (a drop-zone object's) or its absence (a random id's) stays."""
    _, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", False, False, 100))
    kept = repo.get_upload(v.upload_id or "")
    assert kept is not None and kept.incarnation is None
    direct = version(2, digest=OTHER, upload_id=f"{2:032x}")
    commit(repo, "stored", direct, None)
    created = repo.get_upload(f"{2:032x}")
    assert created is not None and created.incarnation
    refused(EventRecorded, lambda: commit(repo, "stored", direct, None))
    assert repo.get_upload(f"{2:032x}") == created
    dropped = dataclasses.replace(new_upload(3), via=UploadVia.S3, incarnation="drop-3")
    repo.register_upload(dropped, _now(), pending_limit=False)
    commit(repo, "duplicate", version(3, digest=OTHER, upload_id=f"{3:032x}"), TenantShare("acme", False, False, 100))
    processed = repo.get_upload(f"{3:032x}")
    assert processed is not None and processed.status.processed and processed.incarnation == "drop-3"
