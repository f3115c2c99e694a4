"""The per-user token limit on the DynamoDB store (dfd.adapters.dynamo.pats): concurrent creates cannot pass it, deletes
uncount, expired and TTL-deleted tokens make room, users from before the count are seeded, and a repeated add
counts once; POST /me/tokens echoes unknown fields bounded and printable."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest

from dfd import deps
from dfd.adapters import aws as dfd_aws
from dfd.adapters.dynamo import from_item, to_item
from dfd.adapters.dynamo.pats import DynamoTokenStore
from dfd.core.errors import Conflict
from dfd.identity import codec as identity_codec
from dfd.identity.pats import MAX_TOKENS_PER_USER, PatService
from dfd.identity.ports import PersonalToken
from tests.integration.conftest import Aws
from tests.integration.support import FirstCallsTogether
from tests.support import ALICE, BOB, api_event, call
from tests.unit.fakes.lfs import FakeDirectory

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _store(client: Any = None) -> DynamoTokenStore:
    return DynamoTokenStore(client or dfd_aws.dynamodb(), deps.lfs_settings().tokens_table)


def _service(store: DynamoTokenStore, now: datetime = NOW) -> PatService:
    return PatService(store, FakeDirectory(), now=lambda: now)


def _counted(owner: str) -> set[str]:
    raw = dfd_aws.dynamodb().get_item(
        TableName=deps.lfs_settings().tokens_table, Key=to_item(identity_codec.count_key(owner)), ConsistentRead=True
    )
    return identity_codec.count(from_item(raw["Item"]) if raw.get("Item") else None)[1]


def _create(service: PatService, count: int, name: str = "t", **extra: Any) -> list[str]:
    return [service.create(ALICE.caller, {"name": f"{name}{i}", **extra})["id"] for i in range(count)]


def _hold(count: int, *, days: int = 90, counted: bool = True, start: int = 0) -> list[str]:
    """Alice's tokens written straight into the table (faster than creates; `counted`: with her count item as the
    store keeps it, else as the store wrote them before it counted)."""
    client, table = dfd_aws.dynamodb(), deps.lfs_settings().tokens_table
    ids = [f"{start + i:016x}" for i in range(count)]
    for token_id in ids:
        token = PersonalToken(token_id, ALICE.sub, "alice", "t", "ab" * 32, NOW, NOW + timedelta(days=days))
        client.put_item(TableName=table, Item=to_item(identity_codec.token_item(token)))
    if counted:
        client.update_item(
            TableName=table,
            Key=to_item(identity_codec.count_key(ALICE.sub)),
            UpdateExpression="SET seeded = :yes ADD held :ids",
            ExpressionAttributeValues={":yes": {"BOOL": True}, ":ids": {"SS": ids}},
        )
    return ids


def test_concurrent_creates_cannot_pass_the_limit(aws: Aws) -> None:
    """20 creates at once from 45 held: 5 made, 15 refused 409, 50 held and counted (the probe's 65 before)."""
    _hold(45)
    racing = _service(_store(FirstCallsTogether(dfd_aws.dynamodb(), 20)))

    def create(i: int) -> str:
        try:
            return str(racing.create(ALICE.caller, {"name": f"race{i}"})["id"])
        except Conflict as refused:
            return refused.code

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(create, range(20)))
    assert answers.count("too_many_tokens") == 15
    held = _store().list_for(ALICE.sub)
    assert len(held) == MAX_TOKENS_PER_USER and _counted(ALICE.sub) == {t.token_id for t in held}


def test_a_delete_uncounts_and_makes_room(aws: Aws) -> None:
    store = _store()
    service = _service(store)
    ids = _hold(MAX_TOKENS_PER_USER - 2) + _create(service, 2)
    with pytest.raises(Conflict):
        service.create(ALICE.caller, {"name": "one too many"})
    service.create(BOB.caller, {"name": "bob's own count"})
    assert store.delete(ids[0], ALICE.sub) and not store.delete(ids[0], ALICE.sub)
    assert not store.delete(ids[1], BOB.sub)  # not his: nothing deleted, nothing uncounted
    assert ids[0] not in _counted(ALICE.sub) and ids[1] in _counted(ALICE.sub)
    fresh = service.create(ALICE.caller, {"name": "in the freed place"})["id"]
    assert len(_counted(ALICE.sub)) == MAX_TOKENS_PER_USER and fresh in _counted(ALICE.sub)
    with pytest.raises(Conflict):
        service.create(ALICE.caller, {"name": "full again"})


def test_expired_and_ttl_deleted_tokens_make_room(aws: Aws) -> None:
    store = _store()
    ids = _create(_service(store), 2, "short", expires_in_days=1)
    _hold(MAX_TOKENS_PER_USER - 2)
    table = deps.lfs_settings().tokens_table
    dfd_aws.dynamodb().delete_item(TableName=table, Key={"token_id": {"S": ids[1]}})  # as TTL does: count untouched
    later = _service(store, NOW + timedelta(days=2))  # ids[0] expired, not yet deleted
    later.create(ALICE.caller, {"name": "a"})
    later.create(ALICE.caller, {"name": "b"})
    assert ids[0] not in _counted(ALICE.sub) and ids[1] not in _counted(ALICE.sub)
    assert len(_counted(ALICE.sub)) == MAX_TOKENS_PER_USER
    with pytest.raises(Conflict):
        later.create(ALICE.caller, {"name": "c"})


def test_a_user_from_before_the_count_is_seeded_from_their_tokens(aws: Aws) -> None:
    _hold(MAX_TOKENS_PER_USER, counted=False)  # written as the store did before it counted
    service = _service(_store())
    with pytest.raises(Conflict):
        service.create(ALICE.caller, {"name": "one too many"})
    assert len(_counted(ALICE.sub)) == MAX_TOKENS_PER_USER
    assert _store().delete(f"{0:016x}", ALICE.sub)
    service.create(ALICE.caller, {"name": "now there is room"})


def test_a_repeated_add_writes_and_counts_once(aws: Aws) -> None:
    """A lost response: the same transaction sent again (botocore's retry carries the same ClientRequestToken,
    which DynamoDB answers without applying it twice; the emulator does not, and the store recognises its own
    token's record)."""
    store = _store()
    token = PersonalToken("00000000000000aa", ALICE.sub, "alice", "laptop", "ab" * 32, NOW, NOW + timedelta(days=9))
    _hold(MAX_TOKENS_PER_USER - 1)
    assert store.add(token, MAX_TOKENS_PER_USER)  # the 50th
    assert store.add(token, MAX_TOKENS_PER_USER)  # the same again, at the limit: recognised, not refused
    assert len(store.list_for(ALICE.sub)) == MAX_TOKENS_PER_USER == len(_counted(ALICE.sub))


def test_post_me_tokens_echoes_unknown_fields_bounded_and_escaped(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd.handlers import tokens

    service = _service(_store())
    monkeypatch.setattr(deps, "pat_service", cache(lambda: service))  # deps.reset() clears it at teardown
    body: dict[str, Any] = {"name": "laptop"} | {f"\x1b]0;owned\x07{i:05d}{'z' * 1000}": 1 for i in range(3_000)}
    status, answer = call(tokens.handler, api_event("POST", "/me/tokens", body=body))
    assert status == 400 and answer["error"]["code"] == "validation_error"
    details = answer["error"]["details"]
    assert details["count"] == 3_000 and len(details["fields"]) == 5
    assert all(name.startswith("\\x1b]0;owned\\x07") and name.isprintable() for name in details["fields"])
    assert "3000 unknown field(s)" in answer["error"]["message"] and len(json.dumps(answer)) < 2_000
    assert not _store().list_for(ALICE.sub)


def test_a_user_past_the_limit_from_before_the_count_is_refused(aws: Aws) -> None:
    """101 tokens from before the count: seeded with all of them, checked in batches of 100 keys,
    refused until fewer than 50 are live."""
    _hold(101, counted=False)
    with pytest.raises(Conflict):
        _service(_store()).create(ALICE.caller, {"name": "one too many"})
    assert len(_counted(ALICE.sub)) == 101
