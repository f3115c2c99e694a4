"""The ingest's hand-off of a large object to the segment workflow (Ingestor with a Handoff): above the threshold
the state is begun and ONE execution started per version (named by its event key: a replayed event starts none
other); at or under it the object takes the inline path with the same calls as without a hand-off; a version the
workflow hashed already is committed by the same decision (a replay once committed). The Step Functions adapter
answers ExecutionAlreadyExists as False."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dfd.adapters.stepfunctions import SegmentWorkflow
from dfd.core.errors import ServiceUnavailable
from dfd.ingest.segments import SegmentOutcome, Segments, execution_name
from dfd.ingest.service import Handoff, Outcome
from tests.unit.fakes.hashing import FakeHashingStore
from tests.unit.ingest_world import BUCKET, World, expect, sha

KIB = 1024


@dataclass
class FakeStarter:
    """Step Functions' names: one execution per name, ever."""

    started: dict[str, str] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)  # executions that failed, timed out or were aborted

    def start_hashing(self, name: str, event_key: str) -> bool:
        if name in self.started:
            return False
        self.started[name] = event_key
        return True

    def died(self, name: str) -> bool:
        return name in self.dead


def _world(threshold: int = 8 * KIB) -> tuple[World, Handoff, FakeStarter, FakeHashingStore]:
    world, store, starter = World(), FakeHashingStore(), FakeStarter()
    handoff = Handoff(threshold, Segments(store, world.objects, segment_bytes=4 * KIB, window=KIB), starter)
    return world, handoff, starter, store


def test_an_object_above_the_threshold_is_handed_off_once() -> None:
    world, handoff, starter, store = _world()
    data = random.Random(1).randbytes(8 * KIB + 1)
    key = world.upload(data, "big.bin")
    first = world.ingest(key, handoff=handoff)
    expect(first, Outcome.HASHING)
    assert first.event_key is not None and first.detail["started"] is True
    assert starter.started == {execution_name(first.event_key): first.event_key}
    assert not world.repo.files and world.objects.streams == 0  # nothing hashed inline, nothing committed
    again = world.ingest(key, handoff=handoff)  # the same event delivered twice
    expect(again, Outcome.HASHING)
    assert again.detail["started"] is False and len(starter.started) == 1 and store.writes == 1
    # the workflow runs to its end: hashed in segments, committed once
    while (segment := handoff.segments.hash_segment(first.event_key, lambda: 900.0)).outcome is SegmentOutcome.MORE:
        pass
    assert segment.version is not None and segment.digest == sha(data)
    expect(world.ingestor().commit_hashed(segment.version, segment.digest), Outcome.STORED)
    # a replay after the end: no execution, no hashing: the same decision answers replay
    late = world.ingest(key, handoff=handoff)
    expect(late, Outcome.REPLAY)
    assert len(starter.started) == 1 and world.totals()["total_uploads"] == 1
    world.assert_invariants()


def test_the_digest_of_a_workflow_that_died_before_its_commit_is_committed_by_the_replay() -> None:
    world, handoff, _, _ = _world()
    data = random.Random(2).randbytes(9 * KIB)
    key = world.upload(data, "big.bin")
    event = world.ingest(key, handoff=handoff).event_key
    assert event is not None
    while handoff.segments.hash_segment(event, lambda: 900.0).outcome is SegmentOutcome.MORE:
        pass
    # the last segment's commit never ran (its execution failed after the state write): the event's re-delivery commits
    expect(world.ingest(key, handoff=handoff), Outcome.STORED)
    assert list(world.repo.files) == [sha(data)]
    world.assert_invariants()


def test_a_digest_whose_crc64nvme_mismatched_is_rejected_by_the_replay_not_committed() -> None:
    from dfd.ingest import crc64nvme

    world, handoff, _, _ = _world()
    data = random.Random(3).randbytes(9 * KIB)
    key = world.upload(data, "big.bin")
    world.objects.objects[(BUCKET, key)].crc64nvme = crc64nvme.update(data) ^ (1 << 63)
    event = world.ingest(key, handoff=handoff).event_key
    assert event is not None
    while handoff.segments.hash_segment(event, lambda: 900.0).outcome is SegmentOutcome.MORE:
        pass
    # the last segment's rejection never ran: the event's re-delivery finds the digest and rejects it
    again = world.ingest(key, handoff=handoff)
    expect(again, Outcome.REJECTED)
    assert again.detail["reason"] == "crc64nvme_mismatch" and again.deleted
    assert not world.repo.files and world.totals()["total_uploads"] == 0
    world.assert_invariants()


def test_an_object_at_the_threshold_takes_the_inline_path_unchanged() -> None:
    data = random.Random(3).randbytes(8 * KIB)
    calls = []
    for with_handoff in (False, True):
        world, handoff, starter, store = _world()
        key = world.upload(data, "edge.bin")
        result = world.ingest(key, handoff=handoff) if with_handoff else world.ingest(key)
        expect(result, Outcome.STORED)
        calls.append((world.objects.streams, len(world.objects.ranges), dict(world.totals())))
        assert not starter.started and not store.items
    assert calls[0] == calls[1]


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "StartExecution")


class FakeSfn:
    def __init__(self, answer: ClientError | None = None) -> None:
        self.answer, self.calls = answer, []  # type: ignore[var-annotated]

    def start_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.answer is not None:
            raise self.answer
        return {"executionArn": "arn"}


def test_the_adapter_starts_one_named_execution_and_reads_already_exists_as_false() -> None:
    sfn = FakeSfn()
    assert SegmentWorkflow(sfn, "arn:sm").start_hashing("h-1", "b/k#v")
    assert sfn.calls == [{"stateMachineArn": "arn:sm", "name": "h-1", "input": '{"event_key": "b/k#v"}'}]
    assert not SegmentWorkflow(FakeSfn(_client_error("ExecutionAlreadyExists")), "arn:sm").start_hashing("h", "e")
    with pytest.raises(ServiceUnavailable):
        SegmentWorkflow(FakeSfn(_client_error("ThrottlingException")), "arn:sm").start_hashing("h", "e")


def test_an_execution_name_is_one_per_event_key_and_run_within_step_functions_rules() -> None:
    name = execution_name("bucket/uploads/" + "a" * 900 + "#v1")
    assert (
        len(name) <= 80
        and name.replace("-", "").isalnum()
        and name == execution_name("bucket/uploads/" + "a" * 900 + "#v1")
    )
    assert name != execution_name("bucket/uploads/x#v2")
    runs = {execution_name("b/k#v", run) for run in range(100)}
    assert len(runs) == 100 and max(len(n) for n in runs | {execution_name("b/k#v", 10**9)}) <= 80


def test_the_hand_off_is_wired_only_with_the_workflow_s_arn(monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd import deps
    from dfd.ingest.segments import HANDOFF_THRESHOLD

    monkeypatch.delenv("SEGMENT_STATE_MACHINE_ARN", raising=False)
    assert deps.handoff() is None
    monkeypatch.setenv("SEGMENT_STATE_MACHINE_ARN", "arn:aws:states:us-east-1:123456789012:stateMachine:s")
    monkeypatch.delenv("SEGMENT_THRESHOLD_BYTES", raising=False)
    wired = deps.handoff()
    assert wired is not None and wired.threshold == HANDOFF_THRESHOLD == 16 * 1024**3
    monkeypatch.setenv("SEGMENT_THRESHOLD_BYTES", "1048576")
    assert deps.handoff().threshold == 1048576  # type: ignore[union-attr]


def test_metadata_shows_the_progress_of_a_pending_upload_above_the_threshold_only() -> None:
    from dfd.queries.service import Queries
    from tests.support import ALICE

    world, handoff, _, store = _world()
    reads: list[tuple[str, str]] = []

    class Counted:
        def hashing_of_key(self, bucket: str, key: str) -> Any:
            reads.append((bucket, key))
            return store.hashing_of_key(bucket, key)

    queries = Queries(world.settings, world.repo, progress=(8 * KIB, Counted()))
    small, big = world.upload(b"s" * (8 * KIB), "small.bin"), world.upload(b"b" * (12 * KIB), "big.bin")
    small_id, big_id = small.rsplit("/", 1)[1], big.rsplit("/", 1)[1]
    assert "hashing" not in queries.metadata(small_id, ALICE.caller) and reads == []  # at the threshold: no read
    assert "hashing" not in queries.metadata(big_id, ALICE.caller)  # above it, before the hand-off: nothing shown
    event = world.ingest(big, handoff=handoff).event_key
    assert event is not None
    handoff.segments.hash_segment(event, lambda: 900.0)
    assert queries.metadata(big_id, ALICE.caller)["hashing"] == {"hashed_bytes": 4 * KIB, "total_bytes": 12 * KIB}
    while handoff.segments.hash_segment(event, lambda: 900.0).outcome is SegmentOutcome.MORE:
        pass
    assert "hashing" not in queries.metadata(big_id, ALICE.caller)  # every byte hashed: no progress to show
    assert reads == [(world.settings.bucket, big)] * 3


def test_a_redelivered_event_restarts_an_execution_that_died_from_the_stored_state() -> None:
    world, handoff, starter, store = _world()
    data = random.Random(4).randbytes(20 * KIB)
    key = world.upload(data, "big.bin")
    event = world.ingest(key, handoff=handoff).event_key
    assert event is not None
    handoff.segments.hash_segment(event, lambda: 900.0)  # one segment, then every retry of the next failed
    starter.dead.add(execution_name(event))
    again = world.ingest(key, handoff=handoff)  # the reconcile's re-drive of the pending upload
    expect(again, Outcome.HASHING)
    assert again.detail["restarted"] is True and again.detail["execution"] == execution_name(event, 1)
    assert again.detail["hashed"] == 4 * KIB  # it goes on from the stored state
    assert list(starter.started) == [execution_name(event), execution_name(event, 1)]
    assert world.ingest(key, handoff=handoff).detail["started"] is False  # the new run is alive: nothing more
    assert len(starter.started) == 2 and store.get_hashing(event).run == 1  # type: ignore[union-attr]
    while (segment := handoff.segments.hash_segment(event, lambda: 900.0)).outcome is SegmentOutcome.MORE:
        pass
    assert segment.version is not None and segment.digest == sha(data)
    expect(world.ingestor().commit_hashed(segment.version, segment.digest), Outcome.STORED)
    world.assert_invariants()


def test_the_adapter_reads_an_execution_s_end() -> None:
    class Described(FakeSfn):
        def __init__(self, status: str) -> None:
            super().__init__()
            self.status = status

        def describe_execution(self, **kwargs: Any) -> dict[str, Any]:
            self.calls.append(kwargs)
            return {"status": self.status}

    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:dfd-segments"
    for status, died in (("RUNNING", False), ("SUCCEEDED", False), ("FAILED", True), ("TIMED_OUT", True)):
        sfn = Described(status)
        assert SegmentWorkflow(sfn, arn).died("h-1") is died
        assert sfn.calls == [{"executionArn": "arn:aws:states:us-east-1:123456789012:execution:dfd-segments:h-1"}]


def test_the_reconcile_leaves_an_upload_being_hashed_and_redrives_a_stale_one() -> None:
    from dfd.core import clock
    from dfd.core.notifications import ObjectRef
    from dfd.ingest.service import Ingestor
    from dfd.reconcile.service import HASHING_STALE_SECONDS, Reconciler
    from tests.unit.fakes import FakeIngestQueue, run_reconcile
    from tests.unit.ingest_world import NOW

    world, _, starter, store = _world()
    handoff = Handoff(
        8 * KIB, Segments(store, world.objects, segment_bytes=4 * KIB, window=KIB, now=lambda: NOW), starter
    )
    reads: list[str] = []

    class Counted:
        def hashing_of_key(self, bucket: str, key: str) -> Any:
            reads.append(key)
            return store.hashing_of_key(bucket, key)

    queue = FakeIngestQueue()
    reconciler = Reconciler(world.settings, world.repo, world.objects, queue, workers=1, hashing=(8 * KIB, Counted()))
    big, small = world.upload(b"b" * (12 * KIB), "big.bin"), world.upload(b"s" * KIB, "small.bin")
    ingestor = Ingestor(world.settings, world.repo, world.objects, now=lambda: NOW, handoff=handoff)
    assert ingestor.ingest(ObjectRef(world.settings.bucket, big)).outcome == Outcome.HASHING
    handoff.segments.hash_segment(starter.started[next(iter(starter.started))], lambda: 900.0)
    # half an hour later (past the grace period): the small one's notification was lost, the big one is hashing
    soon = clock.iso(clock.plus(NOW, seconds=1800))
    summary = run_reconcile(reconciler, now=soon)
    assert summary["redriven"] == 1 and summary["failed"] == 0 and reads == [big]
    assert "redrives" not in world.repo.uploads[big.rsplit("/", 1)[1]]  # not counted towards failing it
    # no state landed for longer than HASHING_STALE_SECONDS: re-driven (the hand-off restarts a dead execution)
    later = clock.iso(clock.plus(NOW, seconds=HASHING_STALE_SECONDS + 60))
    summary = run_reconcile(reconciler, now=later)
    assert summary["redriven"] == 2 and world.repo.uploads[big.rsplit("/", 1)[1]]["redrives"] == 1
    assert small  # its upload is re-driven every run until ingested
