"""The drop zone (dfd.ingest.dropzone) on the fakes: an object under a caller's s3/ prefix becomes an upload of
its tenant, moved to its upload key, deduplicated there by the usual ingest; refusals end `rejected`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from dfd.identity.s3access import prefix_for
from dfd.ingest.dropzone import drop_filename, drop_upload_id
from dfd.ingest.service import Outcome
from dfd.queries.views import listed_upload_view
from tests.support import ALICE, BOB
from tests.unit.ingest_world import BUCKET, World, expect, sha


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
    world.assert_invariants()


def test_keys_outside_a_callers_prefix_are_ignored() -> None:
    world = World()
    world.objects.put(BUCKET, "s3/acme/x", b"no filename")
    world.objects.put(BUCKET, "s3/ac%2fme/owner/f", b"not canonical")
    expect(world.ingest("s3/acme/x"), Outcome.IGNORED)
    expect(world.ingest("s3/ac%2fme/owner/f"), Outcome.IGNORED)
    assert len(world.objects.objects) == 2 and not world.repo.uploads


def test_the_upload_id_and_filename() -> None:
    one = drop_upload_id("b", "s3/t/o/f", "etag", 3)
    assert one == drop_upload_id("b", "s3/t/o/f", "etag", 3) and len(one) == 32 and int(one[-1], 16) % 2 == 0
    assert one != drop_upload_id("b", "s3/t/o/f", "etag2", 3)
    assert drop_filename("a/b/c.txt") == "a/b/c.txt"
    assert drop_filename("a/b\x01c.txt") == "bc.txt"
    assert drop_filename("d/" + "x" * 300) == "file"


def test_the_pending_limit_does_not_refuse_bytes_already_there() -> None:
    world = World()
    world.settings = replace(world.settings, tenant_pending_limit=1)
    world.repo.settings = world.settings
    keys = [drop(world, f"file {n}".encode(), f"f{n}.txt") for n in range(3)]
    targets = [settle(world, key)[1] for key in keys]  # three pending at once
    assert world.repo.tenant_usage(ALICE.caller.tenant).pending_count == 3
    for target in targets:
        expect(world.ingest(target), Outcome.STORED)
    world.assert_invariants()


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
