"""What S3 credentials are worth once issued (dfd.identity.s3sessions): the drop zone makes an upload of an object
only while a session of its owner for its tenant is valid — its user still there, in that tenant, its personal
access token not revoked; anything else is rejected (deleted, counted nowhere), never the old tenant's content.
And the record of a user's sessions stays small however often they ask."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dfd.core.errors import ServiceUnavailable, TooManyRequests
from dfd.identity.pats import PatService
from dfd.identity.ports import DirectoryUser, S3Session
from dfd.identity.s3access import prefix_for
from dfd.identity.s3credentials import IssuedCredentials, S3CredentialsService, S3CredentialsSettings
from dfd.identity.s3sessions import KEEP_SECONDS, MAX_LIVE_SESSIONS, S3SessionLedger, S3Writers, compact
from dfd.ingest.service import Outcome
from dfd.queries.views import listed_upload_view
from tests.support import ALICE
from tests.unit.fakes.lfs import FakeDirectory, FakeS3SessionStore, FakeTokenStore
from tests.unit.ingest_world import BUCKET, NOW, World, expect

SETTINGS = S3CredentialsSettings("arn:aws:iam::1:role/r", BUCKET, "eu-west-3", None)


class Sts:
    def assume_role(self, role_arn: str, session_name: str, policy: str, duration_seconds: int) -> IssuedCredentials:
        return IssuedCredentials("ASIA", "s", "t", NOW + timedelta(seconds=duration_seconds))


class Stack:
    """The issuing side and the drop zone sharing one user pool, token table and sessions record."""

    def __init__(self) -> None:
        self.world = World()
        self.directory = FakeDirectory()
        self.tokens = FakeTokenStore()
        self.sessions = FakeS3SessionStore()
        self.moment = NOW
        self.pats = PatService(self.tokens, self.directory, now=lambda: self.moment)
        ledger = S3SessionLedger(self.sessions, now=lambda: self.moment, sleep=lambda _: None)
        self.issuer = S3CredentialsService(Sts(), SETTINGS, self.directory, ledger, now=lambda: self.moment)
        self.writers = S3Writers(self.sessions, self.tokens, self.directory, now=lambda: self.moment)

    def issue(self, pat: str | None = None, duration: int = 3600) -> str:
        """Credentials for alice (with her access token, or the personal access token `pat`): their prefix."""
        caller = ALICE.caller if pat is None else self.pats.authenticate(pat)
        assert caller is not None
        return str(self.issuer.issue(caller, {"duration_seconds": duration})["prefix"])

    def write(self, prefix: str, name: str, data: bytes = b"written with the credentials") -> Any:
        key = prefix + name
        self.world.objects.put(BUCKET, key, data, content_type="text/plain")
        return key, self.world.ingest(key, writers=self.writers.admits)

    def reason(self, name: str) -> object:
        uploads = (self.world.repo.get_upload(upload_id) for upload_id in self.world.repo.uploads)
        listed = {u.filename: listed_upload_view(u) for u in uploads if u}
        return listed[name]["status"], listed[name].get("reason")


def assert_rejected(stack: Stack, key: str, result: Any, name: str) -> None:
    expect(result, Outcome.REJECTED)
    assert result.deleted and (BUCKET, key) not in stack.world.objects.objects
    assert stack.reason(name) == ("rejected", "writer_revoked")
    assert stack.world.objects.copies == 0 and stack.world.totals()["total_uploads"] == 0
    for tenant in ("acme", "globex"):
        assert stack.world.repo.tenant_usage(tenant).used_bytes == 0


def test_credentials_of_a_valid_user_write_uploads() -> None:
    stack = Stack()
    _, result = stack.write(stack.issue(), "a.txt")
    expect(result, Outcome.MOVED)
    upload = stack.world.repo.get_upload(str(result.upload_id))
    assert upload is not None and (upload.tenant, upload.owner) == ("acme", ALICE.sub)


def test_credentials_issued_with_a_revoked_token_write_nothing_that_is_kept() -> None:
    stack = Stack()
    pat = stack.pats.create(ALICE.caller, {"name": "laptop"})
    prefix = stack.issue(pat["token"])
    expect(stack.write(prefix, "before.txt")[1], Outcome.MOVED)
    stack.pats.revoke(ALICE.caller, pat["id"])
    key, result = stack.write(prefix, "after.txt", b"after the revocation")
    expect(result, Outcome.REJECTED)
    assert result.deleted and (BUCKET, key) not in stack.world.objects.objects
    assert stack.reason("after.txt") == ("rejected", "writer_revoked")
    assert stack.world.counted("rejected_uploads") == 1


def test_a_moved_users_old_credentials_never_write_the_old_tenants_content() -> None:
    stack = Stack()
    prefix = stack.issue()
    assert prefix == prefix_for("acme", ALICE.sub)
    stack.directory.users["alice"] = DirectoryUser(ALICE.sub, ("tenant-globex",))
    key, result = stack.write(prefix, "moved.txt")
    assert_rejected(stack, key, result, "moved.txt")
    # her new credentials write to her new tenant
    expect(stack.write(stack.issue(), "new.txt")[1], Outcome.MOVED)


@pytest.mark.parametrize("change", ["deleted", "taken by another"])
def test_a_deleted_users_credentials_write_nothing_that_is_kept(change: str) -> None:
    stack = Stack()
    prefix = stack.issue()
    if change == "deleted":
        del stack.directory.users["alice"]
    else:
        stack.directory.users["alice"] = DirectoryUser("00000000-0000-4000-8000-0000000000ff", ("tenant-acme",))
    key, result = stack.write(prefix, "gone.txt")
    assert_rejected(stack, key, result, "gone.txt")


def test_an_object_no_recorded_session_may_have_written_is_rejected() -> None:
    stack = Stack()
    key, result = stack.write(prefix_for("acme", ALICE.sub), "unrecorded.txt")
    assert_rejected(stack, key, result, "unrecorded.txt")


def test_a_session_counts_until_keep_seconds_after_its_expiry() -> None:
    stack = Stack()
    prefix = stack.issue(duration=900)
    stack.moment = NOW + timedelta(seconds=900 + KEEP_SECONDS - 60)  # a late event, the sweep's re-drive
    assert stack.writers.admits("acme", ALICE.sub)
    stack.moment = NOW + timedelta(seconds=900 + KEEP_SECONDS)
    assert not stack.writers.admits("acme", ALICE.sub)
    assert prefix == prefix_for("acme", ALICE.sub)


def test_a_session_of_another_tenant_admits_nothing_here() -> None:
    stack = Stack()
    stack.directory.users["alice"] = DirectoryUser(ALICE.sub, ("tenant-globex",))
    stack.issue()
    assert stack.writers.admits("globex", ALICE.sub)
    assert not stack.writers.admits("acme", ALICE.sub)


def test_one_valid_session_of_the_owner_admits_the_prefix() -> None:
    """The key names owner and tenant, not the session: while the user holds valid credentials for the tenant too,
    an object in their prefix is theirs (the role-wide revocation stops the revoked set's writes)."""
    stack = Stack()
    pat = stack.pats.create(ALICE.caller, {"name": "laptop"})
    stack.issue(pat["token"])
    stack.issue()
    stack.pats.revoke(ALICE.caller, pat["id"])
    assert stack.writers.admits("acme", ALICE.sub)


# -- the record ------------------------------------------------------------------------------------------------
def session(index: int, *, issued: int, lasts: int = 900, token: str | None = None, tenant: str = "acme") -> S3Session:
    start = NOW + timedelta(seconds=issued)
    return S3Session(f"{index:016x}", tenant, "alice", token, start, start + timedelta(seconds=lasts))


def test_the_record_stays_bounded_however_often_a_user_asks() -> None:
    stack = Stack()
    pat = stack.pats.create(ALICE.caller, {"name": "laptop"})
    for step in range(2000):  # one every 90 s for two days: at most MAX_LIVE_SESSIONS live at any time
        stack.moment = NOW + timedelta(seconds=90 * step)
        stack.issue(pat["token"] if step % 2 else None, duration=900)
    recorded, _ = stack.sessions.sessions(ALICE.sub)
    assert len(recorded) <= MAX_LIVE_SESSIONS + 2  # the live ones, and the latest expired one per token


def test_compaction_keeps_the_live_and_the_latest_expired_of_each_source() -> None:
    sessions = [
        session(1, issued=0),
        session(2, issued=100, token="t1"),
        session(3, issued=200),
        session(4, issued=300, token="t1"),
        session(5, issued=400, tenant="globex"),
        session(6, issued=-KEEP_SECONDS - 2000),  # expired longer than KEEP_SECONDS ago
        session(7, issued=2000),  # live at 1500
    ]
    kept = compact(sessions, NOW + timedelta(seconds=1500))
    assert [s.session_id[-1] for s in kept] == ["3", "4", "5", "7"]


def test_a_concurrent_write_is_met_by_reading_again_and_a_busy_record_is_503() -> None:
    store = FakeS3SessionStore()
    ledger = S3SessionLedger(store, now=lambda: NOW, sleep=lambda _: None)
    store.conflicts = 2
    ledger.add(ALICE.sub, session(1, issued=0))
    assert [s.session_id for s in store.sessions(ALICE.sub)[0]] == [f"{1:016x}"]
    store.conflicts = 99
    with pytest.raises(ServiceUnavailable):
        ledger.add(ALICE.sub, session(2, issued=0))


def test_the_limit_answers_when_the_oldest_live_session_expires() -> None:
    store = FakeS3SessionStore()
    ledger = S3SessionLedger(store, now=lambda: NOW + timedelta(seconds=100), sleep=lambda _: None)
    for index in range(MAX_LIVE_SESSIONS):
        ledger.add(ALICE.sub, session(index, issued=index, lasts=900))
    with pytest.raises(TooManyRequests) as refused:
        ledger.add(ALICE.sub, session(99, issued=100))
    assert refused.value.details == {"retry_after": 800}
    assert len(store.sessions(ALICE.sub)[0]) == MAX_LIVE_SESSIONS
