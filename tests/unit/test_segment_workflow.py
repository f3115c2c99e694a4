"""statemachine/segments.asl.json and SegmentFunction (dfd.handlers.segment): valid ASL that loops one segment per
invocation while the answer is `more`, retrying a failed segment (from its input state) but never a payload that is
not its own; the function's loop, as the workflow runs it, hashes a version in many segments and commits it once
through the ingest's decision."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dfd import deps
from dfd.core.ids import event_key, version_token
from dfd.ingest.segments import Segments
from dfd.ingest.service import Outcome
from tests.unit.fakes.hashing import FakeHashingStore
from tests.unit.ingest_world import BUCKET, World, sha

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachine" / "segments.asl.json"
KIB = 1024


def _definition() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8"))
    return found


def test_the_definition_is_valid_asl() -> None:
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "statelint"), str(ASL)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_loops_segments_until_an_answer_other_than_more() -> None:
    states = _definition()["States"]
    segment, choice = states["Segment"], states["More?"]
    assert segment["Parameters"] == {"FunctionName": "${SegmentFunctionArn}", "Payload": {"event_key.$": "$.event_key"}}
    assert segment["OutputPath"] == "$.Payload" and segment["Next"] == "More?"
    assert choice["Choices"] == [{"Variable": "$.outcome", "StringEquals": "more", "Next": "Segment"}]
    assert states[choice["Default"]]["Type"] == "Succeed"
    never, every = segment["Retry"]
    assert never["MaxAttempts"] == 0 and set(never["ErrorEquals"]) == {
        "SegmentInputError",
        "HashingUnknown",
        "Sha256Unavailable",
        "Crc64Unavailable",
    }
    assert every["ErrorEquals"] == ["States.ALL"] and every["MaxAttempts"] >= 3


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[World, FakeHashingStore]:
    import dfd.handlers.segment  # noqa: F401  (its init, with the fakes below in place of the AWS adapters)

    world, store = World(), FakeHashingStore()
    segments = Segments(store, world.objects, segment_bytes=4 * KIB, window=KIB)
    monkeypatch.setattr(deps, "segments", lambda: segments)
    monkeypatch.setattr(deps, "ingestor", world.ingestor)
    return world, store


def _workflow(event: dict[str, Any]) -> list[dict[str, Any]]:
    """What the state machine does: Segment, then again while the answer is `more`."""
    from dfd.handlers.segment import run_segment

    answers = [run_segment(event, lambda: 900.0)]
    while answers[-1]["outcome"] == "more":
        answers.append(run_segment({"event_key": answers[-1]["event_key"]}, lambda: 900.0))
    return answers


def test_the_loop_hashes_in_segments_and_commits_once(world: tuple[World, FakeHashingStore]) -> None:
    w, _ = world
    data = random.Random(9).randbytes(40 * KIB + 3)
    key = w.upload(data, "big.bin")
    info = w.objects.head(BUCKET, key)
    event = event_key(BUCKET, key, version_token(info.version_id, info.etag))
    deps.segments().begin(event, info)
    answers = _workflow({"event_key": event})
    assert len(answers) >= 8 and {a["outcome"] for a in answers[:-1]} == {"more"}
    size = len(data)
    assert answers[-1] == {"event_key": event, "outcome": "done", "hashed": size, "size": size, "ingest": "stored"}
    assert list(w.repo.files) == [sha(data)]
    # a re-run of the last segment (its answer lost) commits nothing twice
    assert _workflow({"event_key": event})[-1]["ingest"] == Outcome.REPLAY
    assert w.totals()["total_uploads"] == 1
    w.assert_invariants()


def test_a_crc64nvme_mismatch_ends_rejected_never_committed(world: tuple[World, FakeHashingStore]) -> None:
    from dfd.ingest import crc64nvme

    w, _ = world
    data = random.Random(10).randbytes(40 * KIB + 3)
    key = w.upload(data, "big.bin")
    w.objects.objects[(BUCKET, key)].crc64nvme = crc64nvme.update(data[1:])  # S3's checksum of other bytes
    info = w.objects.head(BUCKET, key)
    event = event_key(BUCKET, key, version_token(info.version_id, info.etag))
    deps.segments().begin(event, info)
    answers = _workflow({"event_key": event})
    assert len(answers) >= 8 and answers[-1]["outcome"] == "done" and answers[-1]["ingest"] == "rejected"
    assert not w.repo.files and w.totals()["total_uploads"] == 0  # nothing committed, counted rejected only
    assert w.counted("rejected_uploads") == 1
    assert (BUCKET, key) not in w.objects.objects  # deleted as any rejected version
    # the workflow re-run (its answer lost): still no commit, not counted again
    assert _workflow({"event_key": event})[-1]["ingest"] == Outcome.REPLAY
    assert not w.repo.files and w.counted("rejected_uploads") == 1
    # its upload stays pending, its quota share held, until the reconcile ends it as any upload whose object went
    assert w.repo.uploads[key.rsplit("/", 1)[1]]["status"] == "pending"
    w.assert_invariants()


def test_a_matching_crc64nvme_commits_as_before(world: tuple[World, FakeHashingStore]) -> None:
    from dfd.ingest import crc64nvme

    w, _ = world
    data = random.Random(11).randbytes(40 * KIB + 3)
    key = w.upload(data, "big.bin")
    w.objects.objects[(BUCKET, key)].crc64nvme = crc64nvme.update(data)
    info = w.objects.head(BUCKET, key)
    event = event_key(BUCKET, key, version_token(info.version_id, info.etag))
    deps.segments().begin(event, info)
    assert _workflow({"event_key": event})[-1]["ingest"] == "stored"
    assert list(w.repo.files) == [sha(data)]
    w.assert_invariants()


@pytest.mark.parametrize("payload", [{}, {"event_key": ""}, {"event_key": 7}, [], {"event_key": "x" * 4000}])
def test_a_payload_not_the_workflow_s_is_refused(world: tuple[World, FakeHashingStore], payload: Any) -> None:
    from dfd.handlers.segment import SegmentInputError, run_segment

    with pytest.raises(SegmentInputError) as refused:
        run_segment(payload, lambda: 900.0)
    assert refused.value.status == 400
