"""The deletes aggregate's contract (dfd.deletes.ports; dfd.adapters.dynamo.deletes): deletes down to the tombstone,
then a resurrection.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dfd.core import clock
from dfd.core.conflicts import (
    DeleteRaced,
    FileChanged,
    FileVanished,
    ReapPending,
    ReferenceMissing,
)
from dfd.core.records import ContentState, TenantUsage, UploadStatus
from dfd.deletes.ports import UploadDeletion
from dfd.ingest.ports import TenantShare
from dfd.uploads.ports import PrecheckDuplicate
from tests.integration.contract.support import (
    DIGEST,
    Repository,
    _now,
    commit,
    refused,
    registered,
    repo_settings,
)


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
