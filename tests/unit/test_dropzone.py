"""The drop zone (dfd.ingest.dropzone) on the fakes: an object under a caller's s3/ prefix becomes an upload of
its tenant, moved to its upload key, deduplicated there by the usual ingest; refusals end `rejected`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from dfd.core.errors import ObjectArchived, ServiceUnavailable
from dfd.core.ids import valid_content_type
from dfd.core.objects import ListedObject
from dfd.core.records import UploadStatus
from dfd.identity.s3access import prefix_for
from dfd.ingest.dropzone import drop_filename, drop_upload_id
from dfd.ingest.service import Outcome
from dfd.queries.views import listed_upload_view
from dfd.reconcile.service import Reconciler
from tests.support import ALICE, BOB, CAROL
from tests.unit.ingest_world import BUCKET, NOW, World, expect, sha


def drop(world: World, data: bytes, name: str = "dir/a.txt", user=ALICE) -> str:  # type: ignore[no-untyped-def]
    key = prefix_for(user.caller.tenant, user.caller.owner) + name
    world.objects.put(BUCKET, key, data, content_type="text/plain")
    return key


def settle(world: World, key: str) -> tuple[str, str]:
    """The drop's event, then its copy's event: (upload id, the copy's key)."""
    moved = world.ingest(key)
    expect(moved, Outcome.MOVED)
    assert moved.upload_id is not None
    return moved.upload_id, f"uploads/{moved.upload_id}"


def test_new_content_becomes_a_stored_upload_at_its_upload_key() -> None:
    world = World()
    key = drop(world, b"hello drop zone")
    upload_id, target = settle(world, key)
    assert (BUCKET, key) not in world.objects.objects  # the s3/ object is gone, its bytes at the upload key
    assert world.objects.objects[(BUCKET, target)].data == b"hello drop zone"
    pending = world.repo.get_upload(upload_id)
    assert pending is not None and pending.status == "pending" and pending.tenant == ALICE.caller.tenant
    assert pending.owner == ALICE.caller.owner and pending.filename == "dir/a.txt"
    expect(world.ingest(target), Outcome.STORED)
    stored = world.repo.get_upload(upload_id)
    assert stored is not None and stored.status == "stored" and stored.hash == sha(b"hello drop zone")
    assert world.repo.tenant_usage(ALICE.caller.tenant).pending_count == 0
    world.assert_invariants()


def test_a_duplicate_of_another_tenants_content_is_deleted() -> None:
    world = World()
    expect(world.ingest(world.upload(b"shared bytes", user=BOB)), Outcome.STORED)
    key = drop(world, b"shared bytes")
    upload_id, target = settle(world, key)
    result = world.ingest(target)
    expect(result, Outcome.DUPLICATE)
    assert result.deleted and (BUCKET, target) not in world.objects.objects
    upload = world.repo.get_upload(upload_id)
    assert upload is not None and upload.status == "stored" and upload.outcome == "duplicate"  # new to ALICE's tenant
    assert world.totals()["duplicates_avoided"] == 1
    world.assert_invariants()


def test_every_event_of_one_version_is_one_upload() -> None:
    world = World()
    key = drop(world, b"once")
    data = world.objects.objects[(BUCKET, key)]
    upload_id, target = settle(world, key)
    expect(world.ingest(target), Outcome.STORED)
    before = (dict(world.repo.uploads), world.totals(), world.objects.copies)
    # the same version again (a redelivery whose delete was lost: the object put back as it was)
    world.objects.objects[(BUCKET, key)] = data
    again = world.ingest(key)
    expect(again, Outcome.SETTLED)
    assert again.upload_id == upload_id and again.deleted
    assert (dict(world.repo.uploads), world.totals(), world.objects.copies) == before
    expect(world.ingest(key), Outcome.GONE)
    world.assert_invariants()


def test_an_overwrite_with_other_bytes_is_a_new_upload() -> None:
    world = World()
    key = drop(world, b"first")
    first, target = settle(world, key)
    expect(world.ingest(target), Outcome.STORED)
    drop(world, b"second")
    second, target2 = settle(world, key)
    assert second != first
    expect(world.ingest(target2), Outcome.STORED)
    assert world.totals()["total_uploads"] == 2
    world.assert_invariants()


def test_a_crash_after_the_copy_is_finished_by_the_redelivery() -> None:
    world = World()
    key = drop(world, b"crash")
    real_delete = world.objects.delete

    def crash(bucket: str, key: str, etag: str | None) -> bool:
        raise RuntimeError("crashed before the delete")

    world.objects.delete = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        world.ingest(key)
    world.objects.delete = real_delete  # type: ignore[method-assign]
    _, target = settle(world, key)  # the redelivery: the copy is there, not made again; the drop deleted
    assert world.objects.copies == 1 and (BUCKET, key) not in world.objects.objects
    expect(world.ingest(target), Outcome.STORED)
    world.assert_invariants()


def test_too_large_and_over_quota_are_rejected_with_their_reason() -> None:
    world = World()
    world.settings = replace(world.settings, max_upload_bytes=10, tenant_quota_bytes=8)
    world.repo.settings = world.settings
    big = drop(world, b"x" * 11, "big.bin")
    result = world.ingest(big)
    expect(result, Outcome.REJECTED)
    assert result.deleted and (BUCKET, big) not in world.objects.objects
    over = drop(world, b"y" * 9, "over.bin")
    expect(world.ingest(over), Outcome.REJECTED)
    listed = {u.filename: listed_upload_view(u) for u in map(world.repo.get_upload, world.repo.uploads) if u}
    assert listed["big.bin"]["status"] == "rejected" and listed["big.bin"]["reason"] == "too_large"
    assert listed["over.bin"]["reason"] == "quota_exceeded"
    assert world.repo.tenant_usage(ALICE.caller.tenant).used_bytes == 0
    assert world.totals()["total_uploads"] == 0 and world.objects.copies == 0
    assert world.counted("rejected_uploads") == 2
    world.assert_invariants()


def test_a_refusal_replayed_before_its_delete_is_counted_once() -> None:
    world = World()
    world.settings = replace(world.settings, max_upload_bytes=10)
    world.repo.settings = world.settings
    big = drop(world, b"x" * 11, "big.bin")
    delete = world.objects.delete
    world.objects.delete = lambda *args: False  # type: ignore[method-assign,assignment]  # lost before its delete
    expect(world.ingest(big), Outcome.REJECTED)
    assert (BUCKET, big) in world.objects.objects and world.counted("rejected_uploads") == 1
    world.objects.delete = delete  # type: ignore[method-assign]
    replay = world.ingest(big)  # the redelivery finds its record
    expect(replay, Outcome.REJECTED)
    assert replay.deleted and world.counted("rejected_uploads") == 1


def test_keys_outside_a_callers_prefix_are_ignored() -> None:
    world = World()
    world.objects.put(BUCKET, "s3/acme/x", b"no filename")
    world.objects.put(BUCKET, "s3/ac%2fme/owner/f", b"not canonical")
    expect(world.ingest("s3/acme/x"), Outcome.IGNORED)
    expect(world.ingest("s3/ac%2fme/owner/f"), Outcome.IGNORED)
    assert len(world.objects.objects) == 2 and not world.repo.uploads


def test_the_upload_id_and_filename() -> None:
    one = drop_upload_id("b", "s3/t/o/f", "etag", 3, "2026-01-01T00:00:00Z")
    assert one == drop_upload_id("b", "s3/t/o/f", "etag", 3, "2026-01-01T00:00:00Z")
    assert len(one) == 32 and int(one[-1], 16) % 2 == 0
    assert one != drop_upload_id("b", "s3/t/o/f", "etag2", 3, "2026-01-01T00:00:00Z")
    assert one != drop_upload_id("b", "s3/t/o/f", "etag", 3, "2026-01-01T00:00:01Z")  # written again later
    assert drop_filename("a/b/c.txt") == "a/b/c.txt"
    assert drop_filename("a/b\x01c.txt") == "bc.txt"
    assert drop_filename("d/" + "x" * 300) == "file"


def test_drop_zone_uploads_are_outside_the_pending_limit_the_tenants_members_share() -> None:
    world = World()
    world.settings = replace(world.settings, tenant_pending_limit=1)
    world.repo.settings = world.settings
    keys = [drop(world, f"file {n}".encode(), f"f{n}.txt") for n in range(3)]
    targets = [settle(world, key)[1] for key in keys]  # three pending at once, none refused
    usage = world.repo.tenant_usage(ALICE.caller.tenant)
    assert usage.pending_count == 0 and usage.pending_bytes == sum(len(f"file {n}") for n in range(3))
    # another member of the tenant still gets the one pending upload the limit allows
    expect(world.ingest(world.upload(b"carol's", user=CAROL)), Outcome.STORED)
    for target in targets:
        expect(world.ingest(target), Outcome.STORED)
    usage = world.repo.tenant_usage(ALICE.caller.tenant)
    assert usage.pending_count == 0 and usage.pending_bytes == 0
    world.assert_invariants()


def test_a_cancelled_or_expired_drop_zone_upload_releases_its_bytes_only() -> None:
    world = World()
    world.settings = replace(world.settings, tenant_pending_limit=5)
    world.repo.settings = world.settings
    world.ingest(world.upload(b"posted"))  # one pending upload counted, released by its ingest
    cancelled, _ = settle(world, drop(world, b"cancel me", "c.txt"))
    expired, _ = settle(world, drop(world, b"expire me", "e.txt"))
    assert world.deletes().delete(ALICE.caller, cancelled).outcome == "cancelled"
    upload = world.repo.get_upload(expired)
    assert upload is not None and world.repo.give_up_upload(upload, UploadStatus.EXPIRED, NOW, counter_shard=0)
    usage = world.repo.tenant_usage(ALICE.caller.tenant)
    assert (usage.pending_count, usage.pending_bytes, usage.used_bytes) == (0, 0, len(b"posted"))


def test_a_folder_key_and_the_prefix_itself_are_rejected_and_deleted() -> None:
    world = World()
    for name in ("folder-x/", ""):
        key = drop(world, b"x" * 64, name)
        result = world.ingest(key)
        expect(result, Outcome.REJECTED)
        assert result.deleted and (BUCKET, key) not in world.objects.objects
        upload = world.repo.get_upload(str(result.upload_id))
        assert upload is not None and upload.status == "rejected" and upload.failure == "not_a_file"
        assert upload.tenant == ALICE.caller.tenant and upload.owner == ALICE.caller.owner
    assert world.repo.tenant_usage(ALICE.caller.tenant).used_bytes == 0 and world.objects.copies == 0
    assert world.counted("rejected_uploads") == 2
    # the sweep re-drives such keys (nothing under s3/ is left to stay)
    prefix = prefix_for(ALICE.caller.tenant, ALICE.caller.owner)
    listed = [ListedObject(prefix + "folder-y/", '"e"'), ListedObject(prefix, '"e"'), ListedObject("s3/x", '"e"')]
    assert [obj.key for obj in Reconciler.drops(listed)] == [prefix + "folder-y/", prefix]


def test_an_archived_object_is_rejected_before_or_after_its_registration() -> None:
    world = World()
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "cold.bin"
    world.objects.put(BUCKET, key, b"frozen", storage_class="GLACIER")
    result = world.ingest(key)
    expect(result, Outcome.REJECTED)
    assert result.deleted and (BUCKET, key) not in world.objects.objects
    upload = world.repo.get_upload(str(result.upload_id))
    assert upload is not None and upload.failure == "archived_storage_class"
    assert world.counted("rejected_uploads") == 1
    # an archive tier the HeadObject did not show: the copy is refused after the registration
    world.objects.put(BUCKET, key, b"archived tier")

    def refused(*args: Any, **kwargs: Any) -> None:
        raise ObjectArchived("InvalidObjectState")

    world.objects.copy = refused  # type: ignore[method-assign]
    result = world.ingest(key)
    expect(result, Outcome.REJECTED)
    assert result.deleted and (BUCKET, key) not in world.objects.objects
    upload = world.repo.get_upload(str(result.upload_id))
    assert upload is not None and upload.status == "rejected" and upload.failure == "archived_storage_class"
    assert upload.quota_bytes == 0 and world.repo.tenant_usage(ALICE.caller.tenant).used_bytes == 0
    assert world.counted("rejected_uploads") == 2
    # a redelivery rejects nothing again: the upload is no longer pending
    assert upload is not None and not world.repo.reject_pending_upload(
        upload, "archived_storage_class", NOW, counter_shard=0
    )
    assert world.counted("rejected_uploads") == 2
    world.assert_invariants()


def test_an_invalid_content_type_is_kept_as_octet_stream() -> None:
    world = World()
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "odd.txt"
    cases = (("not a mime type", "application/octet-stream"), ("x" * 3000, "application/octet-stream"))
    for sent, kept in (*cases, ("text/csv; charset=utf-8", "text/csv; charset=utf-8")):
        world.objects.put(BUCKET, key, sent.encode()[:40], content_type=sent)
        upload_id, target = settle(world, key)
        upload = world.repo.get_upload(upload_id)
        assert upload is not None and upload.content_type == kept and valid_content_type(kept)
        assert world.objects.objects[(BUCKET, target)].content_type == kept  # what a download serves


def test_a_new_write_of_the_same_bytes_is_a_new_upload() -> None:
    world = World()
    key = drop(world, b"sent twice")
    etag = world.objects.objects[(BUCKET, key)].etag
    first, target = settle(world, key)
    expect(world.ingest(target), Outcome.STORED)
    assert world.deletes().delete(ALICE.caller, first).outcome == "deleted"
    # the same file sent again to the same key: S3 gives it the same ETag, a later Last-Modified
    world.objects.put(BUCKET, key, b"sent twice", content_type="text/plain", etag=etag)
    second, target = settle(world, key)
    assert second != first
    expect(world.ingest(target), Outcome.STORED)
    upload = world.repo.get_upload(second)
    assert upload is not None and upload.status == "stored"
    world.assert_invariants()


def test_the_leftover_of_an_expired_drop_zone_upload_is_deleted() -> None:
    world = World()
    key = drop(world, b"too late")
    real_copy = world.objects.copy

    def unavailable(*args: Any, **kwargs: Any) -> None:
        raise ServiceUnavailable("S3 down")

    world.objects.copy = unavailable  # type: ignore[method-assign]
    with pytest.raises(ServiceUnavailable):
        world.ingest(key)
    world.objects.copy = real_copy  # type: ignore[method-assign]
    upload_id = next(iter(world.repo.uploads))
    upload = world.repo.get_upload(upload_id)
    assert upload is not None and world.repo.give_up_upload(upload, UploadStatus.EXPIRED, NOW, counter_shard=0)
    result = world.ingest(key)
    expect(result, Outcome.SETTLED)
    assert result.deleted and (BUCKET, key) not in world.objects.objects
    assert world.repo.tenant_usage(ALICE.caller.tenant).used_bytes == 0


def test_a_concurrent_copy_and_an_overwrite_during_the_copy() -> None:
    world = World()
    real_copy = world.objects.copy

    def copy_after(step: Callable[[str, str], object]) -> Callable[..., None]:
        def copy(bucket: str, source: str, etag: str, target: str, **kwargs: Any) -> None:
            step(source, target)
            real_copy(bucket, source, etag, target, **kwargs)

        return copy

    # another delivery's copy lands between our check and our copy: ours is refused (IfNoneMatch), the drop moves on
    key = drop(world, b"raced")
    world.objects.copy = copy_after(lambda source, target: world.objects.put(BUCKET, target, b"raced"))  # type: ignore[method-assign]
    moved = world.ingest(key)
    expect(moved, Outcome.MOVED)
    assert moved.deleted and (BUCKET, key) not in world.objects.objects
    # the object is overwritten between the HEAD and the copy: refused (CopySourceIfMatch), the new version's event
    # follows and nothing is deleted
    other = drop(world, b"first", "o.txt")
    world.objects.copy = copy_after(lambda source, target: world.objects.put(BUCKET, source, b"second"))  # type: ignore[method-assign]
    expect(world.ingest(other), Outcome.SUPERSEDED)
    assert world.objects.objects[(BUCKET, other)].data == b"second"
    world.objects.copy = real_copy  # type: ignore[method-assign]
    expect(world.ingest(other), Outcome.MOVED)
