"""The LFS adapters on moto with the template's tables (dfd.adapters.dynamo.pats, dfd.adapters.dynamo.locks) behave as
the in-memory stores the unit tests use (tests/unit/fakes/lfs.py), and POST/GET/DELETE /me/tokens through their
handler: a token made there is accepted by the /lfs credential check until it is revoked."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest

from dfd import deps
from dfd.adapters import aws as dfd_aws
from dfd.adapters.dynamo.locks import DynamoLockStore
from dfd.adapters.dynamo.pats import DynamoTokenStore
from dfd.identity.pats import PatService
from dfd.lfs.locks import LockService, lock_id
from dfd.lfs.ports import Lock, LockExists
from tests.integration.conftest import Aws
from tests.support import ADMIN, ALICE, BOB, CAROL, api_event, call
from tests.unit.fakes.lfs import FakeDirectory, FakeLockStore, FakeTokenStore

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def stores(aws: Aws) -> tuple[DynamoTokenStore, DynamoLockStore]:
    settings = deps.lfs_settings()
    return (
        DynamoTokenStore(dfd_aws.dynamodb(), settings.tokens_table),
        DynamoLockStore(dfd_aws.dynamodb(), settings.locks_table),
    )


@pytest.mark.parametrize("kind", ["fake", "dynamodb"])
def test_the_token_store_contract(aws: Aws, kind: str) -> None:
    store: Any = FakeTokenStore() if kind == "fake" else stores(aws)[0]
    service = PatService(store, FakeDirectory(), now=lambda: NOW)
    first = service.create(ALICE.caller, {"name": "one"})
    service.create(ALICE.caller, {"name": "two", "expires_in_days": 1})
    service.create(BOB.caller, {"name": "bob's"})
    assert sorted(t["name"] for t in service.list(ALICE.caller)["tokens"]) == ["one", "two"]
    assert store.get(first["id"]).username == "alice"
    assert service.authenticate(first["token"]) == ALICE.caller
    assert not store.delete(first["id"], BOB.caller.owner)
    assert store.delete(first["id"], ALICE.caller.owner)
    assert store.get(first["id"]) is None and service.authenticate(first["token"]) is None


@pytest.mark.parametrize("kind", ["fake", "dynamodb"])
def test_the_lock_store_contract(aws: Aws, kind: str) -> None:
    store: Any = FakeLockStore() if kind == "fake" else stores(aws)[1]
    service = LockService(store, now=lambda: NOW)
    for i in range(5):
        assert service.create(CAROL.caller, "game", f"dir/{i}.bin")[0] == 201
    lock = Lock("acme/game", "f" * 64, "x", CAROL.caller.owner, "carol", NOW)
    store.create(lock)
    with pytest.raises(LockExists) as exists:
        store.create(lock)
    assert exists.value.existing == lock
    paths: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = store.page("acme/game", 2, cursor)
        paths += [item.path for item in page]
        if cursor is None:
            break
    assert sorted(paths) == sorted([f"dir/{i}.bin" for i in range(5)] + ["x"])
    assert store.page("globex/game", 10, None) == ([], None)
    assert not store.delete(Lock("acme/game", "f" * 64, "x", ALICE.caller.owner, "alice", NOW))  # not this lock
    assert store.delete(lock) and store.get("acme/game", "f" * 64) is None
    # an admin of no tenant of acme's forces carol's unlock by naming acme: the conditional delete
    unlocked = service.unlock(ADMIN.caller, "game", lock_id("dir/0.bin"), force=True, tenant="acme")
    assert unlocked["lock"]["path"] == "dir/0.bin" and store.get("acme/game", lock_id("dir/0.bin")) is None


def test_tokens_through_the_handler(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd.handlers import tokens

    # the test users' subs are fixed (tests/support): their directory is the fake (CognitoDirectory: below)
    service = PatService(stores(aws)[0], FakeDirectory())
    monkeypatch.setattr(deps, "pat_service", cache(lambda: service))  # deps.reset() clears it at teardown

    status, created = call(tokens.handler, api_event("POST", "/me/tokens", body={"name": "laptop"}))
    assert status == 201 and created["token"].startswith("dfd_pat_")
    status, listed = call(tokens.handler, api_event("GET", "/me/tokens"))
    assert status == 200 and listed["tokens"] == [
        {k: v for k, v in created.items() if k != "token"} | {"created_at": listed["tokens"][0]["created_at"]}
    ]
    assert json.dumps(listed).find(created["token"]) == -1
    assert deps.credentials().caller(f"Bearer {created['token']}") == ALICE.caller
    status, bad = call(tokens.handler, api_event("POST", "/me/tokens", body={"name": ""}))
    assert status == 400 and bad["error"]["code"] == "validation_error"
    event = api_event("DELETE", f"/me/tokens/{created['id']}", user=BOB)
    event["pathParameters"] = {"id": created["id"]}
    assert call(tokens.handler, event)[0] == 404  # not bob's
    event = api_event("DELETE", f"/me/tokens/{created['id']}")
    event["pathParameters"] = {"id": created["id"]}
    assert call(tokens.handler, event)[0] == 204
    from dfd.core.errors import Unauthorized

    with pytest.raises(Unauthorized):
        deps.credentials().caller(f"Bearer {created['token']}")


def test_the_cognito_directory_answers_the_users_current_groups(aws: Aws) -> None:
    import boto3

    from dfd.adapters.cognito import CognitoDirectory

    idp = boto3.client("cognito-idp")
    pool = idp.create_user_pool(PoolName="users")["UserPool"]["Id"]
    idp.create_group(UserPoolId=pool, GroupName="tenant-acme")
    idp.admin_create_user(UserPoolId=pool, Username="alice")
    idp.admin_add_user_to_group(UserPoolId=pool, Username="alice", GroupName="tenant-acme")
    sub = next(
        a["Value"]
        for a in idp.admin_get_user(UserPoolId=pool, Username="alice")["UserAttributes"]
        if a["Name"] == "sub"
    )
    clock = [0.0]
    directory = CognitoDirectory(idp, pool, clock=lambda: clock[0])
    found = directory.user("alice")
    assert found is not None and found.sub == sub and found.groups == ("tenant-acme",)
    assert directory.user("nobody") is None
    idp.admin_disable_user(UserPoolId=pool, Username="alice")
    assert directory.user("alice") == found  # cached for a minute
    clock[0] += 61
    assert directory.user("alice") is None  # disabled
