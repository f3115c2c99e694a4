"""DeleteService on the in-memory ports: the decisions (delete, cancel, already), the retries after a concurrent
change, the tombstone derived from a live count of 0, a tenant reference at 0 (held no more), resurrection, and
the ingest of an object for a cancelled upload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dfd.core import clock
from dfd.core.errors import Forbidden, NotFound, ServiceUnavailable, TransactionRetryable
from dfd.core.ids import tenant_metadata
from dfd.core.notifications import ObjectRef
from dfd.core.retry import Backoff
from dfd.deletes.service import DeleteService
from dfd.ingest import codec as ingest_codec
from dfd.ingest.service import Ingestor, Outcome
from dfd.queries.service import Queries
from dfd.reconcile.service import Reconciler
from dfd.uploads.multipart import MultipartService
from dfd.uploads.service import UploadRequest, UploadService
from tests.unit.callers import ADMIN, ALICE, BOB, CAROL, settings
from tests.unit.fakes import FakeIngestQueue, FakeObjectStore, FakeRepository, run_reconcile

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DATA = b"reference counted" * 10


class World:
    def __init__(self) -> None:
        self.settings = settings()
        self.repo = FakeRepository(self.settings)
        self.objects = FakeObjectStore()
        multipart = MultipartService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.deletes = DeleteService(self.settings, self.repo, multipart, now=lambda: NOW, sleep=lambda _: None)
        self.uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW)
        self.ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=lambda _: None)
        self.reconciler = Reconciler(self.settings, self.repo, self.objects, FakeIngestQueue(), workers=1)

    def reap_references(self, now: datetime) -> int:
        """A pending-only reconcile run at `now` (its reaper drops the tenant references at 0): how many it dropped."""
        summary = run_reconcile(self.reconciler, sweep=False, now=clock.iso(now))
        return int(summary["refs_reaped"])

    def upload(self, caller: Any, data: bytes = DATA) -> str:
        answer = self.uploads.create(UploadRequest("f.bin", len(data), "application/octet-stream", None), caller)
        assert answer.status == 201
        self.objects.put("b", answer.body["key"], data)
        assert self.ingestor.ingest(ObjectRef("b", answer.body["key"])).outcome in (Outcome.STORED, Outcome.DUPLICATE)
        return str(answer.body["upload_id"])


@pytest.fixture
def world() -> World:
    return World()


def test_rules_and_the_last_reference_tombstones(world: World) -> None:
    first, second = world.upload(ALICE), world.upload(BOB)
    with pytest.raises(NotFound):
        world.deletes.delete(BOB, first)
    with pytest.raises(Forbidden):
        world.deletes.delete(CAROL, first)
    transactions = world.repo.transactions
    assert world.deletes.delete(ALICE, first).outcome == "deleted"
    assert world.repo.transactions == transactions + 1  # one transaction, nothing read but the upload
    assert world.deletes.delete(ALICE, first).outcome == "already"
    (digest,) = world.repo.files
    file = world.repo.files[digest]
    assert (
        file["live_refs"] == 1
        and ingest_codec.file_record(file).state == "live"
        and file["reap_after"]
        and file["tombstone_shard"]
    )
    # the tenant's reference at 0: it holds the content no more (the reaper deletes the item)
    ref = world.repo.tenant_refs[("acme", digest)]
    assert (
        ref["upload_count"] == 0 and not ingest_codec.tenant_ref(ref).holds and ref["reap_shard"] and ref["reap_after"]
    )
    result = world.deletes.delete(ADMIN, second)
    assert result.outcome == "deleted"
    assert ingest_codec.file_record(file).state == "tombstoned" and file["generation"] == 1 and "state" not in file
    assert world.repo.counter_totals()["deleted_uploads"] == 2


def test_a_tenant_reference_at_zero_holds_nothing(world: World) -> None:
    """Hash lookups 404, the precheck answers 201, and the tenant's next upload is a new reference again (its
    first filename and dates anew, out of the reaper's index), counted as stored for the tenant."""
    first, _ = world.upload(ALICE), world.upload(BOB)
    (digest,) = world.repo.files
    world.deletes.delete(ALICE, first)
    queries = Queries(world.settings, world.repo, world.objects)
    with pytest.raises(NotFound):
        queries.metadata(digest, CAROL)
    sha = UploadRequest("again.bin", len(DATA), "text/plain", digest)
    answer = world.uploads.create(sha, CAROL)
    assert answer.status == 201  # acme must upload the bytes again (proof of possession)
    world.objects.put("b", answer.body["key"], DATA)
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.DUPLICATE and result.detail["upload_status"] == "stored"
    ref = world.repo.tenant_refs[("acme", digest)]
    assert (
        ref["upload_count"] == 1
        and ref["filename"] == "again.bin"
        and ref["first_upload_id"] == answer.body["upload_id"]
    )
    assert "reap_shard" not in ref and "reap_after" not in ref
    assert queries.metadata(digest, CAROL)["filename"] == "again.bin"
    # held again: the precheck answers 409
    assert world.uploads.create(UploadRequest("x.bin", len(DATA), "text/plain", digest), ALICE).status == 409


def test_a_concurrent_upload_between_read_and_write_is_counted_by_both(world: World) -> None:
    """Nothing of the content is read by the delete: a new upload landing between its read and its transaction is
    simply one more reference, and the delete removes its own."""
    first = world.upload(ALICE)
    read = world.repo.get_upload

    def then_an_upload(upload_id: str) -> Any:
        record = read(upload_id)
        world.repo.get_upload = read  # type: ignore[method-assign]
        world.upload(CAROL)
        return record

    world.repo.get_upload = then_an_upload  # type: ignore[method-assign]
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "deleted" and result.attempts == 1
    (file,) = world.repo.files.values()
    assert file["live_refs"] == 1 and ingest_codec.file_record(file).state == "live"


def test_a_delete_racing_a_duplicate_ingest_makes_it_resurrect(world: World) -> None:
    """The ingest read live content (count 1); the last reference is deleted before its transaction: its
    `live_refs > 0` condition fails, it reads again and resurrects the content with its own bytes."""
    first = world.upload(ALICE)
    (digest,) = world.repo.files
    old_key = world.repo.files[digest]["s3_key"]
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), BOB)
    world.objects.put("b", answer.body["key"], DATA)
    world.repo.after_state = lambda: world.deletes.delete(ALICE, first) and None
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.STORED and result.detail["resurrected_generation"] == 2
    file = world.repo.files[digest]
    assert file["live_refs"] == 1 and file["s3_key"] == answer.body["key"] and file["reap_key"] == old_key
    assert world.objects.exists("b", answer.body["key"], None)


def test_a_count_not_above_zero_is_a_broken_invariant_answered_503(world: World) -> None:
    """A processed upload whose content's live count is already 0 (a broken invariant): its delete fails the
    `live_refs > 0` condition and answers 503 at once (logged), changing nothing."""
    first = world.upload(ALICE)
    (file,) = world.repo.files.values()
    file["live_refs"] = 0
    transactions = world.repo.transactions
    with pytest.raises(ServiceUnavailable):
        world.deletes.delete(ALICE, first)
    assert world.repo.transactions == transactions + 1  # not retried into a wrong count
    assert world.repo.uploads[first]["status"] == "stored"
    assert world.repo.tenant_refs[("acme", file["hash"])]["upload_count"] == 1


def _duplicate_whose_delete_crashed(world: World) -> tuple[str, str]:
    """A duplicate of alice's content committed, its bytes' delete never done (a crash): its key and upload id."""
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), ALICE)
    key = answer.body["key"]
    world.objects.put("b", key, DATA)

    def crash(_: Any) -> None:
        raise RuntimeError("crashed between the commit and the delete")

    crashing = Ingestor(world.settings, world.repo, world.objects, now=lambda: NOW, after_commit=crash)
    with pytest.raises(RuntimeError):
        crashing.ingest(ObjectRef("b", key))
    return key, str(answer.body["upload_id"])


def test_a_duplicate_replayed_after_its_content_was_reaped_is_deleted(world: World) -> None:
    """A duplicate whose bytes' delete never happened (a crash after the commit); then every upload of the
    content is deleted and the reaper removes the record. The replay finds no record and its own upload deleted:
    no record needs the bytes, they go (before: kept as "no stored copy recorded", a leak)."""
    first = world.upload(ALICE)
    key, duplicate = _duplicate_whose_delete_crashed(world)
    for upload_id in (first, duplicate):
        world.deletes.delete(ALICE, upload_id)
    (digest,) = world.repo.files
    stored_key = world.repo.files.pop(digest)["s3_key"]  # the reaper: the object, then the record
    world.objects.delete("b", stored_key, None)
    result = world.ingestor.ingest(ObjectRef("b", key))
    assert result.outcome == Outcome.REPLAY and result.deleted
    assert not world.objects.exists("b", key, None)


def test_a_replayed_duplicate_with_no_record_and_a_live_upload_is_kept(world: World) -> None:
    """No record but the upload not deleted: never the case while the invariants hold — kept, never deleted."""
    world.upload(ALICE)
    key, _ = _duplicate_whose_delete_crashed(world)
    world.repo.files.clear()
    result = world.ingestor.ingest(ObjectRef("b", key))
    assert result.outcome == Outcome.REPLAY and not result.deleted
    assert result.detail["kept"] == "no stored copy recorded" and world.objects.exists("b", key, None)


def test_a_cancelled_upload_s_object_is_deleted_and_counted_nowhere(world: World) -> None:
    answer = world.uploads.create(UploadRequest("f.bin", len(DATA), "text/plain", None), ALICE)
    upload_id = answer.body["upload_id"]
    assert world.deletes.delete(ALICE, upload_id).outcome == "cancelled"
    world.objects.put("b", answer.body["key"], DATA)
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.REJECTED and result.deleted and result.detail["reason"] == "upload deleted"
    assert not world.repo.files and world.repo.counter_totals()["total_uploads"] == 0
    assert world.repo.uploads[upload_id]["status"] == "deleted"


def test_an_upload_of_tombstoned_content_resurrects_it_with_its_own_bytes(world: World) -> None:
    first = world.upload(ALICE)
    (digest,) = world.repo.files
    old_key = world.repo.files[digest]["s3_key"]
    assert world.deletes.delete(ALICE, first).outcome == "deleted"
    assert ingest_codec.file_record(world.repo.files[digest]).state == "tombstoned"
    # the precheck never answers 409 for tombstoned content: the bytes must be uploaded
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), BOB)
    assert answer.status == 201
    sha = UploadRequest("h.bin", len(DATA), "text/plain", digest)
    assert world.uploads.create(sha, ALICE).status == 201
    world.objects.put("b", answer.body["key"], DATA)
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.STORED and result.detail["resurrected_generation"] == 2
    file = world.repo.files[digest]
    assert ingest_codec.file_record(file).state == "live" and file["generation"] == 2 and file["live_refs"] == 1
    assert file["s3_key"] == answer.body["key"] and file["reap_key"] == old_key
    assert world.repo.uploads[answer.body["upload_id"]]["status"] == "stored"
    assert world.repo.tenant_refs[("globex", digest)]["upload_count"] == 1
    totals = world.repo.counter_totals()
    assert totals["total_files"] == 1 and totals["total_uploads"] == 2 and totals["duplicates_avoided"] == 0
    # a duplicate of the resurrected content is an ordinary duplicate again
    world.upload(ALICE)
    assert world.repo.files[digest]["live_refs"] == 2


def test_a_second_resurrection_waits_for_the_reaper_of_the_first(world: World) -> None:
    first = world.upload(ALICE)
    world.deletes.delete(ALICE, first)
    second = world.upload(ALICE)  # resurrected: the first generation's object awaits the reaper
    world.deletes.delete(ALICE, second)
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), ALICE)
    world.objects.put("b", answer.body["key"], DATA)
    with pytest.raises(ServiceUnavailable):
        world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert world.repo.uploads[answer.body["upload_id"]]["status"] == "pending"


def test_a_lost_answer_is_a_503_and_the_repeat_changes_nothing_more(world: World) -> None:
    """The transaction commits but its answer is lost past botocore's attempts (dfd.core.retry): 503, not retried
    here; the client's repeat reads the upload deleted and stops; the references were removed exactly once."""
    first, second = world.upload(ALICE), world.upload(CAROL)
    commit = world.repo.commit_delete

    def lost(*args: Any, **kwargs: Any) -> None:
        commit(*args, **kwargs)
        raise ServiceUnavailable("the answer was lost")

    world.repo.commit_delete = lost  # type: ignore[method-assign]
    with pytest.raises(ServiceUnavailable):
        world.deletes.delete(ALICE, first)
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "already" and result.attempts == 1
    (file,) = world.repo.files.values()
    assert file["live_refs"] == 1 and world.repo.tenant_refs[("acme", file["hash"])]["upload_count"] == 1
    assert world.repo.counter_totals()["deleted_uploads"] == 1
    assert world.repo.uploads[second]["status"] != "deleted"


def test_a_conflicted_transaction_is_retried_after_a_pause(world: World) -> None:
    first = world.upload(ALICE)
    world.repo.faults.append(TransactionRetryable("cancelled: ['TransactionConflict']"))
    sleeps: list[float] = []
    world.deletes._backoff = Backoff(sleeps.append)
    result = world.deletes.delete(ALICE, first)
    assert result.outcome == "deleted" and result.attempts == 2
    assert len(sleeps) == 1 and 0 < sleeps[0] <= Backoff.LONGEST
    (file,) = world.repo.files.values()
    assert ingest_codec.file_record(file).state == "tombstoned"


def test_a_throttled_transaction_is_botocores_to_retry_not_the_loops(world: World) -> None:
    first = world.upload(ALICE)
    world.repo.faults.append(ServiceUnavailable("throttled"))
    transactions = world.repo.transactions
    with pytest.raises(ServiceUnavailable):
        world.deletes.delete(ALICE, first)
    assert world.repo.transactions == transactions + 1
    result = world.deletes.delete(ALICE, first)  # the client's repeat
    assert result.outcome == "deleted" and result.attempts == 1
    (file,) = world.repo.files.values()
    assert ingest_codec.file_record(file).state == "tombstoned"


def test_a_reference_going_to_zero_under_an_ingest_is_taken_anew(world: World) -> None:
    """Carol's ingest read acme's reference held (count 1); Alice's delete takes it to 0 before the commit (Bob
    still holds the content): the reference's condition fails, the ingest follows the reference it was shown (at 0:
    not held) and takes it anew — `stored` for acme, Carol's filename."""
    alice, _ = world.upload(ALICE), world.upload(BOB)
    (digest,) = world.repo.files
    answer = world.uploads.create(UploadRequest("carol.bin", len(DATA), "text/plain", None), CAROL)
    world.objects.put("b", answer.body["key"], DATA, metadata=tenant_metadata("acme"))
    world.repo.after_state = lambda: world.deletes.delete(ALICE, alice) and None
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.DUPLICATE and result.detail["upload_status"] == "stored"
    assert result.attempts == 2
    ref = world.repo.tenant_refs[("acme", digest)]
    assert ref["upload_count"] == 1 and ref["filename"] == "carol.bin" and "reap_shard" not in ref
    assert world.repo.files[digest]["live_refs"] == 2


def test_a_replayed_duplicate_of_content_tombstoned_since_is_deleted_not_adopted(world: World) -> None:
    """A duplicate committed, its bytes not yet deleted (a crash); then every reference is deleted and the reaper
    deletes the stored object. The replay finds the content at 0: no live record needs these bytes either — they
    are deleted, never adopted into a record the reaper is about to delete."""
    first = world.upload(ALICE)
    (digest,) = world.repo.files
    stored_key = world.repo.files[digest]["s3_key"]
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), BOB)
    world.objects.put("b", answer.body["key"], DATA)
    crash = Ingestor(
        world.settings, world.repo, world.objects, now=lambda: NOW, sleep=lambda _: None, after_commit=_crash
    )
    with pytest.raises(RuntimeError):
        crash.ingest(ObjectRef("b", answer.body["key"]))
    world.deletes.delete(ALICE, first)
    world.deletes.delete(BOB, answer.body["upload_id"])
    world.objects.delete("b", stored_key, None)  # the reaper's object delete; its record delete is pending
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.REPLAY and result.deleted
    assert not world.objects.exists("b", answer.body["key"], None)
    assert world.repo.files[digest]["s3_key"] == stored_key and not world.repo.adopted


def _crash(_: object) -> None:
    raise RuntimeError("crashed between the commit and the delete")


# ---------------------------------------------------------------------------------------------- quota usage
def _usage_is_exact(repo: FakeRepository) -> None:
    """docs/design/choices.md, "Quotas": stored_bytes = the sizes of the tenant's reference items (at any count, 0
    included), pending = its uploads still holding `quota_bytes`, used = pending + stored (scripts/audit's rule)."""
    tenants = {t for t, _ in repo.tenant_refs} | set(repo.usage)
    for tenant in tenants:
        usage = repo.tenant_usage(tenant)
        stored = sum(int(ref["size"]) for (t, _), ref in repo.tenant_refs.items() if t == tenant)
        pending = [u for u in repo.uploads.values() if u.get("tenant") == tenant and "quota_bytes" in u]
        assert usage.stored_bytes == stored, tenant
        assert (usage.pending_count, usage.pending_bytes) == (len(pending), sum(u["quota_bytes"] for u in pending))
        assert usage.used_bytes == usage.stored_bytes + usage.pending_bytes, tenant


LATER = datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC)  # the reconcile's next run (references need no grace)
EARLIER = datetime(2026, 3, 1, 11, 59, 59, tzinfo=UTC)


def test_a_delete_frees_its_tenant_s_quota_at_the_reference_pass(world: World) -> None:
    first = world.upload(ALICE)
    assert world.repo.tenant_usage("acme").as_dict() == dict.fromkeys(("pending_count", "pending_bytes"), 0) | {
        "stored_bytes": len(DATA),
        "used_bytes": len(DATA),
    }
    world.deletes.delete(ALICE, first)
    # the reference at 0 is still counted: the reaper's pass deletes it and releases its size in one transaction
    assert world.repo.tenant_usage("acme").used_bytes == len(DATA)
    _usage_is_exact(world.repo)
    assert world.reap_references(EARLIER) == 0  # marked at NOW: due from then on
    assert world.reap_references(NOW) == 1
    assert world.repo.tenant_usage("acme").as_dict() == dict.fromkeys(
        ("pending_count", "pending_bytes", "stored_bytes", "used_bytes"), 0
    )
    _usage_is_exact(world.repo)


@pytest.mark.parametrize("others", [False, True], ids=["resurrected", "duplicate"])
def test_a_reference_at_zero_taken_over_before_the_reaper_is_counted_once(world: World, others: bool) -> None:
    """Delete then upload again before the reference pass: the upload takes the reference at 0 over (its size is
    counted already) and releases its pending bytes — whether the content is still live (another tenant holds
    it: a duplicate) or tombstoned (resurrected with its own bytes). The pass then only unindexes it."""
    first = world.upload(ALICE)
    if others:
        world.upload(BOB)
    world.deletes.delete(ALICE, first)
    world.upload(CAROL)
    (digest,) = world.repo.files
    assert world.repo.tenant_refs[("acme", digest)]["upload_count"] == 1
    assert world.repo.tenant_usage("acme").as_dict() == {
        "pending_count": 0,
        "pending_bytes": 0,
        "stored_bytes": len(DATA),
        "used_bytes": len(DATA),
    }
    _usage_is_exact(world.repo)
    assert world.reap_references(LATER) == 0  # counted again: it leaves the index, its size stays
    assert "reap_shard" not in world.repo.tenant_refs[("acme", digest)]
    assert world.repo.tenant_usage("acme").stored_bytes == len(DATA)
    _usage_is_exact(world.repo)


def test_the_reference_pass_racing_a_takeover_makes_the_ingest_count_it_anew(world: World) -> None:
    """The ingest read acme's reference at 0 (counted, nothing to add); the reaper deletes it and releases its size
    before the commit: the reference's condition (exists at 0) fails, the ingest follows what it was shown (absent)
    and creates the reference, adding the size — counted once, never zero times."""
    alice, _ = world.upload(ALICE), world.upload(BOB)
    (digest,) = world.repo.files
    world.deletes.delete(ALICE, alice)
    answer = world.uploads.create(UploadRequest("carol.bin", len(DATA), "text/plain", None), CAROL)
    world.objects.put("b", answer.body["key"], DATA, metadata=tenant_metadata("acme"))
    world.repo.after_state = lambda: world.reap_references(LATER) and None
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.DUPLICATE and result.attempts == 2
    assert world.repo.tenant_refs[("acme", digest)]["upload_count"] == 1
    assert world.repo.tenant_usage("acme").stored_bytes == len(DATA)
    _usage_is_exact(world.repo)


def test_a_takeover_racing_the_reference_pass_is_not_counted_twice(world: World) -> None:
    """The ingest assumed acme holds the content (no tenant hint): its reference is at 0, so the condition fails
    and shows it; the retry takes it over conditioned on it still existing at 0 and adds no size."""
    alice, _ = world.upload(ALICE), world.upload(BOB)
    world.deletes.delete(ALICE, alice)
    answer = world.uploads.create(UploadRequest("carol.bin", len(DATA), "text/plain", None), CAROL)
    world.objects.put("b", answer.body["key"], DATA)  # no hint: the ingest assumes
    result = world.ingestor.ingest(ObjectRef("b", answer.body["key"]))
    assert result.outcome == Outcome.DUPLICATE and result.attempts == 2 and result.detail["upload_status"] == "stored"
    assert world.repo.tenant_usage("acme").stored_bytes == len(DATA)
    _usage_is_exact(world.repo)


def test_a_cancel_gives_the_pending_bytes_back_with_its_status(world: World) -> None:
    answer = world.uploads.create(UploadRequest("f.bin", len(DATA), "text/plain", None), ALICE)
    assert world.repo.tenant_usage("acme").pending_bytes == len(DATA)
    assert world.deletes.delete(ALICE, answer.body["upload_id"]).outcome == "cancelled"
    assert world.repo.tenant_usage("acme").as_dict() == dict.fromkeys(
        ("pending_count", "pending_bytes", "stored_bytes", "used_bytes"), 0
    )
    assert "quota_bytes" not in world.repo.uploads[answer.body["upload_id"]]
    assert world.deletes.delete(ALICE, answer.body["upload_id"]).outcome == "already"
    _usage_is_exact(world.repo)


def test_a_cancel_racing_the_reconcile_s_release_reads_again(world: World) -> None:
    """The reconcile expired the upload (releasing its bytes) between the delete's read and its write: the cancel's
    condition fails, the delete reads `expired` and cancels that — releasing nothing twice."""
    answer = world.uploads.create(UploadRequest("f.bin", len(DATA), "text/plain", None), ALICE)
    upload_id = answer.body["upload_id"]
    read = world.repo.get_upload

    def then_expired(wanted: str) -> Any:
        record = read(wanted)
        world.repo.get_upload = read  # type: ignore[method-assign]
        assert world.repo.end_pending_upload(upload_id, "expired", NOW, tenant="acme", quota_bytes=len(DATA))
        return record

    world.repo.get_upload = then_expired  # type: ignore[method-assign]
    result = world.deletes.delete(ALICE, upload_id)
    assert result.outcome == "cancelled" and result.attempts == 2
    assert world.repo.uploads[upload_id]["status"] == "deleted"
    assert world.repo.tenant_usage("acme").pending_count == 0 and world.repo.tenant_usage("acme").used_bytes == 0
    _usage_is_exact(world.repo)


def test_a_deleted_duplicate_s_copy_adopted_for_a_lost_content_leaves_its_upload_deleted(world: World) -> None:
    """The duplicate's bytes survived (a crashed delete), its upload was deleted, then the stored copy was lost:
    the replay adopts these bytes for the content's other upload — and the deleted upload stays deleted (before:
    it read `stored` again, uncounted, and a second delete of it removed another upload's reference)."""
    first = world.upload(ALICE)
    key, duplicate = _duplicate_whose_delete_crashed(world)
    assert world.deletes.delete(ALICE, duplicate).outcome == "deleted"
    (digest,) = world.repo.files
    world.objects.delete("b", world.repo.files[digest]["s3_key"], None)  # the stored copy, lost
    result = world.ingestor.ingest(ObjectRef("b", key))
    assert result.outcome == Outcome.REPLAY and result.detail["adopted_from"] and not result.deleted
    file = world.repo.files[digest]
    assert file["s3_key"] == key and file["live_refs"] == 1 and world.objects.exists("b", key, None)
    assert world.repo.uploads[duplicate]["status"] == "deleted" and "upload_status" not in result.detail
    assert world.deletes.delete(ALICE, duplicate).outcome == "already"
    assert file["live_refs"] == 1 and world.repo.uploads[first]["status"] == "stored"


def test_an_upload_deleted_while_its_copy_is_adopted_stays_deleted(world: World) -> None:
    """The duplicate's own ingest finds the stored copy gone, and its upload is deleted between the commit and
    the adoption: the adoption is refused for the upload (UploadTaken), then done without it."""
    first = world.upload(ALICE)
    answer = world.uploads.create(UploadRequest("g.bin", len(DATA), "text/plain", None), ALICE)
    key, upload_id = answer.body["key"], str(answer.body["upload_id"])
    world.objects.put("b", key, DATA)
    (digest,) = world.repo.files
    stored_key = world.repo.files[digest]["s3_key"]

    def lose_and_delete(_: Any) -> None:
        world.objects.delete("b", stored_key, None)
        assert world.deletes.delete(ALICE, upload_id).outcome == "deleted"

    racing = Ingestor(world.settings, world.repo, world.objects, now=lambda: NOW, after_commit=lose_and_delete)
    result = racing.ingest(ObjectRef("b", key))
    assert result.outcome == Outcome.DUPLICATE and result.detail["adopted_from"] == stored_key
    assert world.repo.files[digest]["s3_key"] == key and world.repo.files[digest]["live_refs"] == 1
    assert world.repo.uploads[upload_id]["status"] == "deleted" and world.repo.uploads[first]["status"] == "stored"
