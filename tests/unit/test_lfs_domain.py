"""The Git LFS Batch API (dfd.lfs.batch), locks (dfd.lfs.locks) and personal access tokens (dfd.identity.pats) on the
in-memory ports: every answer the Batch and locks APIs give, per object and for the whole request."""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from dfd.core.errors import NotFound, ValidationFailed
from dfd.core.notifications import ObjectRef
from dfd.identity.pats import PREFIX, PatService
from dfd.identity.ports import DirectoryUser
from dfd.ingest.service import Ingestor
from dfd.lfs import request as lfsrequest
from dfd.lfs.batch import LfsError, LfsService
from dfd.lfs.locks import LockError, LockService
from dfd.lfs.request import LockQuery, Page
from dfd.uploads.service import UploadService
from tests.support import ALICE, BOB, CAROL, ApiUser
from tests.unit.fakes.lfs import FakeDirectory, FakeLockStore, FakeTokenStore
from tests.unit.ingest_world import BUCKET, NOW, World

BASE = "https://api.example"
GIB = 1024**3


class Lfs(World):
    def lfs(self) -> LfsService:
        uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW, rng=random.Random(3))
        ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=self.sleeps.append)
        return LfsService(self.settings, self.repo, self.objects, uploads, ingestor.ingest, max_objects=5)

    def push(self, data: bytes, user: Any = ALICE, repo: str = "game") -> dict[str, Any]:
        """A whole git-lfs upload of `data`: batch, PUT (when asked), verify. The batch's object answer."""
        oid = hashlib.sha256(data).hexdigest()
        answer = self.batch("upload", [{"oid": oid, "size": len(data)}], user, repo)["objects"][0]
        if "actions" in answer:
            key = answer["actions"]["upload"]["href"].split(f"{BUCKET}/", 1)[1].split("?")[0]
            headers = answer["actions"]["upload"]["header"]
            self.objects.put(
                BUCKET, key, data, checksum=True, metadata={"dfd-tenant": headers["x-amz-meta-dfd-tenant"]}
            )
            upload_id = answer["actions"]["verify"]["href"].rsplit("/", 1)[1]
            self.lfs().verify(user.caller, upload_id, {"oid": oid, "size": len(data)})
        return answer

    def batch(self, operation: str, objects: Any, user: Any = ALICE, repo: str = "game", **extra: Any) -> Any:
        return self.lfs().batch(user.caller, repo, {"operation": operation, "objects": objects, **extra}, BASE)


@pytest.fixture
def world() -> Lfs:
    return Lfs()


def error_of(answer: dict[str, Any]) -> tuple[int, str]:
    return answer["error"]["code"], answer["error"]["message"]


# ------------------------------------------------------------------------------------------- upload
def test_upload_of_new_content_is_a_presigned_put_signing_every_header_and_a_verify(world: Lfs) -> None:
    data = b"x" * 100
    oid = hashlib.sha256(data).hexdigest()
    answer = world.batch("upload", [{"oid": oid, "size": 100}])
    assert answer["transfer"] == "basic" and answer["hash_algo"] == "sha256"
    actions = answer["objects"][0]["actions"]
    header = actions["upload"]["header"]
    assert header["content-type"] == "application/octet-stream"  # git-lfs would sniff one otherwise
    assert header["if-none-match"] == "*" and header["content-length"] == "100"
    assert header["x-amz-checksum-sha256"]  # the oid: S3 refuses other bytes
    assert actions["verify"]["href"].startswith(f"{BASE}/lfs/game/verify/")
    assert "authenticated" not in answer["objects"][0]
    assert "header" not in actions["verify"]  # git sends the batch's credentials


def test_verify_ingests_so_the_oid_is_the_tenants_at_once(world: Lfs) -> None:
    data = b"verify me"
    world.push(data)
    oid = hashlib.sha256(data).hexdigest()
    download = world.batch("download", [{"oid": oid, "size": len(data)}])["objects"][0]
    assert "download" in download["actions"]
    again = world.push(data, repo="other-repo")  # another repo of the tenant: nothing to send
    assert "actions" not in again and "error" not in again
    uploads = [u for u in world.repo.uploads.values() if u.get("hash") == oid]
    assert [u["status"] for u in uploads] == ["stored"]


def test_an_object_the_tenant_holds_pushed_again_writes_nothing(world: Lfs) -> None:
    """A re-push — the same branch again, another repository, another user of the tenant — sends nothing
    and writes nothing: no upload record (My uploads), no duplicate avoided, no reference, no precheck counted;
    the objects it does not hold beside them are registered as ever."""
    held = [b"level one", b"level two"]
    for data in held:
        world.push(data)
    repo = world.repo
    before = copy.deepcopy((repo.uploads, repo.files, repo.tenant_refs, repo.counters, repo.usage, repo.prechecks))
    transactions = repo.transactions
    objects = [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)} for data in held]
    for user, name in ((ALICE, "game"), (ALICE, "other-repo"), (CAROL, "game")):
        answer = world.batch("upload", objects, user, name)["objects"]
        assert answer == objects  # each: no actions, no error
    after = (repo.uploads, repo.files, repo.tenant_refs, repo.counters, repo.usage, repo.prechecks)
    assert after == before and repo.transactions == transactions
    new = {"oid": "d" * 64, "size": 7}
    mixed = world.batch("upload", [*objects, new])["objects"]
    assert mixed[:2] == objects and set(mixed[2]["actions"]) == {"upload", "verify"}
    assert [u["status"] for key, u in repo.uploads.items() if key not in before[0]] == ["pending"]


def test_verify_is_idempotent_after_the_event_was_ingested(world: Lfs) -> None:
    data = b"event first"
    oid = hashlib.sha256(data).hexdigest()
    answer = world.batch("upload", [{"oid": oid, "size": len(data)}])["objects"][0]
    key = answer["actions"]["upload"]["href"].split(f"{BUCKET}/", 1)[1].split("?")[0]
    world.objects.put(BUCKET, key, data, checksum=True, metadata={"dfd-tenant": "acme"})
    world.ingestor().ingest(ObjectRef(BUCKET, key))  # the S3 event got there first
    upload_id = answer["actions"]["verify"]["href"].rsplit("/", 1)[1]
    for _ in range(2):
        world.lfs().verify(ALICE.caller, upload_id, {"oid": oid, "size": len(data)})
    assert [u["status"] for u in world.repo.uploads.values()] == ["stored"]


def test_verify_before_the_bytes_arrived_is_422_and_records_nothing(world: Lfs) -> None:
    oid = hashlib.sha256(b"never sent").hexdigest()
    answer = world.batch("upload", [{"oid": oid, "size": 10}])["objects"][0]
    upload_id = answer["actions"]["verify"]["href"].rsplit("/", 1)[1]
    with pytest.raises(LfsError) as refused:
        world.lfs().verify(ALICE.caller, upload_id, {"oid": oid, "size": 10})
    assert refused.value.status == 422
    assert [u["status"] for u in world.repo.uploads.values()] == ["pending"]


def test_verify_of_another_tenants_upload_or_another_object_is_404(world: Lfs) -> None:
    oid = hashlib.sha256(b"mine").hexdigest()
    answer = world.batch("upload", [{"oid": oid, "size": 4}])["objects"][0]
    upload_id = answer["actions"]["verify"]["href"].rsplit("/", 1)[1]
    for caller, body, ident in (
        (BOB.caller, {"oid": oid, "size": 4}, upload_id),
        (ALICE.caller, {"oid": "0" * 64, "size": 4}, upload_id),
        (ALICE.caller, {"oid": oid, "size": 5}, upload_id),
        (ALICE.caller, {"oid": oid, "size": 4}, "not-an-id"),
    ):
        with pytest.raises(LfsError) as refused:
            world.lfs().verify(caller, ident, body)
        assert refused.value.status == 404
    with pytest.raises(LfsError) as malformed:
        world.lfs().verify(ALICE.caller, upload_id, {"oid": "nope", "size": 4})
    assert malformed.value.status == 422


def test_content_only_another_tenant_holds_is_answered_like_unknown_content(world: Lfs) -> None:
    data = b"shared across tenants"
    world.push(data, user=BOB)
    oid = hashlib.sha256(data).hexdigest()
    theirs = world.batch("upload", [{"oid": oid, "size": len(data)}])["objects"][0]
    unknown = world.batch("upload", [{"oid": "a" * 64, "size": len(data)}])["objects"][0]
    assert set(theirs["actions"]) == set(unknown["actions"]) == {"upload", "verify"}
    download = world.batch("download", [{"oid": oid, "size": len(data)}, {"oid": "a" * 64, "size": len(data)}])
    first, second = download["objects"]
    assert error_of(first) == error_of(second) == (404, "Object does not exist")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"oid": "ABC", "size": 1}, "oid must be a SHA-256"),
        ({"oid": "g" * 64, "size": 1}, "oid must be a SHA-256"),
        ({"oid": "a" * 64, "size": -1}, "size must be a non-negative integer"),
        ({"oid": "a" * 64, "size": "1"}, "size must be a non-negative integer"),
        ({"oid": "a" * 64, "size": 5 * GIB + 1}, "the basic transfer's largest"),
        ({"oid": "a" * 64, "size": 0}, "size must be from 1"),
        ("not an object", "must be a JSON object"),
    ],
)
def test_malformed_objects_are_422_each_while_valid_ones_are_answered(world: Lfs, obj: Any, message: str) -> None:
    answer = world.batch("upload", [obj, {"oid": "b" * 64, "size": 3}])
    bad, good = answer["objects"]
    code, text = error_of(bad)
    assert code == 422 and message in text
    assert "upload" in good["actions"]


def test_a_size_other_than_the_one_the_tenant_holds_is_422(world: Lfs) -> None:
    data = b"twelve bytes"
    world.push(data)
    oid = hashlib.sha256(data).hexdigest()
    for operation in ("upload", "download"):
        answer = world.batch(operation, [{"oid": oid, "size": 13}])["objects"][0]
        assert error_of(answer)[0] == 422


def test_an_oid_named_twice_is_registered_once(world: Lfs) -> None:
    objects = [{"oid": "c" * 64, "size": 5}, {"oid": "c" * 64, "size": 5}, {"oid": "c" * 64, "size": 6}]
    answer = world.batch("upload", objects)["objects"]
    assert answer[0] == answer[1] and error_of(answer[2])[0] == 422
    assert len(world.repo.uploads) == 1


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"operation": "delete", "objects": []}, 422),
        ({"operation": "upload", "objects": "x"}, 422),
        ({"operation": "upload", "objects": [], "transfers": ["tus"]}, 422),
        ({"operation": "upload", "objects": [], "transfers": None}, 422),
        ({"operation": "upload", "objects": [], "transfers": "basic"}, 422),
        ({"operation": "upload", "objects": [], "transfers": ["basic", 1]}, 422),
        ({"operation": "upload", "objects": [], "ref": None}, 422),
        ({"operation": "upload", "objects": [], "ref": "refs/heads/main"}, 422),
        ({"operation": "upload", "objects": [], "ref": {"name": 1}}, 422),
        ({"operation": "upload", "objects": [], "hash_algo": None}, 422),
        ({"operation": "upload", "objects": [], "hash_algo": "sha512"}, 409),
        ({"operation": "upload", "objects": [{"oid": "a" * 64, "size": 1}] * 6}, 413),
        ([], 422),
    ],
)
def test_request_level_errors(world: Lfs, body: Any, status: int) -> None:
    with pytest.raises(LfsError) as refused:
        world.lfs().batch(ALICE.caller, "game", body, BASE)
    assert refused.value.status == status
    assert world.repo.uploads == {}


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"transfers": ["basic"], "hash_algo": "sha256", "ref": {"name": "refs/heads/main"}},
        {"transfers": ["lfs-standalone-file", "basic", "ssh"], "ref": {}},  # git-lfs omits an empty ref name
        {"unknown": True},  # fields the spec may add later are ignored
    ],
)
def test_well_formed_options_are_accepted(world: Lfs, options: dict[str, Any]) -> None:
    answer = world.lfs().batch(ALICE.caller, "game", {"operation": "download", "objects": []} | options, BASE)
    assert answer == {"transfer": "basic", "objects": [], "hash_algo": "sha256"}


@pytest.mark.parametrize("name", [".", "..", "a/b", "", "x" * 101, "sp ace", "\U0003c265", "%F0%BC%89%A5", None])
def test_repository_names_are_one_safe_segment(name: Any) -> None:
    with pytest.raises(LfsError) as refused:
        lfsrequest.repo_name(name)
    assert refused.value.status == 404
    assert lfsrequest.repo_name("game.v2_x-1") == "game.v2_x-1"


def test_over_the_quota_is_507_and_registers_nothing(world: Lfs) -> None:
    world.settings = replace(world.settings, tenant_quota_bytes=1000)
    objects = [{"oid": f"{i:064x}", "size": 400} for i in range(3)]
    with pytest.raises(LfsError) as refused:
        world.batch("upload", objects)
    assert refused.value.status == 507 and "quota is 1000 bytes" in refused.value.message
    assert world.repo.uploads == {}
    assert world.batch("upload", objects[:2])["objects"][1]["actions"]  # what fits is accepted


def test_over_the_pending_limit_is_507(world: Lfs) -> None:
    world.settings = replace(world.settings, tenant_pending_limit=2)
    with pytest.raises(LfsError) as refused:
        world.batch("upload", [{"oid": f"{i:064x}", "size": 4} for i in range(3)])
    assert refused.value.status == 507 and world.repo.uploads == {}


# ------------------------------------------------------------------------------------------- locks
def locks() -> LockService:
    return LockService(FakeLockStore(), now=lambda: NOW)


def query(**values: str) -> LockQuery:
    """GET /locks's query as the handler reads it (path, id, cursor, limit, tenant)."""
    return lfsrequest.lock_query(*(values.get(name) for name in ("path", "id", "cursor", "limit", "tenant")))


FIRST_PAGE = Page(lfsrequest.DEFAULT_LIMIT, None)
ACME_ADMIN = ApiUser("root", "00000000-0000-4000-8000-0000000000aa", ("tenant-acme", "admins"))
ADMIN_ELSEWHERE = ApiUser("ops", "00000000-0000-4000-8000-0000000000ab", ("admins",))  # a tenant of one


def test_lock_create_list_verify_unlock() -> None:
    service = locks()
    status, created = service.create(CAROL.caller, "game", "map.bin")
    assert status == 201 and "message" not in created
    lock = created["lock"]
    assert lock["owner"] == {"name": "carol"} and lock["path"] == "map.bin"
    status, again = service.create(ALICE.caller, "game", "map.bin")
    assert status == 409 and again["lock"] == lock and again["message"]
    assert service.list(ALICE.caller, "game", query(path="map.bin")) == {"locks": [lock]}
    assert service.list(ALICE.caller, "game", query(id=lock["id"])) == {"locks": [lock]}
    assert service.list(ALICE.caller, "game", query(path="other")) == {"locks": []}
    assert service.verify(ALICE.caller, "game", FIRST_PAGE) == {"ours": [], "theirs": [lock]}
    assert service.verify(CAROL.caller, "game", FIRST_PAGE) == {"ours": [lock], "theirs": []}
    assert service.verify(ALICE.caller, "brand-new-repo", FIRST_PAGE) == {"ours": [], "theirs": []}
    with pytest.raises(LockError) as not_hers:
        service.unlock(ALICE.caller, "game", lock["id"])
    assert not_hers.value.status == 403
    with pytest.raises(LockError) as not_even_forced:
        service.unlock(ALICE.caller, "game", lock["id"], force=True)
    assert not_even_forced.value.status == 403
    assert service.unlock(CAROL.caller, "game", lock["id"]) == {"lock": lock}
    with pytest.raises(LockError) as gone:
        service.unlock(CAROL.caller, "game", lock["id"])
    assert gone.value.status == 404


def test_an_admin_forces_an_unlock_and_other_tenants_never_see_a_lock() -> None:
    service = locks()
    _, created = service.create(CAROL.caller, "game", "a.bin")
    assert service.list(BOB.caller, "game", query()) == {"locks": []}  # globex's "game" is another repository
    status, bobs = service.create(BOB.caller, "game", "a.bin")
    assert status == 201 and bobs["lock"]["owner"] == {"name": "bob"}
    assert service.unlock(BOB.caller, "game", bobs["lock"]["id"], force=True) == bobs  # his own only
    assert service.list(CAROL.caller, "game", query()) == {"locks": [created["lock"]]}
    assert service.unlock(ACME_ADMIN.caller, "game", created["lock"]["id"], force=True) == created
    assert service.list(CAROL.caller, "game", query()) == {"locks": []}


def test_an_admin_of_another_tenant_names_the_tenant_to_list_and_force_an_unlock() -> None:
    service = locks()
    _, created = service.create(CAROL.caller, "game", "a.bin")
    lock = created["lock"]
    # the admin's own tenant has no such repository: the lock is not there without naming acme
    assert service.list(ADMIN_ELSEWHERE.caller, "game", query()) == {"locks": []}
    with pytest.raises(LockError) as elsewhere:
        service.unlock(ADMIN_ELSEWHERE.caller, "game", lock["id"], force=True)
    assert elsewhere.value.status == 404
    assert service.list(ADMIN_ELSEWHERE.caller, "game", query(tenant="acme")) == {"locks": [lock]}
    with pytest.raises(LockError) as unforced:  # another user's lock: only with force, as for anyone
        service.unlock(ADMIN_ELSEWHERE.caller, "game", lock["id"], tenant="acme")
    assert unforced.value.status == 403
    assert service.unlock(ADMIN_ELSEWHERE.caller, "game", lock["id"], force=True, tenant="acme") == created
    assert service.list(CAROL.caller, "game", query()) == {"locks": []}


def test_only_an_admin_names_another_tenant() -> None:
    service = locks()
    _, created = service.create(CAROL.caller, "game", "a.bin")
    assert service.list(ALICE.caller, "game", query(tenant="acme"))["locks"] == [created["lock"]]  # her own
    for call in (
        lambda: service.list(BOB.caller, "game", query(tenant="acme")),
        lambda: service.unlock(BOB.caller, "game", created["lock"]["id"], force=True, tenant="acme"),
    ):
        with pytest.raises(LockError) as refused:
            call()
        assert refused.value.status == 403 and "acme" not in refused.value.message
    assert service.list(CAROL.caller, "game", query())["locks"] == [created["lock"]]


def test_locks_are_paged() -> None:
    service = locks()
    for i in range(5):
        service.create(ALICE.caller, "game", f"f{i}.bin")
    first = service.list(ALICE.caller, "game", query(limit="2"))
    assert len(first["locks"]) == 2 and first["next_cursor"]
    seen = [lock["path"] for lock in first["locks"]]
    cursor = first["next_cursor"]
    while cursor:
        page = service.list(ALICE.caller, "game", query(limit="2", cursor=cursor))
        seen += [lock["path"] for lock in page["locks"]]
        cursor = page.get("next_cursor")
    assert sorted(seen) == [f"f{i}.bin" for i in range(5)]
    verified = service.verify(ALICE.caller, "game", lfsrequest.body_page({"limit": 3}))
    assert len(verified["ours"]) == 3 and verified["next_cursor"]


# --------------------------------------------------------------------------- the /lfs request checks
@pytest.mark.parametrize(
    "check",
    [
        lambda: lfsrequest.lock_path(lfsrequest.body_object({"path": ""})),
        lambda: lfsrequest.lock_path(lfsrequest.body_object({"path": "a\nb"})),
        lambda: lfsrequest.lock_path(lfsrequest.body_object({"path": 1})),
        lambda: lfsrequest.body_object([]),
        lambda: lfsrequest.body_object(None),  # a body the route requires
        lambda: lfsrequest.body_object({"path": "a.bin", "ref": None}),
        lambda: lfsrequest.body_object({"path": "a.bin", "ref": "refs/heads/main"}),
        lambda: lfsrequest.body_object({"ref": {"name": 5}}, optional=True),
        lambda: query(limit="0"),
        lambda: query(limit="1001"),
        lambda: query(limit="-1"),
        lambda: query(limit="1.0"),
        lambda: query(limit="\u0663"),  # a digit to str.isdigit, not to the document
        lambda: query(cursor="zz"),
        lambda: query(path="a.bin", limit="true"),  # a filter moots, not excuses
        lambda: query(id="a" * 64, cursor="F"),
        lambda: query(tenant="Acme"),
        lambda: query(tenant="user:"),
        lambda: query(tenant=""),  # the fuzz seed of 676a301: was the caller's own tenant
        lambda: query(limit=""),
        lambda: lfsrequest.body_page({"limit": {}}),  # an object where an integer belongs
        lambda: lfsrequest.body_page({"limit": "5"}),
        lambda: lfsrequest.body_page({"limit": True}),
        lambda: lfsrequest.body_page({"limit": 1.5}),
        lambda: lfsrequest.body_page({"limit": 0}),
        lambda: lfsrequest.body_page({"cursor": 5}),
        lambda: lfsrequest.body_page({"cursor": "F"}),
        lambda: lfsrequest.force({"force": "yes"}),
        lambda: lfsrequest.force({"force": None}),
        lambda: lfsrequest.tenant(5),
        lambda: lfsrequest.body_tenant({"tenant": None}),  # schemathesis seed 1048715133: was the caller's own
    ],
)
def test_malformed_lfs_request_fields_are_422(check: Any) -> None:
    with pytest.raises(LfsError) as refused:
        check()
    assert refused.value.status == 422


def test_well_formed_lfs_request_fields() -> None:
    assert lfsrequest.body_object(None, optional=True) == {}
    assert lfsrequest.body_object({"path": "a b/ü.bin", "ref": {"name": "refs/heads/main"}, "new": 1})["new"] == 1
    assert lfsrequest.body_page({}) == FIRST_PAGE
    assert lfsrequest.body_page({"limit": None, "cursor": None}) == FIRST_PAGE
    assert lfsrequest.body_page({"limit": 7, "cursor": "a" * 64}) == Page(7, "a" * 64)
    assert query() == LockQuery(FIRST_PAGE)
    assert query(path="", id="", cursor="") == LockQuery(FIRST_PAGE)  # empty = absent (git-lfs omits them)
    assert lfsrequest.body_page({"cursor": ""}) == FIRST_PAGE
    assert query(limit="1000", tenant="user:0a-b") == LockQuery(Page(1000, None), tenant="user:0a-b")
    assert lfsrequest.force({}) is False and lfsrequest.force({"force": True}) is True
    assert lfsrequest.body_tenant({}) is None and lfsrequest.body_tenant({"tenant": "acme"}) == "acme"
    assert lfsrequest.lock_id("a" * 64) == "a" * 64 and lfsrequest.upload_id("0" * 32) == "0" * 32


@pytest.mark.parametrize("ident", ["", "A" * 64, "a" * 63, "a" * 65, "g" * 64, None])
def test_malformed_path_ids_are_404_like_unknown_ones(ident: Any) -> None:
    for check in (lfsrequest.lock_id, lfsrequest.upload_id):
        with pytest.raises(LfsError) as refused:
            check(ident)
        assert refused.value.status == 404


# ------------------------------------------------------------------------------------------- tokens
def test_a_token_is_shown_once_stored_as_a_hash_and_revoked_at_once() -> None:
    store = FakeTokenStore()
    directory = FakeDirectory()
    clock_now = [NOW]
    service = PatService(store, directory, now=lambda: clock_now[0])
    created = service.create(ALICE.caller, {"name": "laptop", "expires_in_days": 30})
    token = created["token"]
    assert token.startswith(PREFIX) and set(created) == {"id", "name", "token", "expires_at"}
    (record,) = store.tokens.values()
    assert (
        token not in repr(record)
        and record.username == "alice"
        and record.secret_hash == hashlib.sha256(token.encode()).hexdigest()
    )
    assert service.list(ALICE.caller) == {"tokens": [record.view()]}
    assert "token" not in service.list(ALICE.caller)["tokens"][0]
    assert service.authenticate(token) == ALICE.caller
    assert service.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    with pytest.raises(NotFound):
        service.revoke(BOB.caller, created["id"])  # not his
    clock_now[0] = NOW + timedelta(days=31)
    assert service.authenticate(token) is None  # expired
    clock_now[0] = NOW
    # the token acts as its user as the pool knows them NOW: moved to another tenant, made admin, deleted
    directory.users["alice"] = DirectoryUser(ALICE.sub, ("tenant-globex", "admins"))
    moved = service.authenticate(token)
    assert moved is not None and moved.tenant == "globex" and moved.is_admin
    directory.users["alice"] = DirectoryUser("someone-else", ("tenant-acme",))  # the name reused by another user
    assert service.authenticate(token) is None
    del directory.users["alice"]
    assert service.authenticate(token) is None
    directory.users["alice"] = DirectoryUser(ALICE.sub, ALICE.groups)
    service.revoke(ALICE.caller, created["id"])
    assert service.authenticate(token) is None
    with pytest.raises(NotFound):
        service.revoke(ALICE.caller, created["id"])


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"name": ""},
        {"name": "x" * 101},
        {"name": "a", "expires_in_days": 0},
        {"name": "a", "x": 1},
        {"name": "a", "expires_in_days": 366},
        {"name": "a", "expires_in_days": True},
        {"name": "tab\there"},
    ],
)
def test_malformed_token_requests_are_400(body: Any) -> None:
    with pytest.raises(ValidationFailed):
        PatService(FakeTokenStore(), FakeDirectory()).create(ALICE.caller, body)


def test_a_pull_reads_eventually_consistent_and_again_consistently_only_when_that_misses(
    world: Lfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object verified a moment ago may not be in an eventually consistent read yet: the pull reads again,
    consistently, before it answers 404; an object found at once costs the one cheaper read."""
    data = b"pulled"
    world.push(data)
    oid = hashlib.sha256(data).hexdigest()
    reads: list[bool] = []
    read = world.repo.tenant_file
    stale = {"on": True}

    def tenant_file(tenant: str, digest: str, *, consistent: bool = True) -> Any:
        reads.append(consistent)
        return (None, None) if stale["on"] and not consistent else read(tenant, digest, consistent=consistent)

    monkeypatch.setattr(world.repo, "tenant_file", tenant_file)
    (answer,) = world.batch("download", [{"oid": oid, "size": len(data)}])["objects"]
    assert "download" in answer["actions"] and reads == [False, True]
    reads.clear()
    stale["on"] = False
    (answer,) = world.batch("download", [{"oid": oid, "size": len(data)}])["objects"]
    assert "download" in answer["actions"] and reads == [False]
    reads.clear()
    (answer,) = world.batch("download", [{"oid": "0" * 64, "size": 1}])["objects"]
    assert answer["error"]["code"] == 404 and reads == [False, True]
