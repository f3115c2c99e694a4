"""dfd.reconcile.service on the fakes of its ports: each phase's rules, the lease, paging, and errors as they are."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

import pytest

from dfd.core import clock
from dfd.core.errors import DfdError
from dfd.core.ids import tenant_metadata
from dfd.core.notifications import ObjectRef
from dfd.ingest.service import Ingestor, Outcome
from dfd.reconcile.service import SKIPPED, ReconcileInputError, Reconciler
from dfd.uploads.service import UploadRequest, UploadService
from tests.unit.callers import ALICE, BOB, settings
from tests.unit.fakes import FakeIngestQueue, FakeObjectStore, FakeRepository, run_reconcile

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
HOURS_LATER = clock.iso(datetime(2026, 3, 1, 15, 0, 0, tzinfo=UTC))
BUCKET = "b"


class World:
    def __init__(self, **overrides: Any) -> None:
        self.settings = settings(**overrides)
        self.repo = FakeRepository(self.settings)
        self.objects = FakeObjectStore()
        self.queue = FakeIngestQueue()
        self.uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=lambda _: None)
        self.reconciler = Reconciler(self.settings, self.repo, self.objects, self.queue, workers=1, wall=lambda: NOW)

    def register(self, data: bytes, caller: Any = ALICE) -> dict[str, Any]:
        answer = self.uploads.create(UploadRequest("f.bin", len(data), "application/octet-stream", None), caller)
        assert answer.status == 201
        return dict(answer.body)

    def put(self, answer: dict[str, Any], data: bytes) -> None:
        self.objects.put(BUCKET, answer["key"], data, metadata=tenant_metadata("acme"))

    def ingest(self, key: str) -> Outcome:
        return self.ingestor.ingest(ObjectRef(BUCKET, key)).outcome

    def run(self, **given: Any) -> dict[str, Any]:
        return run_reconcile(self.reconciler, **given)

    def redriven_keys(self) -> list[str]:
        keys = [unquote_plus(json.loads(b)["Records"][0]["s3"]["object"]["key"]) for b in self.queue.bodies]
        self.queue.bodies.clear()
        return keys


@pytest.fixture
def world() -> World:
    return World()


def test_a_lost_notification_is_redriven_then_the_upload_fails_after_the_limit(world: World) -> None:
    answer = world.register(b"lost")
    world.put(answer, b"lost")
    for attempt in range(1, world.settings.reconcile_max_redrives + 1):
        summary = world.run(now=HOURS_LATER)
        assert (summary["redriven"], summary["failed"]) == (1, 0), summary
        assert world.redriven_keys() == [answer["key"]]
        assert world.repo.uploads[answer["upload_id"]]["redrives"] == attempt
    summary = world.run(now=HOURS_LATER)
    assert (summary["redriven"], summary["failed"]) == (0, 1), summary
    upload = world.repo.uploads[answer["upload_id"]]
    assert upload["status"] == "failed" and "pending_shard" not in upload and "quota_bytes" not in upload
    assert world.repo.tenant_usage("acme").pending_count == 0  # its quota bytes released with it
    assert (_counted(world, "failed_uploads"), _counted(world, "expired_uploads")) == (1, 0)
    assert world.run(now=HOURS_LATER)["failed"] == 0 and _counted(world, "failed_uploads") == 1  # counted once


def _counted(world: World, name: str) -> int:
    """A counter's total over the shards."""
    return sum(shard.get(name, 0) for shard in world.repo.counters.values())


def test_an_abandoned_upload_expires_once_its_url_expired_and_not_before(world: World) -> None:
    answer = world.register(b"never sent")
    grace_over = clock.iso(clock.plus(NOW, seconds=world.settings.reconcile_grace_seconds))
    assert world.run(now=grace_over)["expired"] == 0  # the URL is still valid: the client may still upload
    assert world.run(now=HOURS_LATER)["expired"] == 1
    upload = world.repo.uploads[answer["upload_id"]]
    assert upload["status"] == "expired" and upload["expired_at"] == HOURS_LATER
    assert world.queue.bodies == []
    assert (_counted(world, "expired_uploads"), _counted(world, "failed_uploads")) == (1, 0)


def test_keys_are_redriven_url_encoded_as_s3_sends_them(world: World) -> None:
    key = "uploads/direct/a+b %20é.txt"
    world.objects.put(BUCKET, key, b"direct")
    assert world.run()["orphans"] == 1
    (body,) = world.queue.bodies
    assert json.loads(body)["Records"][0]["s3"]["object"]["key"] == "uploads/direct/a%2Bb+%2520%C3%A9.txt"
    world.ingest(key)
    assert world.run()["orphans"] == 0  # ingested: no longer an orphan


def test_orphans_are_what_nobody_ingested_or_owns(world: World) -> None:
    pending = world.register(b"pending")
    world.put(pending, b"pending")  # its pending upload owns it (the pending pass's, after the grace)
    stored = world.register(b"stored")
    world.put(stored, b"stored")
    world.ingest(stored["key"])
    world.objects.put(BUCKET, "uploads/folder/", b"")  # a folder marker: never ingested
    world.objects.put(BUCKET, "elsewhere/x", b"outside the prefix")
    world.objects.put(BUCKET, "uploads/direct.bin", b"direct")
    assert world.run()["orphans"] == 1
    assert world.redriven_keys() == ["uploads/direct.bin"]


def test_leftover_duplicate_bytes_are_redriven_unless_adopted(world: World) -> None:
    """A committed duplicate whose bytes survived (the delete never happened) is re-driven: the ingest's replay
    deletes them; unless its key holds an adopted copy (claimed)."""
    first, second = world.register(b"same"), world.register(b"same", BOB)
    world.put(first, b"same")
    world.ingest(first["key"])
    world.put(second, b"same")
    leftover = world.objects.objects[(BUCKET, second["key"])]
    assert world.ingest(second["key"]) == Outcome.DUPLICATE
    world.objects.objects[(BUCKET, second["key"])] = leftover  # its bytes, back
    assert world.run()["orphans"] == 1
    assert world.redriven_keys() == [second["key"]]
    world.repo.claims[(BUCKET, second["key"])] = {"event_key": "claim", "hash": "h"}  # adopted as the stored copy
    assert world.run()["orphans"] == 0


def test_the_reaper_frees_a_tombstoned_content_and_moves_its_history(world: World) -> None:
    from dfd.deletes.service import DeleteService
    from dfd.uploads.multipart import MultipartService

    multipart = MultipartService(world.settings, world.repo, world.objects, now=lambda: NOW)
    deletes = DeleteService(world.settings, world.repo, multipart, now=lambda: NOW, sleep=lambda _: None)
    first, second = world.register(b"gone"), world.register(b"gone")
    for answer in (first, second):
        world.put(answer, b"gone")
        world.ingest(answer["key"])
    for answer in (first, second):
        deletes.delete(ALICE, answer["upload_id"])
    assert world.run(now=clock.iso(NOW))["reaped"] == 0  # within the grace period
    summary = world.run(now=HOURS_LATER)
    assert (summary["reaped"], summary["refs_reaped"]) == (1, 0), summary
    assert world.repo.files == {} and (BUCKET, first["key"]) not in world.objects.objects
    totals: dict[str, int] = {}
    for shard in world.repo.counters.values():
        for name, value in shard.items():
            totals[name] = totals.get(name, 0) + value
    assert (totals["total_files"], totals["reaped_uploads"], totals["reaped_duplicates"]) == (0, 2, 1)
    assert totals["reaped_saved"] == len(b"gone")  # derived: its duplicates x its size
    assert (totals["reaped_contents"], totals["reaped_bytes"]) == (1, len(b"gone"))


def test_an_object_changed_at_its_key_is_left_to_the_next_run(world: World) -> None:
    """412 (another object at the key) deletes nothing: the content stays in the reaper's index."""
    from dfd.deletes.service import DeleteService
    from dfd.uploads.multipart import MultipartService

    multipart = MultipartService(world.settings, world.repo, world.objects, now=lambda: NOW)
    deletes = DeleteService(world.settings, world.repo, multipart, now=lambda: NOW, sleep=lambda _: None)
    answer = world.register(b"changed")
    world.put(answer, b"changed")
    world.ingest(answer["key"])
    deletes.delete(ALICE, answer["upload_id"])
    world.objects.put(BUCKET, answer["key"], b"another object")  # a new ETag at the key
    assert world.run(now=HOURS_LATER)["reaped"] == 0
    assert len(world.repo.files) == 1


def test_an_unknown_s3_error_fails_the_run(world: World) -> None:
    answer = world.register(b"denied")
    world.put(answer, b"denied")

    def denied(bucket: str, key: str, etag: str | None) -> bool:
        raise DfdError(f"S3 HeadObject {key} failed (AccessDenied)", code="storage_error")

    world.objects.exists = denied  # type: ignore[method-assign]
    with pytest.raises(DfdError, match="AccessDenied"):
        world.run(now=HOURS_LATER)


def test_the_lease_makes_runs_exclusive_and_a_skipped_sweep_runs_next(world: World) -> None:
    assert world.repo.take_lease("other", NOW, clock.plus(NOW, seconds=60)).holder == "other"
    world.objects.put(BUCKET, "uploads/direct.bin", b"direct")
    assert world.run() == {"skipped": SKIPPED, "executions": 1}
    assert world.queue.bodies == []
    world.repo.release_lease("other")
    summary = world.run(sweep=False)
    assert summary["orphans"] == 1 and summary["drift"] == {"files": 0, "bytes": 0}, summary  # the sweep was due
    assert world.run(sweep=False)["orphans"] is None  # and done
    world.repo.take_lease("dead", NOW, clock.plus(NOW, seconds=-1))  # expired: taken over
    assert "skipped" not in world.run(sweep=False)


def test_a_run_that_lost_its_lease_stops(world: World) -> None:
    state = world.reconciler.begin({})
    world.repo.lease["holder"] = "someone else"
    from dfd.core.conflicts import LeaseLost

    with pytest.raises(LeaseLost):
        world.reconciler.page("pending", state, lambda *_: None)


def test_pages_carry_a_cursor_until_the_index_is_done(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd.reconcile import service as reconcile

    monkeypatch.setitem(reconcile.PAGE, "pending", 2)
    for i in range(5):
        world.put(world.register(b"p%d" % i), b"p%d" % i)
    state = world.reconciler.begin({"now": HOURS_LATER, "sweep": False})
    pages = 0
    while state["pos"]["phase"] == "pending":
        state = world.reconciler.page("pending", state, lambda *_: None)
        pages += 1
    assert state["tally"]["redriven"] == 5 and len(world.queue.bodies) == 5
    assert pages == 3 + world.settings.pending_shards - 1  # 2 + 2 + 1 on the fakes' one shard, then the others


def test_drift_is_reported_when_proven(world: World) -> None:
    answer = world.register(b"counted")
    world.put(answer, b"counted")
    world.ingest(answer["key"])
    emitted: list[tuple[str, float, str]] = []
    shard = world.repo.counters.setdefault(0, {})
    shard["total_files"] = shard.get("total_files", 0) + 2
    state = world.reconciler.begin({})
    while state["pos"]["phase"] != "done":
        state = world.reconciler.page(state["pos"]["phase"], state, lambda *m: emitted.append(m))
    assert world.reconciler.finish(state)["drift"] == {"files": 2, "bytes": 0}
    assert ("CounterDriftDetected", 1, "Count") in emitted and ("CounterDriftFiles", 2, "Count") in emitted


def test_a_record_whose_copy_is_gone_is_marked_lost_once(world: World) -> None:
    answer = world.register(b"lost copy")
    world.put(answer, b"lost copy")
    world.ingest(answer["key"])
    del world.objects.objects[(BUCKET, answer["key"])]
    emitted: list[tuple[str, float, str]] = []
    for _ in range(2):
        state = world.reconciler.begin({})
        while state["pos"]["phase"] != "done":
            state = world.reconciler.page(state["pos"]["phase"], state, lambda *m: emitted.append(m))
        world.reconciler.finish(state)
    assert emitted == [("LostFiles", 1, "Count")]
    assert next(iter(world.repo.files.values()))["state"] == "lost"


@pytest.mark.parametrize(
    "given",
    [{"sweep": "yes"}, {"now": "yesterday"}, {"now": "2030-01-01T00:00:00"}, {"budget": 0}, {"surprise": 1}],
)
def test_an_input_that_is_not_the_workflow_s_is_refused(world: World, given: dict[str, Any]) -> None:
    with pytest.raises(ReconcileInputError):
        world.reconciler.begin(given)
    with pytest.raises(ReconcileInputError):
        world.reconciler.page("pending", {"run": {}}, lambda *_: None)
