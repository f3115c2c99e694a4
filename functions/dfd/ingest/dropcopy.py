"""A drop-zone object copied to its upload key across invocations (docs/design/dropzone-copies.md).

One multipart upload per object version, created once: its UploadId is kept in the version's copy item
(dfd.ingest.ports.CopyStore), conditioned on none being there, so two deliveries keep one upload (the loser aborts
its own). Each step lists the parts S3 holds (ListParts), copies the missing ones in parallel (UploadPartCopy,
CopySourceIfMatch the ETag) while the time left allows one more part at the slowest rate measured so far (before
any is measured, ASSUMED_PART_RATE), and the step that finds every part there completes the upload IfNoneMatch
"*", then deletes the s3/ object (IfMatch its ETag). A source overwritten or deleted meanwhile (412/404) aborts
the upload and ends the copy: the object's own new event follows, the pending upload ends as the inline copy
leaves it. A failed step wrote nothing S3 does not show: retried, it lists the parts again.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from dfd.core import clock
from dfd.core.copyparts import copy_part_bytes, copy_ranges
from dfd.core.errors import MultipartGone, NotFound, ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.core.ids import tenant_metadata
from dfd.ingest.ports import CopyProgress

if TYPE_CHECKING:
    from dfd.core.objects import ObjectInfo
    from dfd.ingest.ports import CopyStore, HashingStarter, PartCopies

GIB = 1024**3
# objects above it are copied by the workflow: 10 of them (an SQS batch's records run side by side) still copy
# inline within 60 % of the ingest's 840 s at 8 x ASSUMED_PART_RATE each (docs/design/dropzone-copies.md)
COPY_THRESHOLD = 64 * GIB
# bytes/s one UploadPartCopy request is assumed to copy until one is measured: the low end of what server-side part
# copies are reported to reach (tens to a few hundred MB/s per request; AWS publishes no figure)
ASSUMED_PART_RATE = 25e6
# UploadPartCopy calls in flight at once in one step (each only waits on S3): 32 x ASSUMED_PART_RATE copies the
# largest object S3 holds within a day, before the bucket's lifecycle rule aborts its multipart upload
WORKERS = 32
RESERVE_SECONDS = 30.0  # kept back at a step's end for the completion, the item's write and the answer


def execution_name(event_key: str, run: int = 0) -> str:
    """The workflow execution of a drop-zone object version: one name per event key and run (a replayed or
    re-driven event starts none other; a restart after an execution died counts a run), within 80 characters."""
    name = "c-" + hashlib.sha256(event_key.encode()).hexdigest()
    return name if run == 0 else f"{name}-{run}"


@dataclass(frozen=True)
class CopyHandoff:
    """Drop-zone objects above `threshold` bytes are copied by the copy workflow: their copy item begun (`copies`)
    and its execution started (`starter`: the input {"event_key": ...}), once per version."""

    threshold: int
    copies: DropCopies
    starter: HashingStarter


class CopyUnknown(NotFound):
    """A step named an object version with no copy item (none was begun, or it expired)."""

    code = "copy_unknown"


class CopyOutcome(StrEnum):
    MORE = "more"  # parts copied, more remain: another step follows
    DONE = "done"  # completed at the upload key (whose own event drives the ingest); the s3/ object deleted
    SUPERSEDED = "superseded"  # the source was overwritten meanwhile (412): the upload aborted
    GONE = "gone"  # the source was deleted meanwhile (404): the upload aborted


@dataclass(frozen=True)
class CopyResult:
    outcome: CopyOutcome
    copied: int  # bytes of the object in the upload's parts, after this step
    size: int
    parts: int = 0  # parts this step copied
    deleted: bool = False  # done: the s3/ object deleted (False: it had moved on already)


class DropCopies:
    """`part_bytes`: the part size of a `size`-byte object (dfd.adapters.s3.copies.copy_part_bytes; lowered in
    tests); `workers`: part copies in flight at once; `assumed_rate`: bytes/s of one part copy before one is
    measured."""

    def __init__(
        self,
        store: CopyStore,
        objects: PartCopies,
        *,
        part_bytes: Callable[[int], int] = copy_part_bytes,
        workers: int = WORKERS,
        assumed_rate: float = ASSUMED_PART_RATE,
        reserve_seconds: float = RESERVE_SECONDS,
        now: Callable[[], datetime] = clock.now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._objects = objects
        self._part_bytes = part_bytes
        self._workers = workers
        self._rate = assumed_rate
        self._reserve = reserve_seconds
        self._now = now
        self._monotonic = monotonic

    def begin(self, event_key: str, info: ObjectInfo, target: str, content_type: str, tenant: str) -> CopyProgress:
        """The version's copy item: a new one (no upload yet), or the one an earlier begin wrote."""
        first = CopyProgress(
            event_key,
            info.bucket,
            info.key,
            info.etag,
            info.size,
            target,
            content_type,
            tenant,
            self._part_bytes(info.size),
        )
        return self._store.start_copy(first, self._now())

    def restart(self, progress: CopyProgress, now: datetime) -> bool:
        """Count the next workflow execution (its last one died); False when another restart did."""
        return self._store.next_copy_run(progress, now)

    def copy_step(self, event_key: str, remaining_seconds: Callable[[], float]) -> CopyResult:
        """Copy the parts of the version `event_key` names that S3 does not hold yet, within the time
        `remaining_seconds` reports; complete the upload when every part is there."""
        progress = self._store.get_copy(event_key)
        if progress is None:
            raise CopyUnknown(f"no copy of {event_key}")
        if progress.ended is not None:  # a retry of a step whose end landed
            return self._ended(progress)
        if progress.upload_id is None:
            progress = self._create(progress)
        listed: dict[int, tuple[str, int]] = {}
        if progress.ended is None and progress.upload_id is not None:
            try:
                listed = self._objects.copied_parts(progress.bucket, progress.target, progress.upload_id)
            except MultipartGone:
                if self._objects.exists(progress.bucket, progress.target, None):  # completed before: its answer lost
                    return self._end(progress, CopyOutcome.DONE)
                # aborted (the bucket's lifecycle rule, AbortIncompleteMultipartDays): another upload, from part 1
                progress = self._create(progress)
        if progress.ended is not None:
            return self._ended(progress)
        upload_id = progress.upload_id
        assert upload_id is not None
        ranges = copy_ranges(progress.size, progress.part_bytes)
        # a part listed at another size than its range's (never written by this code) is copied again
        parts = {n: etag for n, (etag, size) in listed.items() if n <= len(ranges) and size == _length(ranges[n - 1])}
        todo = deque(spec for spec in ranges if spec[0] not in parts)
        try:
            count = self._copy_parts(progress, todo, parts, remaining_seconds)
        except ObjectChanged:
            return self._abort(progress, CopyOutcome.SUPERSEDED)
        except ObjectNotFound:
            return self._abort(progress, CopyOutcome.GONE)
        except MultipartGone as error:  # aborted while this step copied: the retried step starts another
            raise ServiceUnavailable(f"the copy of {progress.key} lost its multipart upload") from error
        copied = sum(_length(ranges[n - 1]) for n in parts)
        if len(parts) < len(ranges):
            moved = replace(progress, copied=copied, steps=progress.steps + 1)
            if not self._store.update_copy(moved, upload_id, self._now()):
                raise ServiceUnavailable(f"the copy of {progress.key} was moved on by another step")
            return CopyResult(CopyOutcome.MORE, copied, progress.size, count)
        try:
            self._objects.complete_copy(progress.bucket, progress.target, upload_id, parts)
        except (ObjectChanged, MultipartGone):
            # an object is at the target already (IfNoneMatch), or this upload completed before: the same copy
            if not self._objects.exists(progress.bucket, progress.target, None):
                raise
        done = self._end(replace(progress, copied=copied, steps=progress.steps + 1), CopyOutcome.DONE)
        return replace(done, parts=count)

    def _create(self, progress: CopyProgress) -> CopyProgress:
        """A new multipart upload at the target, kept in the item only where it names `progress.upload_id` still:
        a concurrent step's upload wins and ours is aborted."""
        upload_id = self._objects.create_copy(
            progress.bucket,
            progress.target,
            content_type=progress.content_type,
            metadata=tenant_metadata(progress.tenant),
        )
        created = replace(progress, upload_id=upload_id, uploads=progress.uploads + 1, copied=0)
        if self._store.update_copy(created, progress.upload_id, self._now()):
            return created
        self._objects.abort_copy(progress.bucket, progress.target, upload_id)
        current = self._store.get_copy(progress.event_key)
        if current is None:
            raise CopyUnknown(f"the copy of {progress.event_key} went while it was copied")
        if current.ended is None and current.upload_id == progress.upload_id:
            raise ServiceUnavailable(f"the copy of {progress.key} could not keep its multipart upload")
        return current

    def _copy_parts(
        self,
        progress: CopyProgress,
        todo: deque[tuple[int, int, int]],
        parts: dict[int, str],
        remaining_seconds: Callable[[], float],
    ) -> int:
        """Copy `todo`'s parts into `parts`, WORKERS at once, starting one only while it fits in the time left at
        the slowest part rate measured (the first always starts: every step makes progress). Raises the first
        part's failure once the parts in flight have ended."""
        assert progress.upload_id is not None
        upload_id = progress.upload_id
        rate = self._rate
        measured = False
        count = 0
        failure: Exception | None = None

        def one(spec: tuple[int, int, int]) -> tuple[str, float]:
            number, first, last = spec
            began = self._monotonic()
            etag = self._objects.copy_part(
                progress.bucket, progress.key, progress.etag, progress.target, upload_id, number, first, last
            )
            return etag, self._monotonic() - began

        with ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="dfd-partcopy") as pool:
            flying: dict[Future[tuple[str, float]], tuple[int, int, int]] = {}
            started = 0
            while True:
                while failure is None and todo and len(flying) < self._workers:
                    if started and remaining_seconds() - self._reserve < _length(todo[0]) / rate:
                        todo.clear()  # the rest is the next step's
                        break
                    spec = todo.popleft()
                    flying[pool.submit(one, spec)] = spec
                    started += 1
                if not flying:
                    break
                finished, _ = wait(flying, return_when=FIRST_COMPLETED)
                for future in finished:
                    spec = flying.pop(future)
                    try:
                        etag, seconds = future.result()
                    except Exception as error:  # the first failure is raised once the others end
                        failure = failure or error
                        continue
                    parts[spec[0]] = etag
                    count += 1
                    part_rate = _length(spec) / max(seconds, 1e-6)
                    rate = part_rate if not measured else min(rate, part_rate)
                    measured = True
        if failure is not None:
            raise failure
        return count

    def _abort(self, progress: CopyProgress, outcome: CopyOutcome) -> CopyResult:
        """The source moved on: abort the upload (its parts stop being billed) and end the copy."""
        assert progress.upload_id is not None
        self._objects.abort_copy(progress.bucket, progress.target, progress.upload_id)
        return self._end(progress, outcome)

    def _end(self, progress: CopyProgress, outcome: CopyOutcome) -> CopyResult:
        ended = replace(progress, ended=str(outcome), copied=progress.size if outcome is CopyOutcome.DONE else 0)
        if not self._store.update_copy(ended, progress.upload_id, self._now()):
            current = self._store.get_copy(progress.event_key)
            if current is None or current.ended is None:
                raise ServiceUnavailable(f"the copy of {progress.key} could not be ended")
            ended = current
        return self._ended(ended)

    def _ended(self, progress: CopyProgress) -> CopyResult:
        outcome = CopyOutcome(progress.ended or CopyOutcome.MORE)
        if outcome is not CopyOutcome.DONE:
            return CopyResult(outcome, 0, progress.size)
        # its bytes are at the upload key: the s3/ object goes (IfMatch its ETag; repeatable, as the inline move's)
        deleted = self._objects.delete(progress.bucket, progress.key, progress.etag)
        return CopyResult(outcome, progress.size, progress.size, deleted=deleted)


def _length(spec: tuple[int, int, int]) -> int:
    return spec[2] - spec[1] + 1
