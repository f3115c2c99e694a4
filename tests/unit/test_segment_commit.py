"""A version hashed across invocations (dfd.ingest.segments) goes through the same decision and commit as an
inline hash (Ingestor.commit_hashed): stored once, a duplicate counted and deleted once, a replay changes nothing,
an object outside the uploads is never committed; the counters and the tenant layer stay exact."""

from __future__ import annotations

import random

from dfd.core.ids import event_key, version_token
from dfd.ingest.segments import SegmentOutcome, Segments, version_info
from dfd.ingest.service import Outcome
from tests.unit.fakes.hashing import FakeHashingStore
from tests.unit.ingest_world import BUCKET, World, expect, sha

KIB = 1024


def _hash_in_segments(world: World, key: str) -> tuple[str, Segments, FakeHashingStore]:
    """Begin, then segments until done (each at most 4 KiB): the event key; the digest is in the state."""
    store = FakeHashingStore()
    segments = Segments(store, world.objects, segment_bytes=4 * KIB, window=KIB)
    info = world.objects.head(BUCKET, key)
    event = event_key(BUCKET, key, version_token(info.version_id, info.etag))
    segments.begin(event, info)
    count = 0
    while (result := segments.hash_segment(event, lambda: 900.0)).outcome is SegmentOutcome.MORE:
        count += 1
    assert result.outcome is SegmentOutcome.DONE and count >= 8
    return event, segments, store


def _commit(world: World, store: FakeHashingStore, event: str) -> object:
    progress = store.get_hashing(event)
    assert progress is not None and progress.digest is not None
    return world.ingestor().commit_hashed(version_info(progress), progress.digest)


def test_a_segmented_new_content_is_stored_once_and_a_replay_changes_nothing() -> None:
    world = World()
    data = random.Random(1).randbytes(40 * KIB + 5)
    key = world.upload(data, "big.bin")
    event, _, store = _hash_in_segments(world, key)
    result = _commit(world, store, event)
    expect(result, Outcome.STORED)  # type: ignore[arg-type]
    assert result.hash == sha(data) and result.hashed_bytes == len(data)  # type: ignore[attr-defined]
    assert result.detail["tenant"] == "acme" and result.detail["upload_status"] == "stored"  # type: ignore[attr-defined]
    assert world.repo.uploads[key.rsplit("/", 1)[1]]["content_type"] == "text/plain"
    expect(_commit(world, store, event), Outcome.REPLAY)  # type: ignore[arg-type]
    totals = world.totals()
    assert (totals["total_files"], totals["total_uploads"], totals["total_bytes_stored"]) == (1, 1, len(data))
    world.assert_invariants()


def test_a_segmented_duplicate_is_counted_and_deleted_once() -> None:
    world = World()
    data = random.Random(2).randbytes(36 * KIB)
    first = world.upload(data, "one.bin")
    expect(world.ingest(first), Outcome.STORED)  # inline: under any threshold
    second = world.upload(data, "two.bin")
    event, _, store = _hash_in_segments(world, second)
    result = _commit(world, store, event)
    expect(result, Outcome.DUPLICATE)  # type: ignore[arg-type]
    assert result.deleted and result.bytes_saved == len(data)  # type: ignore[attr-defined]
    assert (BUCKET, second) not in world.objects.objects and (BUCKET, first) in world.objects.objects
    again = _commit(world, store, event)  # the workflow's commit retried: a replay, nothing counted twice
    expect(again, Outcome.REPLAY)  # type: ignore[arg-type]
    totals = world.totals()
    assert (totals["total_files"], totals["total_uploads"], totals["duplicates_avoided"]) == (1, 2, 1)
    world.assert_invariants()


def test_a_version_outside_the_uploads_is_never_committed() -> None:
    world = World()
    world.objects.put(BUCKET, "elsewhere/x.bin", b"x" * 100)
    world.objects.put("other-bucket", world.settings.upload_prefix + "y.bin", b"y" * 100)
    for bucket, key in ((BUCKET, "elsewhere/x.bin"), ("other-bucket", world.settings.upload_prefix + "y.bin")):
        result = world.ingestor().commit_hashed(world.objects.head(bucket, key), sha(b"x" * 100))
        assert result.outcome == Outcome.IGNORED and result.detail["reason"] == "outside the upload prefix"
    assert world.totals()["total_files"] == 0 and not world.repo.files
