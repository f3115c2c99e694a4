"""The reconcile's contract (dfd.reconcile.ports; dfd.adapters.dynamo.reaper, .lease): the reaper's writes, lost
contents, the lease.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dfd.core import clock
from dfd.core.conflicts import (
    EventRecorded,
    LeaseLost,
)
from dfd.core.records import ContentState, TenantUsage, UploadStatus
from dfd.deletes.ports import UploadDeletion
from dfd.ingest.ports import TenantShare
from tests.integration.contract.support import (
    BUCKET,
    DIGEST,
    Repository,
    _now,
    commit,
    due,
    refused,
    registered,
    repo_settings,
)


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
    reaped = repo.counter_shards(consistent=True)["shard#001"]
    assert (reaped.reaped_contents, reaped.reaped_bytes, reaped.reaped_uploads) == (1, 100, 2)
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


def test_a_content_reaped_and_committed_again_is_another_incarnation(repo: Repository) -> None:
    """The record's incarnation is written once by the commit creating it (a replay keeps it); the record the
    reaper deleted and a later commit created anew carries another, so its events' ids differ."""
    _, v1 = registered(repo, 1)
    commit(repo, "stored", v1, TenantShare("acme", False, False, 100))
    first = repo.get_file(DIGEST, consistent=True)
    assert first is not None and first.incarnation
    refused(EventRecorded, lambda: commit(repo, "stored", v1, None))
    assert repo.get_file(DIGEST, consistent=True) == first
    repo.commit_delete(UploadDeletion(f"{1:032x}", UploadStatus.STORED, DIGEST, "acme"), counter_shard=0, now=_now())
    grace_over = _now() + timedelta(seconds=repo_settings(repo).delete_grace_seconds)
    (file,) = due(repo.due_contents, repo, grace_over)
    assert repo.reap_content(file, counter_shard=0)
    _, v2 = registered(repo, 2)
    commit(repo, "stored", v2, TenantShare("acme", held=False, counted=True, pending_bytes=100))
    second = repo.get_file(DIGEST, consistent=True)
    assert second is not None and second.generation == first.generation == 1
    assert second.incarnation and second.incarnation != first.incarnation
