"""Hashing across invocations, one segment per call (dfd.ingest.segments) over the fake object store and the fake
state store: the digest is hashlib's however the object is cut; every cut is at a 64-byte multiple, within the
byte and time budgets; a failed segment retries from its input state; an overwrite ends superseded, a delete gone;
a replayed begin or a second run of a segment moves nothing twice. S3's stored CRC64NVME, read once, is compared
with the one carried beside the SHA-256 through the same cuts."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfd.core.errors import ServiceUnavailable
from dfd.core.objects import ObjectInfo
from dfd.ingest import crc64nvme
from dfd.ingest.segments import HashingUnknown, SegmentOutcome, SegmentResult, Segments
from dfd.ingest.sha256state import BLOCK
from tests.unit.fakes.hashing import FakeHashingStore
from tests.unit.fakes.objects import FakeObjectStore

BUCKET, KEY = "dfd-files-local", f"uploads/{7:032x}"
KIB = 1024


def _world(
    data: bytes, crc64nvme: int | None = None, **options: int
) -> tuple[FakeObjectStore, FakeHashingStore, Segments, str]:
    objects, store = FakeObjectStore(), FakeHashingStore()
    put = objects.put(BUCKET, KEY, data, crc64nvme=crc64nvme)
    info = ObjectInfo(BUCKET, KEY, put.etag, "v1", len(data), None, None)
    event = f"{BUCKET}/{KEY}#v1"
    segments = Segments(store, objects, **{"segment_bytes": 16 * KIB, "window": 4 * KIB, **options})
    segments.begin(event, info)
    return objects, store, segments, event


def _plenty() -> float:
    return 900.0


def _run(segments: Segments, event: str, remaining: Callable[[], float] = _plenty) -> list[SegmentResult]:
    results = []
    while True:
        result = segments.hash_segment(event, remaining)
        results.append(result)
        if result.outcome is not SegmentOutcome.MORE:
            return results
        assert len(results) < 10_000


def test_an_object_hashed_in_eight_segments_has_hashlibs_digest() -> None:
    data = random.Random(1).randbytes(128 * KIB + 37)
    objects, store, segments, event = _world(data)
    results = _run(segments, event)
    assert len(results) == 9  # 8 full segments of 16 KiB, then the last 37 bytes
    last = results[-1]
    assert (last.outcome, last.hashed, last.size, last.read) == (SegmentOutcome.DONE, len(data), len(data), 37)
    assert last.digest == hashlib.sha256(data).hexdigest()
    assert last.version is not None and (last.version.key, last.version.version_id) == (KEY, "v1")
    assert [r.hashed for r in results[:-1]] == [16 * KIB * n for n in range(1, 9)]
    # reads pinned to the version, cut at 64-byte multiples, none read twice; one state write per segment
    assert all(key == KEY and start % BLOCK == 0 for key, start, _ in objects.ranges)
    assert sum(end - start for _, start, end in objects.ranges) == len(data)
    assert store.writes == 1 + len(results)
    assert store.get_hashing(event).segments == 9  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=20 * KIB),
    segment_blocks=st.integers(min_value=1, max_value=40),
    window_blocks=st.integers(min_value=1, max_value=40),
)
def test_any_cut_gives_hashlibs_digest(size: int, segment_blocks: int, window_blocks: int) -> None:
    data = random.Random(size).randbytes(size)
    _objects, _, segments, event = _world(data, segment_bytes=segment_blocks * BLOCK, window=window_blocks * BLOCK)
    results = _run(segments, event)
    assert results[-1].outcome is SegmentOutcome.DONE
    assert results[-1].digest == hashlib.sha256(data).hexdigest()
    assert all(r.read <= segment_blocks * BLOCK for r in results)
    assert all(r.hashed % BLOCK == 0 for r in results[:-1])


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=20 * KIB),
    segment_blocks=st.integers(min_value=1, max_value=40),
    window_blocks=st.integers(min_value=1, max_value=40),
)
def test_the_crc64nvme_carried_through_any_cut_is_the_one_go_value(
    size: int, segment_blocks: int, window_blocks: int
) -> None:
    data = random.Random(size).randbytes(size)
    whole = crc64nvme.update(data)
    objects, store, segments, event = _world(
        data, whole, segment_bytes=segment_blocks * BLOCK, window=window_blocks * BLOCK
    )
    results = _run(segments, event)
    assert results[-1].outcome is SegmentOutcome.DONE and results[-1].digest == hashlib.sha256(data).hexdigest()
    assert results[-1].crc64nvme_mismatch is False
    progress = store.get_hashing(event)  # through the stored form, after every segment
    assert progress is not None and (progress.stored_crc64nvme, progress.crc64nvme) == (whole, whole)
    assert objects.checksum_heads == [KEY]  # S3's checksum read once, by the first segment


def test_the_crc64nvme_is_stored_beside_the_sha256_state_between_segments() -> None:
    data = random.Random(8).randbytes(128 * KIB + 37)
    objects, store, segments, event = _world(data, crc64nvme.update(data))
    first = segments.hash_segment(event, _plenty)
    assert first.outcome is SegmentOutcome.MORE
    item = store.items[event]
    assert item["crc64nvme"] == f"{crc64nvme.update(data[: first.hashed]):016x}"
    assert item["s3_crc64nvme"] == f"{crc64nvme.update(data):016x}"
    results = _run(segments, event)
    assert len(results) == 8 and results[-1].crc64nvme_mismatch is False
    assert objects.checksum_heads == [KEY]


def test_a_crc64nvme_other_than_s3s_marks_the_version_mismatched() -> None:
    data = random.Random(9).randbytes(100 * KIB)
    _objects, store, segments, event = _world(data, crc64nvme.update(data) ^ 1)
    last = _run(segments, event)[-1]
    assert last.outcome is SegmentOutcome.DONE and last.crc64nvme_mismatch is True
    assert last.digest == hashlib.sha256(data).hexdigest()  # what was read; the commit rejects it
    progress = store.get_hashing(event)
    assert progress is not None and progress.crc64nvme_mismatch is True
    # a retry of the last segment answers the same, reading nothing
    assert segments.hash_segment(event, _plenty).crc64nvme_mismatch is True


def test_an_object_without_a_stored_crc64nvme_is_hashed_as_before() -> None:
    data = random.Random(10).randbytes(40 * KIB + 3)
    objects, store, segments, event = _world(data)
    results = _run(segments, event)
    assert results[-1].digest == hashlib.sha256(data).hexdigest() and results[-1].crc64nvme_mismatch is False
    assert "crc64nvme" not in store.items[event] and "s3_crc64nvme" not in store.items[event]
    assert objects.checksum_heads == [KEY]


def test_an_overwrite_before_the_first_segment_ends_superseded_unread() -> None:
    data = random.Random(11).randbytes(40 * KIB)
    objects, store, segments, event = _world(data, crc64nvme.update(data))
    objects.put(BUCKET, KEY, b"other bytes")  # its checksum HEAD (IfMatch the version's ETag) answers 412
    before = dict(store.items)
    result = segments.hash_segment(event, _plenty)
    assert (result.outcome, result.hashed) == (SegmentOutcome.SUPERSEDED, 0)
    assert objects.ranges == [] and store.items == before


def test_a_segment_stops_at_a_block_before_its_time_runs_out() -> None:
    data = bytes(64 * KIB)
    objects, _, _, event = _world(data)
    ticks = [0.0]

    def slow_read(info: ObjectInfo, start: int, end: int) -> None:
        ticks[0] += 10.0  # each 4 KiB window takes 10 s

    objects.before_range = slow_read
    segments = Segments(FakeHashingStore(), objects, segment_bytes=64 * KIB, window=4 * KIB, monotonic=lambda: ticks[0])
    store = segments._store
    segments.begin(event, ObjectInfo(BUCKET, KEY, objects.objects[(BUCKET, KEY)].etag, "v1", len(data), None, None))
    # 100 s left at the start, 30 s kept back: windows while another 10 s fits
    result = segments.hash_segment(event, lambda: 100.0 - ticks[0])
    assert result.outcome is SegmentOutcome.MORE
    assert ticks[0] == 70.0 and result.hashed == 7 * 4 * KIB
    assert store.get_hashing(event).hashed == 7 * 4 * KIB  # type: ignore[union-attr]
    # an invocation with hardly any time left still hashes one window: every segment makes progress
    result = segments.hash_segment(event, lambda: 1.0)
    assert result.hashed == 8 * 4 * KIB


def test_a_failed_segment_retries_from_its_input_state() -> None:
    data = random.Random(2).randbytes(100 * KIB)
    objects, store, segments, event = _world(data)
    assert segments.hash_segment(event, _plenty).hashed == 16 * KIB
    calls = [0]

    def flaky(info: ObjectInfo, start: int, end: int) -> None:
        calls[0] += 1
        if calls[0] == 3:  # the third window of the second segment: throttled
            raise ServiceUnavailable("S3 GetObject is throttled")

    objects.before_range = flaky
    before = dict(store.items)
    with pytest.raises(ServiceUnavailable):
        segments.hash_segment(event, _plenty)
    assert store.items == before  # nothing written past the input state
    results = _run(segments, event)  # the retry starts from 16 KiB again
    assert results[0].hashed == 32 * KIB
    assert results[-1].digest == hashlib.sha256(data).hexdigest()


def test_an_overwrite_while_hashed_ends_superseded() -> None:
    data = random.Random(3).randbytes(64 * KIB)
    objects, store, segments, event = _world(data)
    segments.hash_segment(event, _plenty)
    objects.put(BUCKET, KEY, data[:100] + b"changed" + data[107:])  # a new version takes the key: its ETag moved on
    before = dict(store.items)
    result = segments.hash_segment(event, _plenty)
    assert (result.outcome, result.hashed, result.digest) == (SegmentOutcome.SUPERSEDED, 16 * KIB, None)
    assert store.items == before  # never finished, never committed


def test_a_version_shorter_than_identified_ends_superseded() -> None:
    data = bytes(64 * KIB)
    objects, _store, segments, event = _world(data)
    objects.objects[(BUCKET, KEY)].data = data[: 20 * KIB]  # same ETag, fewer bytes: not the version identified
    results = _run(segments, event)
    assert results[-1].outcome is SegmentOutcome.SUPERSEDED and results[-1].digest is None


def test_a_delete_while_hashed_ends_gone() -> None:
    objects, store, segments, event = _world(bytes(64 * KIB))
    del objects.objects[(BUCKET, KEY)]
    assert segments.hash_segment(event, _plenty).outcome is SegmentOutcome.GONE
    assert store.get_hashing(event).hashed == 0  # type: ignore[union-attr]


def test_a_retry_of_the_last_segment_reads_nothing() -> None:
    data = random.Random(4).randbytes(20 * KIB)
    objects, store, segments, event = _world(data)
    done = _run(segments, event)[-1]
    reads, writes = len(objects.ranges), store.writes
    assert segments.hash_segment(event, _plenty) == SegmentResult(
        SegmentOutcome.DONE, len(data), len(data), done.digest, version=done.version
    )
    assert (len(objects.ranges), store.writes) == (reads, writes)


def test_a_second_run_of_a_segment_follows_the_first_that_wrote() -> None:
    data = random.Random(5).randbytes(64 * KIB)
    objects, store, segments, event = _world(data)

    def overtaken(info: ObjectInfo, start: int, end: int) -> None:
        if start == 0 and objects.before_range is not None:
            objects.before_range = None
            other = Segments(store, objects, segment_bytes=16 * KIB, window=4 * KIB)
            assert other.hash_segment(event, _plenty).hashed == 16 * KIB  # a concurrent run writes first

    objects.before_range = overtaken
    result = segments.hash_segment(event, _plenty)
    assert result.outcome is SegmentOutcome.MORE and result.hashed == 16 * KIB  # what the other wrote
    assert store.get_hashing(event).segments == 1  # type: ignore[union-attr]
    assert _run(segments, event)[-1].digest == hashlib.sha256(data).hexdigest()


def test_a_replayed_begin_keeps_the_state() -> None:
    data = bytes(64 * KIB)
    objects, _store, segments, event = _world(data)
    segments.hash_segment(event, _plenty)
    info = ObjectInfo(BUCKET, KEY, objects.objects[(BUCKET, KEY)].etag, "v1", len(data), None, None)
    assert segments.begin(event, info).hashed == 16 * KIB


def test_an_unknown_version_and_unaligned_budgets_are_refused() -> None:
    _, store, segments, _ = _world(b"x")
    with pytest.raises(HashingUnknown) as refused:
        segments.hash_segment(f"{BUCKET}/other#v1", _plenty)
    assert refused.value.status == 404
    for options in ({"segment_bytes": 100}, {"segment_bytes": 0}, {"segment_bytes": 64, "window": 65}):
        with pytest.raises(ValueError, match="multiple of 64"):
            Segments(store, FakeObjectStore(), **options)
