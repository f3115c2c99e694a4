"""ObjectStore.stream against a fake S3 client (no moto, no network): the single stream, the probe's decision,
and the parallel ranged read — hash, bounded part buffers, error mapping, and no worker left running."""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from dfd.adapters.s3 import CHUNK, ObjectStore, ReadTuning
from dfd.adapters.s3.base import translate
from dfd.core.config import Settings
from dfd.core.errors import DfdError, ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.core.objects import ObjectInfo, OpenedObject

BUCKET, KEY, ETAG = "b", "uploads/k", '"etag-1"'
KIB = 1024
PART = 64 * KIB
PROBE = 64 * KIB
WORKERS = 3
# the first CHUNK and the probe come from the one stream, then ~23 ranges of 64 KiB (the last one short)
SIZE = CHUNK + PROBE + 23 * PART - 5 * KIB
OFFSET = CHUNK + PROBE  # where the ranges start

SLOW = "slow"  # delivers its range in small reads, yielding the CPU between them
SHORT = "short"  # ends before the range does
BOTO_MID = "boto-mid"  # a BotoCoreError (read timeout) in the middle of the range
CLIENT_MID = "client-mid"  # a ClientError (throttled) in the middle of the range
CHANGED = "412"  # the ranged GET answers 412 Precondition Failed (a newer version took the key)
MISSING = "404"  # the ranged GET answers 404 (the object was deleted)


def _client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


@dataclass
class FakeS3:
    """GetObject over one in-memory object; `plan` gives a range (by its first byte) a misbehaviour."""

    data: bytes
    plan: dict[int, str] = field(default_factory=dict)
    whole: str | None = None  # misbehaviour of the un-ranged GetObject's body (the stream the probe times)
    whole_fault_at: int | None = None  # where it misbehaves (default: half-way)
    refuse: ClientError | None = None  # what the un-ranged GetObject answers instead of a body
    ranges: list[tuple[int, int]] = field(default_factory=list)
    bodies: list[FakeBody] = field(default_factory=list)
    open_ranges: int = 0
    peak_ranges: int = 0
    reading: int = 0
    closed_for_business: bool = False  # set once stream() returned: no worker may call or read after it
    late_calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        with self.lock:
            if self.closed_for_business:
                self.late_calls += 1
        assert kwargs["Bucket"] == BUCKET and kwargs["Key"] == KEY
        if "Range" not in kwargs:
            if self.refuse is not None:
                raise self.refuse
            body = FakeBody(self, self.data, self.whole, ranged=False, fault_at=self.whole_fault_at)
            self.bodies.append(body)
            return {"Body": body, "ETag": ETAG, "ContentLength": len(self.data), "ContentType": "text/plain"}
        assert kwargs["IfMatch"] == ETAG, "a ranged GET must name the identified version"
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", kwargs["Range"])
        assert match
        start, end = int(match.group(1)), int(match.group(2)) + 1
        behaviour = self.plan.get(start)
        if behaviour == CHANGED:
            raise _client_error("PreconditionFailed", 412)
        if behaviour == MISSING:
            raise _client_error("NoSuchKey", 404)
        with self.lock:
            self.ranges.append((start, end))
            self.open_ranges += 1
            self.peak_ranges = max(self.peak_ranges, self.open_ranges)
        body = FakeBody(self, self.data[start:end], behaviour, ranged=True)
        self.bodies.append(body)
        return {"Body": body}


class FakeBody:
    def __init__(
        self, owner: FakeS3, data: bytes, behaviour: str | None, *, ranged: bool, fault_at: int | None = None
    ) -> None:
        self._owner, self._data, self._behaviour, self._ranged = owner, data, behaviour, ranged
        self._fault_at = len(data) // 2 if fault_at is None else fault_at
        self._position = 0
        self.closed = False

    def read(self, amt: int | None = None) -> bytes:
        owner = self._owner
        with owner.lock:
            if owner.closed_for_business:
                owner.late_calls += 1
            owner.reading += 1
        try:
            return self._read(amt)
        finally:
            with owner.lock:
                owner.reading -= 1

    def _read(self, amt: int | None) -> bytes:
        assert not self.closed, "read after close"
        half = self._fault_at
        if self._behaviour == SLOW:
            time.sleep(0.0005)  # slowness only: nothing asserts on time
            amt = min(amt or len(self._data), 7 * KIB)
        if self._behaviour in (SHORT, BOTO_MID, CLIENT_MID):
            if self._position >= half:
                if self._behaviour == BOTO_MID:
                    raise ReadTimeoutError(endpoint_url="https://s3.test")
                if self._behaviour == CLIENT_MID:
                    raise _client_error("SlowDown", 503)
                return b""  # SHORT: the connection ended early
            amt = min(amt or len(self._data), half - self._position)
        end = len(self._data) if amt is None else min(len(self._data), self._position + amt)
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def close(self) -> None:
        if not self.closed and self._ranged:
            with self._owner.lock:
                self._owner.open_ranges -= 1
        self.closed = True


class CountingAllocator:
    """ReadTuning.allocate: every part buffer the read allocates, with its size."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, size: int) -> bytearray:
        with self._lock:
            self.sizes.append(size)
        return bytearray(size)


def _content(size: int = SIZE) -> bytes:
    return random.Random(size).randbytes(size)


def _tuning(allocator: CountingAllocator, *, fast_stream: float = float("inf"), **changes: Any) -> ReadTuning:
    """Always ranges unless told otherwise: no stream reaches an infinite bar, whatever the clock says."""
    values: dict[str, Any] = {"threshold": PART, "part_size": PART, "workers": WORKERS, "probe_bytes": PROBE}
    values.update(changes)
    return ReadTuning(fast_stream=fast_stream, allocate=allocator, **values)


@dataclass
class Read:
    client: FakeS3
    store: ObjectStore
    allocator: CountingAllocator
    data: bytes

    def stream(self, sink: Callable[[memoryview], object] | None = None) -> tuple[str, int]:
        digest = hashlib.sha256()
        opened: OpenedObject = self.store.open(BUCKET, KEY)
        try:
            count = self.store.stream(opened, sink or digest.update)
        finally:
            opened.close()
            self.check_nothing_left_running()
        return digest.hexdigest(), count

    def check_nothing_left_running(self) -> None:
        """When stream() is back (returned or raised), no worker still reads, holds a body open or starts a GET."""
        client = self.client
        with client.lock:
            client.closed_for_business = True
            assert client.reading == 0
        assert all(body.closed for body in client.bodies)
        assert client.open_ranges == 0
        pool = self.store._pool
        if pool is not None:
            pool.shutdown(wait=True)  # anything a worker still had queued would run now ...
        assert client.late_calls == 0  # ... and would have been counted


@pytest.fixture
def read() -> Iterator[Callable[..., Read]]:
    reads: list[Read] = []

    def make(
        data: bytes | None = None,
        *,
        plan: dict[int, str] | None = None,
        whole: str | None = None,
        whole_fault_at: int | None = None,
        **tuning: Any,
    ) -> Read:
        data = _content() if data is None else data
        allocator = CountingAllocator()
        client = FakeS3(data, dict(plan or {}), whole=whole, whole_fault_at=whole_fault_at)
        made = Read(client, ObjectStore(client, tuning=_tuning(allocator, **tuning)), allocator, data)
        reads.append(made)
        return made

    yield make
    for made in reads:
        if made.store._pool is not None:
            made.store._pool.shutdown(wait=True)


def _part_starts() -> list[int]:
    return list(range(OFFSET, SIZE, PART))


# ---------------------------------------------------------------------- the probe's decision
def test_small_object_is_one_stream(read: Callable[..., Read]) -> None:
    r = read(_content(PART))
    assert r.stream() == (hashlib.sha256(r.data).hexdigest(), PART)
    assert r.client.ranges == [] and r.allocator.sizes == []


def test_one_worker_is_one_stream(read: Callable[..., Read]) -> None:
    r = read(workers=1)
    assert r.stream() == (hashlib.sha256(r.data).hexdigest(), SIZE)
    assert r.client.ranges == [] and r.allocator.sizes == []


def test_a_fast_stream_carries_on_alone(read: Callable[..., Read]) -> None:
    r = read(fast_stream=0.0)  # every stream is fast enough
    assert r.stream() == (hashlib.sha256(r.data).hexdigest(), SIZE)
    assert r.client.ranges == [] and r.allocator.sizes == []
    assert len(r.client.bodies) == 1


def test_a_slow_stream_is_joined_by_ranges(read: Callable[..., Read]) -> None:
    r = read()  # no stream is fast enough
    assert r.stream() == (hashlib.sha256(r.data).hexdigest(), SIZE)
    starts = _part_starts()
    # the open stream serves the first range; every other range is one ranged GET of the identified version
    assert sorted(r.client.ranges) == [(start, min(start + PART, SIZE)) for start in starts[1:]]
    assert len(r.client.bodies) == 1 + len(starts) - 1


def test_default_tuning_is_the_settings_defaults() -> None:
    settings = Settings(
        files_table="f", counters_table="c", uploads_table="u", events_table="e", tenant_files_table="t", bucket="b"
    )
    assert ReadTuning.from_settings(settings) == ReadTuning()
    tuned = Settings(
        files_table="f",
        counters_table="c",
        uploads_table="u",
        events_table="e",
        tenant_files_table="t",
        bucket="b",
        parallel_threshold=1,
        parallel_part_size=2 * 1024**2,
        parallel_workers=3,
    )
    tuning = ReadTuning.from_settings(tuned)
    assert (tuning.threshold, tuning.part_size, tuning.workers) == (1, 2 * 1024**2, 3)


# ---------------------------------------------------------------------- the parallel read
@pytest.mark.parametrize("slow", ["none", "all", "first", "late"])
def test_parallel_read_hashes_in_order_with_bounded_buffers(read: Callable[..., Read], slow: str) -> None:
    starts = _part_starts()
    chosen = {"none": [], "all": starts, "first": starts[1:3], "late": starts[-4:]}[slow]
    r = read(plan=dict.fromkeys(chosen, SLOW), whole=SLOW if slow == "all" else None)
    fed: list[int] = []

    def sink(view: memoryview) -> None:
        fed.append(len(view))
        digest.update(view)

    digest = hashlib.sha256()
    _, count = r.stream(sink)
    assert count == SIZE == sum(fed)
    assert digest.hexdigest() == hashlib.sha256(r.data).hexdigest()
    # in-flight memory: at most one part buffer per worker, each one part long, whatever the object's size
    assert 0 < len(r.allocator.sizes) <= WORKERS
    assert set(r.allocator.sizes) == {PART}
    assert r.client.peak_ranges <= WORKERS


def test_fewer_ranges_than_workers_allocate_fewer_buffers(read: Callable[..., Read]) -> None:
    size = OFFSET + PART + 10
    r = read(_content(size), workers=8)
    assert r.stream() == (hashlib.sha256(r.data).hexdigest(), size)
    assert r.allocator.sizes == [PART, PART]  # two ranges: two buffers, not eight


def test_the_store_reuses_its_range_pool(read: Callable[..., Read]) -> None:
    r = read()
    for _ in range(2):
        digest = hashlib.sha256()
        with r.store.open(BUCKET, KEY) as opened:
            assert r.store.stream(opened, digest.update) == SIZE
        assert digest.hexdigest() == hashlib.sha256(r.data).hexdigest()
    assert r.store._pool is not None and r.store._pool._max_workers == WORKERS


# ---------------------------------------------------------------------- errors: mapped, and nothing left running
@pytest.mark.parametrize(
    ("behaviour", "index", "expected"),
    [
        (CHANGED, 2, ObjectChanged),  # 412 on a ranged GET: a newer version took the key
        (CHANGED, -1, ObjectChanged),
        (MISSING, 3, ObjectNotFound),  # deleted under the read
        (SHORT, 1, ObjectChanged),  # a range that ends early
        (SHORT, -1, ObjectChanged),  # the last (short) range, ending earlier still
        (BOTO_MID, 2, ServiceUnavailable),  # the connection failed mid-range
        (CLIENT_MID, 4, ServiceUnavailable),  # throttled mid-range
        (SHORT, 0, ObjectChanged),  # the handed-over stream serves range 0, and ends early
        (BOTO_MID, 0, ServiceUnavailable),  # ... or fails in the middle of it
    ],
)
def test_a_failing_range_fails_the_read(
    read: Callable[..., Read], behaviour: str, index: int, expected: type[DfdError]
) -> None:
    starts = _part_starts()
    plan = dict.fromkeys(starts, SLOW)  # the other ranges are in flight when one fails
    if index == 0:  # range 0 is read from the stream the probe timed, not a ranged GET: it fails mid-range
        r = read(plan=plan, whole=behaviour, whole_fault_at=OFFSET + PART // 2)
    else:
        r = read(plan=plan | {starts[index]: behaviour})
    with pytest.raises(expected):
        r.stream()
    assert len(r.allocator.sizes) <= WORKERS


def test_whole_stream_failing_before_the_ranges(read: Callable[..., Read]) -> None:
    """The stream the probe times fails while it is timed: mapped, and no range is ever requested."""
    r = read(_content(2 * CHUNK + PROBE), whole=BOTO_MID)
    with pytest.raises(ServiceUnavailable):
        r.stream()
    assert r.client.ranges == []


def test_a_sink_that_fails_stops_the_workers(read: Callable[..., Read]) -> None:
    starts = _part_starts()
    r = read(plan=dict.fromkeys(starts, SLOW))
    seen = 0

    class Full(Exception):
        pass

    def sink(view: memoryview) -> None:
        nonlocal seen
        seen += len(view)
        if seen > OFFSET + 2 * PART:
            raise Full

    with pytest.raises(Full):
        r.stream(sink)
    assert len(r.client.ranges) < len(starts) - 1  # the remaining ranges were never requested


def test_a_get_that_fails_at_once_is_mapped(read: Callable[..., Read]) -> None:
    """The un-ranged GetObject itself (stream() of an object identified by HEAD) answering 412."""
    r = read()
    with r.store.open(BUCKET, KEY) as opened:
        info = opened.info
    r.client.refuse = _client_error("PreconditionFailed", 412)
    with pytest.raises(ObjectChanged):
        r.store.stream(OpenedObject(info, None), hashlib.sha256().update)


def test_a_conditional_write_that_raced_another_is_retryable_as_s3_asks() -> None:
    conflict = translate(_client_error("ConditionalRequestConflict", 409), "CopyObject", "uploads/x")
    assert isinstance(conflict, ServiceUnavailable)
    assert not isinstance(translate(_client_error("AccessDenied", 403), "CopyObject", "uploads/x"), ServiceUnavailable)


# ---------------------------------------------------------------------- one range of the version (a segment's read)
def _info(r: Read) -> ObjectInfo:
    return ObjectInfo(BUCKET, KEY, ETAG, None, len(r.data), None, None)


@pytest.mark.parametrize(("start", "end"), [(0, PART), (PART * 2 + 64, PART * 2 + 128), (640, PART * 7 + 640)])
def test_a_range_of_the_version_is_fed_in_order(read: Callable[..., Read], start: int, end: int) -> None:
    r = read()
    digest = hashlib.sha256()
    assert r.store.stream_range(_info(r), start, end, digest.update) == end - start
    r.check_nothing_left_running()
    assert digest.hexdigest() == hashlib.sha256(r.data[start:end]).hexdigest()
    # ranged GETs only (each IfMatch the ETag: FakeS3 asserts it), none outside the range; parallel above a part
    assert r.client.ranges and all(start <= a < b <= end for a, b in r.client.ranges)
    assert sum(b - a for a, b in r.client.ranges) == end - start
    assert (len(r.client.ranges) > 1) == (end - start > PART)


@pytest.mark.parametrize(("start", "expected"), [(0, ObjectChanged), (PART, ObjectChanged), (PART * 3, ObjectNotFound)])
def test_a_range_of_a_version_overwritten_or_deleted_is_refused(
    read: Callable[..., Read], start: int, expected: type[DfdError]
) -> None:
    r = read(plan={start: CHANGED if expected is ObjectChanged else MISSING})
    with pytest.raises(expected):
        r.store.stream_range(_info(r), 0, PART * 5, hashlib.sha256().update)
    r.check_nothing_left_running()


@dataclass
class HeadOnly:
    """HeadObject answering `response` (or raising `error`), recording what it was asked."""

    response: dict[str, Any]
    error: ClientError | None = None
    asked: list[dict[str, Any]] = field(default_factory=list)

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        self.asked.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.response


CRC_B64 = "rosUhgp5mIg="  # CRC-64/NVME's check value, 0xae8b14860a799888


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"ETag": ETAG, "ChecksumCRC64NVME": CRC_B64, "ChecksumType": "FULL_OBJECT"}, 0xAE8B14860A799888),
        ({"ETag": '"0cc175b9c0f1b6a831c399e269772661"', "ChecksumCRC64NVME": CRC_B64}, 0xAE8B14860A799888),  # no type
        ({"ETag": '"abc-3"', "ChecksumCRC64NVME": CRC_B64}, None),  # no type, a multipart's ETag
        ({"ETag": ETAG, "ChecksumCRC64NVME": CRC_B64, "ChecksumType": "COMPOSITE"}, None),
        ({"ETag": ETAG, "ChecksumSHA256": "x" * 44, "ChecksumType": "FULL_OBJECT"}, None),  # another algorithm
        ({"ETag": ETAG, "ChecksumCRC64NVME": "AAAA", "ChecksumType": "FULL_OBJECT"}, None),  # not 8 bytes
        ({"ETag": ETAG}, None),
    ],
)
def test_the_stored_crc64nvme_is_only_a_full_object_one(response: dict[str, Any], expected: int | None) -> None:
    s3 = HeadOnly(response)
    info = ObjectInfo(BUCKET, KEY, ETAG, "v7", 10, None, None)
    assert ObjectStore(s3, s3).stored_crc64nvme(info) == expected
    assert s3.asked == [{"Bucket": BUCKET, "Key": KEY, "IfMatch": ETAG, "VersionId": "v7", "ChecksumMode": "ENABLED"}]


@pytest.mark.parametrize(("code", "status", "error"), [("412", 412, ObjectChanged), ("404", 404, ObjectNotFound)])
def test_the_stored_crc64nvme_of_a_version_overwritten_or_deleted_is_refused(
    code: str, status: int, error: type[Exception]
) -> None:
    s3 = HeadOnly({}, _client_error(code, status))
    with pytest.raises(error):
        ObjectStore(s3, s3).stored_crc64nvme(ObjectInfo(BUCKET, KEY, ETAG, None, 10, None, None))
    assert "VersionId" not in s3.asked[0]
