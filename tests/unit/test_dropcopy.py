"""A drop-zone object copied to its upload key across invocations (dfd.ingest.dropcopy) on the fakes: the part size
keeps any object S3 holds within 10,000 parts; above the threshold the drop zone hands the object to the copy
workflow once per version; a step copies what ListParts does not show while its time allows and resumes from it;
two deliveries keep one multipart upload; a source that moved on aborts it; the last step completes the copy,
whose own event is then ingested as any upload's."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfd.core.copyparts import COPY_PART, COPY_PART_MAX, copy_part_bytes, copy_ranges
from dfd.core.ids import tenant_metadata
from dfd.core.records import UploadStatus
from dfd.identity.s3access import prefix_for
from dfd.ingest.dropcopy import CopyHandoff, CopyOutcome, CopyUnknown, DropCopies, execution_name
from dfd.ingest.dropzone import COPY_PENDING_SECONDS, PENDING_SECONDS
from dfd.ingest.service import Outcome
from tests.support import ALICE
from tests.unit.fakes.copies import FakeCopyStore
from tests.unit.ingest_world import BUCKET, NOW, World, expect, sha

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TIB = 1024 * GIB
S3_LARGEST = 10_000 * 5 * GIB  # 48.8 TiB: 10,000 parts of 5 GiB
PART = KIB  # the tests' part size
THRESHOLD = KIB


@dataclass
class FakeStarter:
    """Step Functions' names: one execution per name, ever."""

    started: dict[str, str] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)

    def start_hashing(self, name: str, event_key: str) -> bool:
        if name in self.started:
            return False
        self.started[name] = event_key
        return True

    def died(self, name: str) -> bool:
        return name in self.dead


@dataclass
class Clock:
    """The step's time: each part copy takes `per_part` seconds of it."""

    t: float = 0.0
    per_part: float = 1.0

    def monotonic(self) -> float:
        return self.t

    def part(self, number: int) -> None:
        self.t += self.per_part


@dataclass
class Rig:
    world: World
    store: FakeCopyStore
    starter: FakeStarter
    copies: DropCopies
    clock: Clock

    def handoff(self) -> CopyHandoff:
        return CopyHandoff(THRESHOLD, self.copies, self.starter)

    def drop(self, data: bytes, name: str = "big.bin") -> str:
        key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + name
        self.world.objects.put(BUCKET, key, data, content_type="video/mp4")
        return key

    def step(self, event_key: str, seconds: float = 900.0) -> CopyOutcome:
        """One invocation of CopyFunction with `seconds` left when it starts."""
        start = self.clock.t
        return self.copies.copy_step(event_key, lambda: seconds - (self.clock.t - start)).outcome


def rig(*, workers: int = 1) -> Rig:
    world, store, starter, clock = World(), FakeCopyStore(), FakeStarter(), Clock()
    world.objects.min_part = 1  # the tests' parts are 1 KiB (S3's smallest is 5 MiB: the integration test's)
    world.objects.before_part_copy = clock.part
    copies = DropCopies(
        store,
        world.objects,
        part_bytes=lambda size: PART,
        workers=workers,
        assumed_rate=PART / 1.0,  # a part a second until one is measured
        reserve_seconds=0.0,
        now=lambda: NOW,
        monotonic=clock.monotonic,
    )
    return Rig(world, store, starter, copies, clock)


def handed_off(r: Rig, key: str) -> str:
    """The drop's event: handed to the copy workflow; the execution's event key."""
    result = r.world.ingest(key, copies=r.handoff())
    expect(result, Outcome.COPYING)
    assert result.detail["started"] is True
    (event_key,) = r.starter.started.values()
    return event_key


# ---------------------------------------------------------------- the part size


@pytest.mark.parametrize(
    ("size", "part", "parts"),
    [
        (5 * GIB + 1, COPY_PART, 11),
        (10_000 * COPY_PART, COPY_PART, 10_000),
        (10_000 * COPY_PART + 1, COPY_PART + MIB, 9_981),
        (5 * TIB + 1, 525 * MIB, 9_987),
        (S3_LARGEST, 5 * GIB, 10_000),
    ],
)
def test_the_part_size_keeps_any_object_within_10000_parts(size: int, part: int, parts: int) -> None:
    assert copy_part_bytes(size) == part
    ranges = copy_ranges(size, part)
    assert len(ranges) == parts <= 10_000
    assert ranges[0][1] == 0 and ranges[-1][2] == size - 1
    assert all(a[2] + 1 == b[1] for a, b in itertools.pairwise(ranges))


def test_an_object_larger_than_s3_holds_has_no_part_size() -> None:
    with pytest.raises(ValueError, match="10,000 parts of 5 GiB"):
        copy_part_bytes(S3_LARGEST + 1)


@given(st.integers(min_value=1, max_value=S3_LARGEST))
def test_every_size_s3_holds_takes_at_most_10000_parts_of_5_mib_to_5_gib(size: int) -> None:
    part = copy_part_bytes(size)
    assert 5 * MIB <= part <= COPY_PART_MAX and part % MIB == 0
    assert -(-size // part) <= 10_000


# ---------------------------------------------------------------- the hand-off


def test_at_or_under_the_threshold_the_copy_is_inline_as_without_the_workflow() -> None:
    r = rig()
    key = r.drop(b"s" * THRESHOLD)
    moved = r.world.ingest(key, copies=r.handoff())
    expect(moved, Outcome.MOVED)
    assert r.starter.started == {} and r.store.items == {} and r.world.objects.copies == 1
    upload = r.world.repo.get_upload(moved.upload_id or "")
    assert upload is not None and upload.expires_at == (NOW + timedelta(seconds=PENDING_SECONDS)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def test_above_it_one_execution_per_version_however_often_its_event_comes() -> None:
    r = rig()
    key = r.drop(random.Random(1).randbytes(THRESHOLD + 1))
    event_key = handed_off(r, key)
    assert r.starter.started == {execution_name(event_key): event_key}
    for _ in range(2):  # delivered again, re-driven by the sweep
        again = r.world.ingest(key, copies=r.handoff())
        expect(again, Outcome.COPYING)
        assert again.detail["started"] is False
    assert len(r.starter.started) == 1 and r.store.writes == 1
    assert r.world.objects.copies == 0 and not r.world.objects.part_copies  # nothing copied inline
    (upload_id,) = r.world.repo.uploads
    upload = r.world.repo.get_upload(upload_id)
    # pending as long as its s3/ object lives: a copy of hours is not expired by the reconcile meanwhile
    assert upload is not None and upload.status == UploadStatus.PENDING
    assert upload.expires_at == (NOW + timedelta(seconds=COPY_PENDING_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_execution_that_died_is_restarted_once_by_the_next_delivery() -> None:
    r = rig()
    key = r.drop(random.Random(2).randbytes(THRESHOLD + 1))
    event_key = handed_off(r, key)
    r.starter.dead.add(execution_name(event_key))
    for _ in range(2):
        r.world.ingest(key, copies=r.handoff())
    assert set(r.starter.started) == {execution_name(event_key), execution_name(event_key, 1)}
    progress = r.store.get_copy(event_key)
    assert progress is not None and progress.run == 1


# ---------------------------------------------------------------- the steps


def test_steps_resume_from_the_parts_s3_holds_within_their_time_and_the_last_completes() -> None:
    r = rig()
    data = random.Random(3).randbytes(10 * PART + 7)  # 11 parts
    key = r.drop(data)
    event_key = handed_off(r, key)
    # each step has 3.5 s and a part takes 1 s: three parts a step, never one twice
    outcomes = [r.step(event_key, 3.5) for _ in range(4)]
    assert outcomes == [CopyOutcome.MORE] * 3 + [CopyOutcome.DONE]
    numbers = [n for _, n in r.world.objects.part_copies]
    assert sorted(numbers) == list(range(1, 12)) and len(r.world.objects.multiparts) == 0
    target = r.world.objects.objects[(BUCKET, f"uploads/{next(iter(r.world.repo.uploads))}")]
    assert target.data == data and target.content_type == "video/mp4"
    assert target.metadata == tenant_metadata(ALICE.caller.tenant)  # the ingest's tenant hint
    assert (BUCKET, key) not in r.world.objects.objects  # the s3/ object deleted by the last step
    progress = r.store.get_copy(event_key)
    assert progress is not None and progress.ended == "done" and progress.steps == 4 and progress.uploads == 1
    # the copy's own event is the ingest of any upload
    (upload_id,) = r.world.repo.uploads
    stored = r.world.ingest(f"uploads/{upload_id}")
    expect(stored, Outcome.STORED)
    assert stored.hash == sha(data)
    assert r.step(event_key) is CopyOutcome.DONE  # a retried last step: nothing copied again
    assert len(r.world.objects.part_copies) == 11
    r.world.assert_invariants()


def test_a_step_copies_in_parallel_and_always_makes_progress() -> None:
    r = rig(workers=4)
    r.clock.per_part = 0.0  # measured instantly: the assumed rate then never stops a step
    data = random.Random(4).randbytes(9 * PART)
    event_key = handed_off(r, r.drop(data))
    assert r.step(event_key, 0.0) is CopyOutcome.MORE  # no time at all: the first part still runs
    assert len(r.world.objects.part_copies) == 1
    assert r.step(event_key) is CopyOutcome.DONE
    assert len(r.world.objects.part_copies) == 9


def test_two_deliveries_racing_keep_one_multipart_upload() -> None:
    r = rig()
    data = random.Random(5).randbytes(3 * PART)
    event_key = handed_off(r, r.drop(data))
    create = r.world.objects.create_copy
    raced: list[str] = []

    def racing_create(bucket: str, target_key: str, *, content_type: str, metadata: dict[str, str]) -> str:
        if not raced:  # another step creates and keeps its upload first, and copies one part
            raced.append("x")
            assert r.step(event_key, 0.5) is CopyOutcome.MORE
        return create(bucket, target_key, content_type=content_type, metadata=metadata)

    r.world.objects.create_copy = racing_create  # type: ignore[method-assign]
    assert r.step(event_key) is CopyOutcome.DONE
    assert len(r.world.objects.aborted) == 1  # the loser's own upload, empty
    progress = r.store.get_copy(event_key)
    assert progress is not None and progress.uploads == 1
    assert [n for _, n in r.world.objects.part_copies] == [1, 2, 3]  # the winner's part 1 kept
    assert r.world.objects.objects[(BUCKET, progress.target)].data == data


@pytest.mark.parametrize("change", ["overwrite", "delete"])
def test_a_source_that_moved_on_aborts_the_upload_and_ends_the_copy(change: str) -> None:
    r = rig()
    key = r.drop(random.Random(6).randbytes(6 * PART))
    event_key = handed_off(r, key)
    assert r.step(event_key, 2.5) is CopyOutcome.MORE
    if change == "overwrite":
        r.drop(b"other bytes" * PART)
    else:
        del r.world.objects.objects[(BUCKET, key)]
    expected = CopyOutcome.SUPERSEDED if change == "overwrite" else CopyOutcome.GONE
    assert r.step(event_key) is expected
    assert r.world.objects.multiparts == {} and len(r.world.objects.aborted) == 1  # its parts stop being billed
    progress = r.store.get_copy(event_key)
    assert progress is not None and progress.ended == str(expected)
    copied = len(r.world.objects.part_copies)
    assert r.step(event_key) is expected and len(r.world.objects.part_copies) == copied  # a retry copies nothing
    (upload_id,) = r.world.repo.uploads  # left pending, as the inline copy leaves it: the reconcile expires it
    upload = r.world.repo.get_upload(upload_id)
    assert upload is not None and upload.status == UploadStatus.PENDING
    assert (BUCKET, f"uploads/{upload_id}") not in r.world.objects.objects
    if change == "overwrite":  # the new version's own event: a new upload, handed off anew
        expect(r.world.ingest(key, copies=r.handoff()), Outcome.COPYING)
        assert len(r.world.repo.uploads) == 2 and len(r.starter.started) == 2


def test_a_source_overwritten_during_a_step_aborts_once_its_parts_in_flight_ended() -> None:
    r = rig(workers=3)
    r.clock.per_part = 0.0
    key = r.drop(random.Random(7).randbytes(6 * PART))
    event_key = handed_off(r, key)

    def overwrite(number: int) -> None:
        if number == 2:
            r.drop(b"newer")

    r.world.objects.before_part_copy = overwrite
    assert r.step(event_key) is CopyOutcome.SUPERSEDED
    assert r.world.objects.multiparts == {} and len(r.world.objects.aborted) == 1


def test_an_upload_the_lifecycle_rule_aborted_is_begun_again() -> None:
    r = rig()
    data = random.Random(8).randbytes(4 * PART)
    event_key = handed_off(r, r.drop(data))
    assert r.step(event_key, 1.5) is CopyOutcome.MORE
    r.world.objects.multiparts.clear()  # AbortIncompleteMultipartUpload: S3 answers NoSuchUpload
    assert r.step(event_key) is CopyOutcome.DONE
    progress = r.store.get_copy(event_key)
    assert progress is not None and progress.uploads == 2
    assert r.world.objects.objects[(BUCKET, progress.target)].data == data


def test_a_completion_whose_answer_was_lost_is_done() -> None:
    r = rig()
    data = random.Random(9).randbytes(2 * PART)
    key = r.drop(data)
    event_key = handed_off(r, key)
    complete = r.world.objects.complete_copy

    def lost(bucket: str, target_key: str, upload_id: str, parts: dict[int, str]) -> None:
        complete(bucket, target_key, upload_id, parts)
        raise ConnectionError("the answer never came")

    r.world.objects.complete_copy = lost  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        r.step(event_key)
    r.world.objects.complete_copy = complete  # type: ignore[method-assign]
    assert r.step(event_key) is CopyOutcome.DONE  # NoSuchUpload, and the object at the target: done
    assert (BUCKET, key) not in r.world.objects.objects


def test_a_drop_event_after_the_copy_landed_moves_nothing_again() -> None:
    r = rig()
    data = random.Random(10).randbytes(2 * PART)
    key = r.drop(data)
    event_key = handed_off(r, key)
    progress = r.store.get_copy(event_key)
    assert progress is not None
    kept = r.world.objects.objects[(BUCKET, key)]
    assert r.step(event_key) is CopyOutcome.DONE
    r.world.objects.objects[(BUCKET, key)] = kept  # the delete lost: the s3/ object back as it was
    again = r.world.ingest(key, copies=r.handoff())
    expect(again, Outcome.MOVED)
    assert again.deleted and len(r.starter.started) == 1


def test_a_step_without_a_copy_item_is_refused() -> None:
    with pytest.raises(CopyUnknown):
        rig().step("bucket/s3/none#etag")
