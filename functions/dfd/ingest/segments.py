"""Hashing one object version across invocations, one segment per call (docs/design/segments.md).

A segment reads the version's state item (dfd.ingest.ports.HashingStore), resumes the SHA-256 from it, and reads
the next bytes through ranged GETs of exactly that version (IfMatch its ETag, its VersionId), in windows that are
multiples of 64 bytes, while the time left allows one more window at the rate measured so far and the segment's
byte budget lasts. When S3 stores a full-object CRC64NVME of the version (read once, by the first segment), the
same pass carries the CRC64NVME of the bytes beside the SHA-256; every byte hashed, a CRC that differs marks the
version rejected, never committed. It then writes the new state, conditioned on the offset it started from, in one
write. A failed segment wrote nothing: retried, it starts from the same state. An overwrite (412) or a delete ends
the hashing: nothing is written, the version's own events say what follows.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from dfd.core import clock
from dfd.core.errors import NotFound, ObjectChanged, ObjectNotFound
from dfd.core.objects import ObjectInfo, Sink
from dfd.ingest.ports import HashingStore, HashProgress
from dfd.ingest.sha256state import BLOCK, INITIAL, Sha256

MIB = 1024 * 1024
GIB = 1024 * MIB
# the most one segment reads: what one invocation hashes with margin (docs/performance.md, "The largest object");
# the time left stops a segment sooner when the reads are slower (SEGMENT_BYTES lowers it: the local stack's tests)
SEGMENT_BYTES = 180 * GIB
# objects above it are hashed in segments: ten of them (an SQS batch, one vCPU) still hash inline within 60 % of the
# ingest's 840 s at 400 MB/s (docs/design/segments.md, "The threshold")
HANDOFF_THRESHOLD = 16 * GIB
# one budget check's worth of reading, ~1.3 s at 400 MB/s: each window is one ObjectStore.stream_range, whose
# ranged GETs start anew (the first part's latency hashes nothing), so a window is long beside that latency; and
# short beside RESERVE_SECONDS, so that one started at the measured rate ends within the budget
WINDOW_BYTES = 512 * MIB
RESERVE_SECONDS = 30.0  # kept back at a segment's end for the state write and the answer


def execution_name(event_key: str, run: int = 0) -> str:
    """The workflow execution of a version: one name per event key and run (a replayed or duplicated event starts
    none other; a restart after an execution died counts a run), within Step Functions' 80 characters."""
    name = "h-" + hashlib.sha256(event_key.encode()).hexdigest()
    return name if run == 0 else f"{name}-{run}"


def version_info(progress: HashProgress) -> ObjectInfo:
    """The object version a hashing state pins, as its HEAD identified it (what the commit reads of it)."""
    return ObjectInfo(
        progress.bucket,
        progress.key,
        progress.etag,
        progress.version_id,
        progress.size,
        progress.content_type,
        None,
        tenant_hint=progress.tenant_hint,
    )


class SegmentReads(Protocol):
    """The reads a segment makes (dfd.core.objects.ObjectStore.stream_range, stored_crc64nvme)."""

    def stream_range(self, info: ObjectInfo, start: int, end: int, sink: Sink) -> int: ...

    def stored_crc64nvme(self, info: ObjectInfo) -> int | None: ...


class HashingUnknown(NotFound):
    """A segment named an object version with no hashing state (none was begun, or its item expired)."""

    code = "hashing_unknown"


class SegmentOutcome(StrEnum):
    MORE = "more"  # the state moved on: another segment follows
    DONE = "done"  # every byte hashed: `digest` is the version's SHA-256
    SUPERSEDED = "superseded"  # the version was overwritten while hashed (412): never committed
    GONE = "gone"  # the version was deleted while hashed


@dataclass(frozen=True)
class SegmentResult:
    outcome: SegmentOutcome
    hashed: int  # bytes of the version hashed, after this segment
    size: int
    digest: str | None = None
    read: int = 0  # bytes this segment read
    version: ObjectInfo | None = None  # done: the version hashed, as its commit takes it
    # done: the CRC64NVME of every byte is not the one S3 stored (the version is rejected, never committed)
    crc64nvme_mismatch: bool = False


def finished(progress: HashProgress, read: int = 0) -> SegmentResult:
    """The answer for a version every byte of which is hashed (its digest in the state)."""
    assert progress.digest is not None
    return SegmentResult(
        SegmentOutcome.DONE,
        progress.size,
        progress.size,
        progress.digest,
        read,
        version_info(progress),
        progress.crc64nvme_mismatch,
    )


class _Feed:
    """What a segment's reads feed, in order: the SHA-256, and beside it the CRC64NVME when the version has one
    stored to compare (`crc`: the CRC of the bytes fed so far)."""

    def __init__(self, digest: Sha256, crc: int | None) -> None:
        self.digest = digest
        self.crc = crc
        if crc is not None:
            from dfd.ingest.crc64nvme import update

            self._update = update

    def __call__(self, chunk: memoryview) -> None:
        self.digest.update(chunk)
        if self.crc is not None:
            self.crc = self._update(chunk, self.crc)


class Segments:
    """`segment_bytes`: the most one segment reads (a multiple of 64; lowered to make a small object take many
    segments); `window`: the bytes read between two looks at the clock (a multiple of 64)."""

    def __init__(
        self,
        store: HashingStore,
        objects: SegmentReads,
        *,
        segment_bytes: int,
        window: int = WINDOW_BYTES,
        reserve_seconds: float = RESERVE_SECONDS,
        now: Callable[[], datetime] = clock.now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("segment_bytes", segment_bytes), ("window", window)):
            if value <= 0 or value % BLOCK:
                raise ValueError(f"{name} must be a positive multiple of {BLOCK}, got {value}")
        self._store = store
        self._objects = objects
        self._segment_bytes = segment_bytes
        self._window = min(window, segment_bytes)
        self._reserve = reserve_seconds
        self._now = now
        self._monotonic = monotonic

    def begin(self, event_key: str, info: ObjectInfo) -> HashProgress:
        """The version's state: a new one at 0 bytes, or the one an earlier begin (a replayed event) wrote."""
        first = HashProgress(
            event_key,
            info.bucket,
            info.key,
            info.etag,
            info.version_id,
            info.size,
            INITIAL,
            content_type=info.content_type,
            tenant_hint=info.tenant_hint,
        )
        return self._store.start_hashing(first, self._now())

    def restart(self, progress: HashProgress, now: datetime) -> bool:
        """Count the next workflow execution of the version (its last one died); False when another restart did."""
        return self._store.next_run(progress, now)

    def hash_segment(self, event_key: str, remaining_seconds: Callable[[], float]) -> SegmentResult:
        """Hash the next segment of the version `event_key` names, within the time `remaining_seconds` reports."""
        progress = self._store.get_hashing(event_key)
        if progress is None:
            raise HashingUnknown(f"no hashing state for {event_key}")
        if progress.digest is not None:  # a retry of the last segment, whose write landed
            return finished(progress)
        info = ObjectInfo(progress.bucket, progress.key, progress.etag, progress.version_id, progress.size, None, None)
        digest = Sha256(progress.state)
        start = offset = progress.state.length
        stored, crc = progress.stored_crc64nvme, progress.crc64nvme
        if start == 0:  # the first segment reads S3's checksum of the version, once
            try:
                stored = self._objects.stored_crc64nvme(info)
            except ObjectChanged:
                return SegmentResult(SegmentOutcome.SUPERSEDED, 0, progress.size)
            except ObjectNotFound:
                return SegmentResult(SegmentOutcome.GONE, 0, progress.size)
            crc = None if stored is None else 0  # the CRC of no bytes
        feed = _Feed(digest, crc)
        began = self._monotonic()
        while offset < progress.size:
            # a multiple of 64 unless it reaches the end: every cut is at a block boundary
            step = min(self._window, progress.size - offset, self._segment_bytes - (offset - start))
            if step <= 0:
                break
            if offset > start:  # the first window always runs: every segment makes progress
                rate = (offset - start) / max(self._monotonic() - began, 1e-6)
                if remaining_seconds() - self._reserve < step / rate:
                    break
            try:
                fed = self._objects.stream_range(info, offset, offset + step, feed)
            except ObjectChanged:
                return SegmentResult(SegmentOutcome.SUPERSEDED, offset, progress.size, read=offset - start)
            except ObjectNotFound:
                return SegmentResult(SegmentOutcome.GONE, offset, progress.size, read=offset - start)
            if fed != step:  # a range shorter than asked: the version is not the one identified
                return SegmentResult(SegmentOutcome.SUPERSEDED, offset, progress.size, read=offset - start)
            offset += step
        carried = replace(progress, segments=progress.segments + 1, stored_crc64nvme=stored, crc64nvme=feed.crc)
        if offset == progress.size:
            advanced = replace(carried, digest=digest.hexdigest())
        else:
            advanced = replace(carried, state=digest.state())
        if not self._store.advance_hashing(advanced, start, self._now()):
            # another run of this segment wrote first (a retry overlapping its attempt): follow what it wrote
            current = self._store.get_hashing(event_key)
            if current is None:
                raise HashingUnknown(f"the hashing state of {event_key} went while it was hashed")
            advanced = current
        if advanced.digest is not None:
            return finished(advanced, offset - start)
        return SegmentResult(SegmentOutcome.MORE, advanced.hashed, advanced.size, read=offset - start)
