"""The tenant layer on the in-memory ports (tests/unit/fakes/), through the domain services: the rules
table (Queries.metadata/download/stats/hashes, UploadService.create's precheck) for the owner, the same tenant,
another tenant, an admin, a user in no tenant group and an upload made before tenants; the ingest's per-tenant
decision (a cross-tenant duplicate is `stored` for its uploader, a same-tenant one `duplicate`); objects put
straight into the bucket; and the races on the tenant reference. tests/integration/test_tenancy.py runs the
table on moto through the handlers."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from dfd.core import clock
from dfd.core.conflicts import CommitRefused
from dfd.core.errors import DfdError, Forbidden, NotFound, NotReady, TooManyRequests
from dfd.core.ids import upload_id_from_key
from dfd.core.records import EventRecord
from dfd.identity.caller import Caller, caller_from_claims
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.ingest.service import Ingestor, IngestResult, Outcome
from dfd.queries.service import Queries
from dfd.uploads.service import UploadAnswer, UploadRequest, UploadService
from tests.support import ADMIN, ALICE, BOB, CAROL, DAVE, ApiUser
from tests.unit.ingest_world import BUCKET, NOW, World, expect, sha

ERIN = ApiUser("erin", "00000000-0000-4000-8000-0000000e4140")  # no group either: another tenant of one
PREFIX = "uploads/"


@dataclass
class Tenancy(World):
    """World with a clock that tests move (dates in a tenant's view must be the tenant's own)."""

    now: datetime = NOW

    def ingestor(self, **kwargs: object) -> Ingestor:
        return Ingestor(
            self.settings,
            self.repo,
            self.objects,
            now=lambda: self.now,
            sleep=self.sleeps.append,
            rng=random.Random(7),
            **kwargs,  # type: ignore[arg-type]
        )

    def service(self) -> UploadService:
        return UploadService(self.settings, self.repo, self.objects, now=lambda: self.now, rng=random.Random(3))

    def queries(self) -> Queries:
        return Queries(self.settings, self.repo, self.objects)

    def tick(self, minutes: int = 1) -> str:
        self.now += timedelta(minutes=minutes)
        return clock.iso(self.now)

    def precheck(self, user: ApiUser, data: bytes, name: str = "pre.txt") -> UploadAnswer:
        return self.service().create(UploadRequest(name, len(data), "text/plain", sha(data)), user.caller)

    def put_direct(self, key: str, data: bytes) -> str:
        """An object put straight into the bucket (no POST /upload: no upload record, no owner)."""
        self.objects.put(BUCKET, key, data, content_type="text/plain")
        return key

    def status(self, key: str) -> str:
        return str(self.repo.uploads[uid(key)]["status"])

    def ref(self, tenant: str, data: bytes) -> dict[str, Any] | None:
        return self.repo.tenant_refs.get((tenant, sha(data)))


def uid(key: str) -> str:
    upload_id = upload_id_from_key(PREFIX, key)
    assert upload_id is not None, key
    return upload_id


def error_of(call: Callable[[], object]) -> DfdError:
    with pytest.raises(DfdError) as raised:
        call()
    return raised.value


@pytest.fixture
def world() -> Tenancy:
    return Tenancy()


REPORT = b"acme's quarterly report" * 20
T0 = clock.iso(NOW)


@pytest.fixture
def report(world: Tenancy) -> str:
    """alice (tenant acme) stored REPORT as report.pdf at T0: the key of her upload."""
    key = world.upload(REPORT, "report.pdf", user=ALICE)
    expect(world.ingest(key), Outcome.STORED)
    return key


# ---------------------------------------------------------------------------------------------- the callers
def test_the_callers_tenants() -> None:
    assert ALICE.caller.tenant == CAROL.caller.tenant == "acme" and not ALICE.caller.is_admin
    assert BOB.caller.tenant == "globex"
    assert DAVE.caller.tenant == "user:" + DAVE.sub and ERIN.caller.tenant == "user:" + ERIN.sub
    assert ADMIN.caller.is_admin and ADMIN.caller.tenant == "user:" + ADMIN.sub


# ---------------------------------------------------------------------------------------------- GET by upload id
@pytest.mark.parametrize("user", [ALICE, CAROL], ids=["owner", "same-tenant"])
def test_an_upload_is_visible_to_its_owner_and_tenant(world: Tenancy, report: str, user: ApiUser) -> None:
    view = world.queries().metadata(uid(report), user.caller)
    assert view["upload_id"] == uid(report) and view["status"] == "stored" and view["filename"] == "report.pdf"
    assert view["file"] == {
        "hash": sha(REPORT),
        "size": len(REPORT),
        "content_type": "text/plain",
        "filename": "report.pdf",
        "created_at": T0,
        "upload_count": 1,
        "last_upload_at": T0,
    }
    link = world.queries().download(uid(report), user.caller)
    assert link["filename"] == "report.pdf" and link["hash"] == sha(REPORT)
    assert link["download_url"].startswith(f"https://fake-s3/{BUCKET}/{report}?")


@pytest.mark.parametrize("user", [BOB, DAVE], ids=["other-tenant", "no-tenant-group"])
@pytest.mark.parametrize("route", ["metadata", "download"])
def test_an_upload_of_another_tenant_is_404_like_a_missing_one(
    world: Tenancy, report: str, user: ApiUser, route: str
) -> None:
    read = getattr(world.queries(), route)
    theirs = error_of(lambda: read(uid(report), user.caller))
    missing = error_of(lambda: read("c" * 32, user.caller))
    assert isinstance(theirs, NotFound) and theirs.status == 404 and theirs.code == "not_found"
    assert json.dumps(theirs.to_body()).replace(uid(report), "ID") == json.dumps(missing.to_body()).replace(
        "c" * 32, "ID"
    )


def test_a_pending_upload_of_another_tenant_is_404_not_409(world: Tenancy) -> None:
    """NotReady (409) would tell bob that the id exists."""
    key = world.upload(b"not yet put", user=ALICE)
    assert isinstance(error_of(lambda: world.queries().download(uid(key), CAROL.caller)), NotReady)
    assert isinstance(error_of(lambda: world.queries().download(uid(key), BOB.caller)), NotFound)
    assert isinstance(error_of(lambda: world.queries().metadata(uid(key), BOB.caller)), NotFound)
    assert world.queries().metadata(uid(key), CAROL.caller)["status"] == "pending"


def test_an_admin_sees_any_upload_with_the_global_record(world: Tenancy, report: str) -> None:
    world.tick()
    bob_key = world.upload(REPORT, "bob.pdf", user=BOB)
    world.ingest(bob_key)
    view = world.queries().metadata(uid(bob_key), ADMIN.caller)
    assert view["status"] == "stored" and view["filename"] == "bob.pdf"
    # the global record: the first uploader's filename and date, every tenant's uploads
    assert view["file"]["filename"] == "report.pdf" and view["file"]["upload_count"] == 2
    assert view["file"]["created_at"] == T0
    link = world.queries().download(uid(bob_key), ADMIN.caller)
    assert link["filename"] == "bob.pdf" and link["download_url"].startswith(f"https://fake-s3/{BUCKET}/{report}?")


def test_the_owner_sees_its_upload_after_leaving_the_tenant(world: Tenancy, report: str) -> None:
    """owner OR same tenant: alice, moved to tenant initech, still sees the upload she made (not the content,
    which initech does not hold)."""
    moved = caller_from_claims(ALICE.claims() | {"cognito:groups": "[tenant-initech]"})
    assert moved.owner == ALICE.sub and moved.tenant == "initech"
    view = world.queries().metadata(uid(report), moved)
    assert view["status"] == "stored" and "file" not in view
    assert isinstance(error_of(lambda: world.queries().metadata(sha(REPORT), moved)), NotFound)
    # someone else of initech is not the owner
    other = Caller(owner=CAROL.sub, tenant="initech", is_admin=False)
    assert isinstance(error_of(lambda: world.queries().metadata(uid(report), other)), NotFound)


def test_personal_tenants_are_separate(world: Tenancy) -> None:
    key = world.upload(b"dave's notes", "notes.txt", user=DAVE)
    world.ingest(key)
    assert world.queries().metadata(uid(key), DAVE.caller)["file"]["filename"] == "notes.txt"
    assert world.queries().metadata(sha(b"dave's notes"), DAVE.caller)["upload_count"] == 1
    for user in (ERIN, ALICE):
        assert isinstance(error_of(lambda u=user: world.queries().metadata(uid(key), u.caller)), NotFound)
        assert isinstance(error_of(lambda u=user: world.queries().metadata(sha(b"dave's notes"), u.caller)), NotFound)
    assert world.ref("user:" + DAVE.sub, b"dave's notes") is not None


# ---------------------------------------------------------------------------------------------- GET by hash
@pytest.mark.parametrize("user", [ALICE, CAROL], ids=["owner", "same-tenant"])
def test_content_the_tenant_holds_is_the_tenants_view(world: Tenancy, report: str, user: ApiUser) -> None:
    view = world.queries().metadata(sha(REPORT), user.caller)
    assert view["filename"] == "report.pdf" and view["upload_count"] == 1 and view["created_at"] == T0
    link = world.queries().download(sha(REPORT), user.caller)
    assert link["filename"] == "report.pdf" and link["size"] == len(REPORT)


@pytest.mark.parametrize("user", [BOB, DAVE, ERIN], ids=["other-tenant", "no-tenant-group", "another-personal"])
@pytest.mark.parametrize("route", ["metadata", "download"])
def test_content_of_another_tenant_is_404_never_403(world: Tenancy, report: str, user: ApiUser, route: str) -> None:
    read = getattr(world.queries(), route)
    theirs = error_of(lambda: read(sha(REPORT), user.caller))
    missing = error_of(lambda: read("b" * 64, user.caller))
    assert isinstance(theirs, NotFound) and not isinstance(theirs, Forbidden)
    assert json.dumps(theirs.to_body()).replace(sha(REPORT), "H") == json.dumps(missing.to_body()).replace(
        "b" * 64, "H"
    )


def test_an_admin_reads_the_global_record_by_hash(world: Tenancy, report: str) -> None:
    world.tick()
    world.ingest(world.upload(REPORT, "copy.pdf", user=CAROL))
    later = world.tick()
    world.ingest(world.upload(REPORT, "bob.pdf", user=BOB))
    view = world.queries().metadata(sha(REPORT), ADMIN.caller)
    assert view["filename"] == "report.pdf" and view["upload_count"] == 3
    assert view["created_at"] == T0 and view["last_upload_at"] == later
    assert world.queries().download(sha(REPORT), ADMIN.caller)["filename"] == "report.pdf"


def test_a_tenants_view_is_its_own_filename_count_and_dates(world: Tenancy, report: str) -> None:
    """No non-admin response reveals another tenant's filename, upload count or dates."""
    bob_time = world.tick(30)
    bob_key = world.upload(REPORT, "bob.pdf", user=BOB)
    world.ingest(bob_key)
    world.tick()
    world.ingest(world.upload(REPORT, "again.pdf", user=CAROL))  # acme's second upload
    bob_view = world.queries().metadata(sha(REPORT), BOB.caller)
    assert bob_view == {
        "hash": sha(REPORT),
        "size": len(REPORT),
        "content_type": "text/plain",
        "filename": "bob.pdf",
        "created_at": bob_time,
        "upload_count": 1,
        "last_upload_at": bob_time,
    }
    responses = [
        bob_view,
        world.queries().metadata(uid(bob_key), BOB.caller),
        world.queries().download(sha(REPORT), BOB.caller),
        world.queries().download(uid(bob_key), BOB.caller),
    ]
    text = json.dumps(responses)
    assert "report.pdf" not in text and "again.pdf" not in text and T0 not in text
    acme = world.queries().metadata(sha(REPORT), ALICE.caller)
    assert acme["filename"] == "report.pdf" and acme["upload_count"] == 2 and acme["created_at"] == T0


# ---------------------------------------------------------------------------------------------- /admin/*
@pytest.mark.parametrize("user", [ALICE, BOB, DAVE], ids=["tenant-user", "other-tenant", "no-tenant-group"])
def test_admin_routes_are_403_for_non_admins(world: Tenancy, report: str, user: ApiUser) -> None:
    for call in (lambda: world.queries().stats(user.caller), lambda: world.queries().hashes(None, None, user.caller)):
        refused = error_of(call)
        assert isinstance(refused, Forbidden) and refused.status == 403 and refused.code == "forbidden"


def test_admin_routes_answer_admins(world: Tenancy, report: str) -> None:
    world.ingest(world.upload(REPORT, "bob.pdf", user=BOB))
    stats = world.queries().stats(ADMIN.caller)
    assert stats["total_files"] == 1 and stats["total_uploads"] == 2 and stats["duplicates_avoided"] == 1
    listing = world.queries().hashes(None, None, ADMIN.caller)
    assert listing["count"] == 1 and listing["items"][0]["filename"] == "report.pdf"


# ---------------------------------------------------------------------------------------------- the precheck
def test_the_precheck_answers_409_for_the_tenants_content(world: Tenancy, report: str) -> None:
    stamp = world.tick()
    answer = world.precheck(CAROL, REPORT, "carol.pdf")
    assert answer.status == 409 and answer.body["duplicate"] is True
    assert answer.body["file"] == {
        "hash": sha(REPORT),
        "size": len(REPORT),
        "content_type": "text/plain",
        "filename": "report.pdf",  # the tenant's first filename
        "created_at": T0,
        "upload_count": 2,
        "last_upload_at": stamp,
    }
    # the caller's own upload record, processed at once
    own = world.repo.uploads[answer.body["upload_id"]]
    assert own["status"] == "duplicate" and own["owner"] == CAROL.sub and own["tenant"] == "acme"
    assert own["hash"] == sha(REPORT) and own["filename"] == "carol.pdf"
    assert world.queries().metadata(answer.body["upload_id"], CAROL.caller)["status"] == "duplicate"
    assert isinstance(error_of(lambda: world.queries().metadata(answer.body["upload_id"], BOB.caller)), NotFound)
    ref = world.ref("acme", REPORT)
    assert ref is not None and ref["upload_count"] == 2 and ref["last_upload_at"] == stamp
    totals = world.totals()
    assert totals["duplicates_avoided"] == 1 and totals["total_s3_size_saved"] == len(REPORT)
    assert totals["total_uploads"] == 2 and world.repo.files[sha(REPORT)]["upload_count"] == 2
    assert len(world.objects.presigned) == 1  # alice's only
    world.assert_invariants()


@pytest.mark.parametrize("user", [BOB, DAVE], ids=["named-tenant", "tenant-of-one"])
def test_the_precheck_counts_in_the_callers_own_tenant(world: Tenancy, report: str, user: ApiUser) -> None:
    """Once the caller's tenant holds the content too (its own upload), its precheck is a 409 on ITS reference:
    its filename and count, never acme's."""
    world.ingest(world.upload(REPORT, "own.pdf", user=user))
    answer = world.precheck(user, REPORT, "again.pdf")
    assert answer.status == 409 and answer.body["file"]["filename"] == "own.pdf"
    assert answer.body["file"]["upload_count"] == 2
    own = world.repo.uploads[answer.body["upload_id"]]
    assert own["tenant"] == user.caller.tenant and own["owner"] == user.sub
    mine, acme = world.ref(user.caller.tenant, REPORT), world.ref("acme", REPORT)
    assert mine is not None and mine["upload_count"] == 2 and acme is not None and acme["upload_count"] == 1
    world.assert_invariants()


@pytest.mark.parametrize("user", [BOB, DAVE, ADMIN], ids=["other-tenant", "no-tenant-group", "admin"])
def test_the_precheck_of_another_tenants_content_issues_an_upload(world: Tenancy, report: str, user: ApiUser) -> None:
    """No existence oracle: content held only by other tenants answers exactly like unknown content (201 and a
    presigned PUT), counts nothing, changes no record. An admin prechecks as a user of its own tenant."""
    before = (world.totals(), {h: dict(f) for h, f in world.repo.files.items()}, dict(world.repo.tenant_refs))
    transactions = world.repo.transactions
    held_elsewhere = world.precheck(user, REPORT, "mine.pdf")
    unknown = world.precheck(user, b"never stored" * 41, "mine.pdf")
    assert held_elsewhere.status == unknown.status == 201
    assert set(held_elsewhere.body) == set(unknown.body) and "upload_url" in held_elsewhere.body
    assert "report.pdf" not in json.dumps(held_elsewhere.body)
    assert (world.totals(), world.repo.files, world.repo.tenant_refs) == before
    record = world.repo.uploads[held_elsewhere.body["upload_id"]]
    assert record["status"] == "pending" and record["owner"] == user.sub and record["tenant"] == user.caller.tenant
    assert world.repo.transactions == transactions


def test_the_precheck_of_content_no_tenant_holds_issues_an_upload(world: Tenancy) -> None:
    """A direct put is stored without any tenant reference: no tenant's precheck answers 409 for it."""
    data = b"put straight into the bucket"
    expect(world.ingest(world.put_direct(PREFIX + "direct.txt", data)), Outcome.STORED)
    assert world.precheck(ALICE, data).status == 201 and world.totals()["duplicates_avoided"] == 0


def test_a_precheck_whose_reference_vanished_issues_an_upload(world: Tenancy, report: str) -> None:
    """The tenant's reference disappears between the precheck's read and its transaction: TenantRefChanged,
    the next look finds no reference → 201, nothing counted, no duplicate record."""

    def reference_removed() -> None:
        del world.repo.tenant_refs[("acme", sha(REPORT))]
        world.repo.uploads[uid(report)]["status"] = "deleted"  # with the upload it counted

    world.repo.after_tenant_file = reference_removed
    answer = world.precheck(CAROL, REPORT)
    assert answer.status == 201 and world.repo.uploads[answer.body["upload_id"]]["status"] == "pending"
    assert world.repo.transactions == 2 and world.repo.committed == 1  # alice's ingest, carol's refused precheck
    assert world.totals()["duplicates_avoided"] == 0 and world.repo.files[sha(REPORT)]["upload_count"] == 1
    assert world.ref("acme", REPORT) is None
    assert not any(u.get("status") == "duplicate" for u in world.repo.uploads.values())


# ---------------------------------------------------------------------------------------------- the ingest
def test_a_cross_tenant_duplicate_is_stored_for_the_uploader(world: Tenancy, report: str) -> None:
    stamp = world.tick()
    bob_key = world.upload(REPORT, "bob.pdf", user=BOB)
    result = world.ingest(bob_key)
    # physically a duplicate: counted, its bytes deleted
    assert result.outcome == Outcome.DUPLICATE and result.deleted and result.bytes_saved == len(REPORT)
    assert (BUCKET, bob_key) not in world.objects.objects and (BUCKET, bob_key) in world.objects.deleted
    assert (BUCKET, report) in world.objects.objects
    # for bob's tenant: new
    assert result.detail["tenant"] == "globex" and result.detail["upload_status"] == "stored"
    assert world.status(bob_key) == "stored"
    assert (world.repo.get_event(str(result.event_key)) or EventRecord("")).outcome == "duplicate"
    assert world.ref("globex", REPORT) == {
        "tenant": "globex",
        "hash": sha(REPORT),
        "filename": "bob.pdf",
        "content_type": "text/plain",
        "size": len(REPORT),
        "created_at": stamp,
        "first_upload_id": uid(bob_key),
        "upload_count": 1,
        "last_upload_at": stamp,
    }
    alice_ref = world.ref("acme", REPORT)
    assert alice_ref is not None and alice_ref["upload_count"] == 1 and alice_ref["last_upload_at"] == T0
    assert world.totals() == {
        "total_files": 1,
        "total_bytes_stored": len(REPORT),
        "total_uploads": 2,
        "duplicates_avoided": 1,
        "total_s3_size_saved": len(REPORT),
        "deleted_uploads": 0,
    }
    assert world.repo.files[sha(REPORT)]["upload_count"] == 2
    # bob downloads the canonical bytes under his own filename
    link = world.queries().download(uid(bob_key), BOB.caller)
    assert link["filename"] == "bob.pdf" and link["download_url"].startswith(f"https://fake-s3/{BUCKET}/{report}?")
    world.assert_invariants()


@pytest.mark.parametrize("user", [ALICE, CAROL], ids=["owner", "same-tenant"])
def test_a_same_tenant_duplicate_is_a_duplicate(world: Tenancy, report: str, user: ApiUser) -> None:
    stamp = world.tick()
    key = world.upload(REPORT, "again.pdf", user=user)
    result = world.ingest(key)
    assert result.outcome == Outcome.DUPLICATE and result.deleted and (BUCKET, key) not in world.objects.objects
    assert result.detail["upload_status"] == "duplicate" and world.status(key) == "duplicate"
    ref = world.ref("acme", REPORT)
    assert ref is not None and ref["upload_count"] == 2 and ref["last_upload_at"] == stamp
    assert ref["filename"] == "report.pdf" and ref["created_at"] == T0  # the tenant's first
    assert world.totals()["duplicates_avoided"] == 1 and world.totals()["total_uploads"] == 2
    assert set(world.repo.tenant_refs) == {("acme", sha(REPORT))}
    world.assert_invariants()


def test_a_direct_put_is_ingested_without_tenant_and_visible_to_admins(world: Tenancy) -> None:
    data = b"operator's direct put"
    key = world.put_direct(PREFIX + "direct.txt", data)
    result = world.ingest(key)
    assert result.outcome == Outcome.STORED and result.upload_id is None and "tenant" not in result.detail
    assert world.repo.tenant_refs == {} and world.repo.uploads == {}
    assert world.queries().metadata(sha(data), ADMIN.caller)["filename"] == "direct.txt"
    assert isinstance(error_of(lambda: world.queries().metadata(sha(data), ALICE.caller)), NotFound)
    # a tenant uploading that content later: physically a duplicate, new for the tenant
    key = world.upload(data, "mine.txt", user=ALICE)
    result = world.ingest(key)
    assert result.outcome == Outcome.DUPLICATE and world.status(key) == "stored"
    assert world.queries().metadata(sha(data), ALICE.caller)["filename"] == "mine.txt"
    # another direct put of it: a duplicate, no tenant's reference moves
    result = world.ingest(world.put_direct(PREFIX + "direct-2.txt", data))
    assert result.outcome == Outcome.DUPLICATE and result.deleted and "tenant" not in result.detail
    ref = world.ref("acme", data)
    assert ref is not None and ref["upload_count"] == 1 and len(world.repo.tenant_refs) == 1
    assert world.totals()["duplicates_avoided"] == 2 and world.repo.files[sha(data)]["upload_count"] == 3
    world.assert_invariants()


def test_a_redelivered_cross_tenant_duplicate_changes_nothing(world: Tenancy, report: str) -> None:
    """The function died between bob's commit and the delete: the redelivery deletes, and neither the tenant
    references nor the counters nor bob's status move."""

    class Crash(Exception):
        pass

    def crash(result: IngestResult) -> None:
        raise Crash

    bob_key = world.upload(REPORT, "bob.pdf", user=BOB)
    with pytest.raises(Crash):
        world.ingest(bob_key, after_commit=crash)
    refs, totals = copy.deepcopy(world.repo.tenant_refs), world.totals()
    again = world.ingest(bob_key)
    assert again.outcome == Outcome.REPLAY and again.detail["recorded_outcome"] == "duplicate" and again.deleted
    assert world.repo.tenant_refs == refs and world.totals() == totals
    assert world.status(bob_key) == "stored" and (BUCKET, bob_key) not in world.objects.objects
    world.assert_invariants()


# ---------------------------------------------------------------------------------------------- races
@dataclass
class CommitLog:
    """Wraps the fake's ingest commits: (object key, kind, tenant share's `held`, the conflict raised or None)
    per call,
    and an optional `before` that runs once before the first commit matching `when`."""

    world: Tenancy
    calls: list[tuple[str, str, bool | None, str | None]] = field(default_factory=list)
    before: Callable[[], None] | None = None
    when: Callable[[str, TenantShare | None], bool] = lambda kind, share: True

    def install(self) -> CommitLog:
        repo = self.world.repo
        for kind, real in (("stored", repo.commit_stored), ("duplicate", repo.commit_duplicate)):
            setattr(repo, f"commit_{kind}", self._wrap(kind, real))
        return self

    def _wrap(self, kind: str, real: Callable[..., None]) -> Callable[..., None]:
        def commit(version: ObjectVersion, **kwargs: Any) -> None:
            share: TenantShare | None = kwargs.get("tenant")
            if self.before is not None and self.when(kind, share):
                hook, self.before = self.before, None
                hook()
            try:
                real(version, **kwargs)
            except CommitRefused as refused:
                self.calls.append((version.key, kind, share.held if share else None, type(refused).__name__))
                raise
            self.calls.append((version.key, kind, share.held if share else None, None))

        return commit


def test_the_tenant_reference_appears_before_the_commit(world: Tenancy, report: str) -> None:
    """bob's ingest has learned that globex does not hold the content; before its commit another globex upload
    commits (the reference appears): TenantRefChanged → redone as a duplicate for globex."""
    first, second = world.upload(REPORT, "one.pdf", user=BOB), world.upload(REPORT, "two.pdf", user=BOB)
    log = CommitLog(world)
    log.when = lambda kind, share: share is not None and not share.held
    log.before = lambda: expect(world.ingest(second), Outcome.DUPLICATE)
    log.install()
    result = world.ingest(first)
    assert result.outcome == Outcome.DUPLICATE and result.deleted
    mine = [call[1:] for call in log.calls if call[0] == first]
    assert mine[-2:] == [("duplicate", False, "TenantRefChanged"), ("duplicate", True, None)]
    assert result.attempts == len(mine)
    assert world.status(second) == "stored" and world.status(first) == "duplicate"
    assert result.detail["upload_status"] == "duplicate"
    ref = world.ref("globex", REPORT)
    assert ref is not None and ref["upload_count"] == 2 and ref["filename"] == "two.pdf"
    assert world.totals() == {
        "total_files": 1,
        "total_bytes_stored": len(REPORT),
        "total_uploads": 3,
        "duplicates_avoided": 2,
        "total_s3_size_saved": 2 * len(REPORT),
        "deleted_uploads": 0,
    }
    assert world.repo.files[sha(REPORT)]["upload_count"] == 3
    world.assert_invariants()


def test_the_tenant_reference_disappears_before_the_commit(world: Tenancy, report: str) -> None:
    """carol's ingest read acme as holding the content; before its commit the reference is removed (with the
    upload it counted): TenantRefChanged → redone as new for acme, the reference created again as carol's."""

    def reference_removed() -> None:
        del world.repo.tenant_refs[("acme", sha(REPORT))]
        world.repo.uploads[uid(report)]["status"] = "deleted"

    stamp = world.tick()
    key = world.upload(REPORT, "carol.pdf", user=CAROL)
    log = CommitLog(world).install()
    world.repo.after_state = reference_removed
    result = world.ingest(key)
    assert result.outcome == Outcome.DUPLICATE and result.deleted and result.detail["upload_status"] == "stored"
    assert log.calls == [(key, "duplicate", True, "TenantRefChanged"), (key, "duplicate", False, None)]
    assert result.attempts == 2 and world.status(key) == "stored"
    assert world.ref("acme", REPORT) == {
        "tenant": "acme",
        "hash": sha(REPORT),
        "filename": "carol.pdf",
        "content_type": "text/plain",
        "size": len(REPORT),
        "created_at": stamp,
        "first_upload_id": uid(key),
        "upload_count": 1,
        "last_upload_at": stamp,
    }
    totals = world.totals()
    assert totals["total_uploads"] == 2 and totals["duplicates_avoided"] == 1 and totals["total_files"] == 1
    assert world.repo.committed == 2
    world.assert_invariants()


def test_two_tenants_first_uploads_of_one_content_race(world: Tenancy) -> None:
    """alice (acme), bob (globex) and carol (acme) upload one new content at once: each ingest reads before the
    next one commits. carol's commit stores it; bob's finds the file (FileAppeared) and no globex reference
    (TenantRefChanged): stored for globex; alice's finds acme's reference (carol's): a duplicate for acme."""
    data = b"everyone's new content" * 30
    alice, bob, carol = (world.upload(data, f"{u.username}.bin", user=u) for u in (ALICE, BOB, CAROL))
    results: dict[str, IngestResult] = {}

    def then_bob() -> None:
        world.repo.after_state = then_carol
        results["bob"] = world.ingest(bob)

    def then_carol() -> None:
        results["carol"] = world.ingest(carol)

    world.repo.after_state = then_bob
    results["alice"] = world.ingest(alice)
    assert {name: r.outcome for name, r in results.items()} == {
        "carol": Outcome.STORED,
        "bob": Outcome.DUPLICATE,
        "alice": Outcome.DUPLICATE,
    }
    assert {name: world.status(k) for name, k in (("alice", alice), ("bob", bob), ("carol", carol))} == {
        "alice": "duplicate",
        "bob": "stored",
        "carol": "stored",
    }
    assert results["bob"].attempts >= 2 and results["alice"].attempts >= 2  # each lost the race to store
    assert world.repo.files[sha(data)]["s3_key"] == carol and world.repo.files[sha(data)]["upload_count"] == 3
    assert set(world.objects.objects) == {(BUCKET, carol)}
    acme, globex = world.ref("acme", data), world.ref("globex", data)
    assert acme is not None and acme["filename"] == "carol.bin" and acme["upload_count"] == 2
    assert globex is not None and globex["filename"] == "bob.bin" and globex["upload_count"] == 1
    assert world.totals() == {
        "total_files": 1,
        "total_bytes_stored": len(data),
        "total_uploads": 3,
        "duplicates_avoided": 2,
        "total_s3_size_saved": 2 * len(data),
        "deleted_uploads": 0,
    }
    assert world.queries().metadata(sha(data), BOB.caller)["filename"] == "bob.bin"
    assert world.queries().metadata(sha(data), ALICE.caller)["filename"] == "carol.bin"
    world.assert_invariants()


# ---------------------------------------------------------------------------------------------- precheck bound
def test_repeated_prechecks_are_bounded_per_tenant_and_window(world: Tenancy, report: str) -> None:
    """A tenant cannot inflate duplicates_avoided / total_s3_size_saved at will: PRECHECK_LIMIT 409s per window,
    counted in the 409's own transaction; then 429 with when to retry, nothing counted; a new window starts
    again."""
    world.settings = dataclasses.replace(world.settings, precheck_limit=3, precheck_window_seconds=3600)
    world.now = NOW.replace(minute=0, second=0) + timedelta(hours=1)
    for user in (ALICE, CAROL, ALICE):  # one tenant's count, whoever asks
        assert world.precheck(user, REPORT).status == 409
    before = world.totals()
    uploads = len(world.repo.uploads)
    world.tick(10)
    refused = error_of(lambda: world.precheck(CAROL, REPORT))
    assert isinstance(refused, TooManyRequests) and refused.status == 429 and refused.code == "too_many_prechecks"
    assert refused.details == {"limit": 3, "window_seconds": 3600, "retry_after": 50 * 60}
    assert world.totals() == before and len(world.repo.uploads) == uploads  # nothing counted, nothing recorded
    assert before["duplicates_avoided"] == 3 and before["total_s3_size_saved"] == 3 * len(REPORT)
    # another tenant holding the content has its own bound
    bob_key = world.upload(REPORT, "bob.pdf", user=BOB)
    world.ingest(bob_key)
    assert world.precheck(BOB, REPORT).status == 409
    # the next window
    world.tick(50)
    assert world.precheck(CAROL, REPORT).status == 409
    assert world.repo.prechecks["acme"]["prechecks"] == 1
    world.assert_invariants()


def test_a_precheck_bound_of_zero_is_unbounded(world: Tenancy, report: str) -> None:
    world.settings = dataclasses.replace(world.settings, precheck_limit=0)
    for _ in range(5):
        assert world.precheck(CAROL, REPORT).status == 409
    assert "acme" not in world.repo.prechecks
