"""Personal access tokens (dfd.identity.pats): the per-user limit counted in one conditional step, a conflict on the
count retried with dfd.core.retry's backoff, and unknown fields echoed bounded and printable as POST /upload does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dfd.adapters.dynamo import to_item
from dfd.adapters.dynamo.pats import DynamoTokenStore
from dfd.core.errors import Conflict, TransactionRetryable, ValidationFailed
from dfd.core.retry import CONFLICT_ATTEMPTS, Backoff
from dfd.core.text import ECHO_CHARS, ECHO_ITEMS, printable
from dfd.identity import codec as identity_codec
from dfd.identity.pats import MAX_TOKENS_PER_USER, PatService, parse_create
from dfd.identity.ports import PersonalToken
from tests.support import ALICE, BOB
from tests.unit.fakes.lfs import FakeDirectory, FakeTokenStore

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _token() -> PersonalToken:
    return PersonalToken("0123456789abcdef", ALICE.sub, "alice", "laptop", "ab" * 32, NOW, NOW + timedelta(days=90))


def test_the_limit_counts_live_tokens_and_a_delete_makes_room() -> None:
    clock = [NOW]
    store = FakeTokenStore()
    service = PatService(store, FakeDirectory(), now=lambda: clock[0])
    short = service.create(ALICE.caller, {"name": "short", "expires_in_days": 1})
    ids = [service.create(ALICE.caller, {"name": f"t{i}"})["id"] for i in range(MAX_TOKENS_PER_USER - 1)]
    with pytest.raises(Conflict) as refused:
        service.create(ALICE.caller, {"name": "one too many"})
    assert refused.value.code == "too_many_tokens"
    service.create(BOB.caller, {"name": "another user's"})  # counted per user
    service.revoke(ALICE.caller, ids[0])
    service.create(ALICE.caller, {"name": "in the freed place"})
    with pytest.raises(Conflict):
        service.create(ALICE.caller, {"name": "full again"})
    clock[0] = NOW + timedelta(days=2)  # the short one expired: no longer counted
    service.create(ALICE.caller, {"name": "in the expired one's place"})
    assert short["id"] in store.tokens


def test_the_count_and_the_write_are_one_conditional_transaction() -> None:
    """The count item's ADD is conditioned on the count being below the limit (and seeded), in the SAME
    TransactWriteItems as the token's Put: a create either counts and writes, or does neither."""

    class Client:
        def __init__(self) -> None:
            self.calls: list[tuple[str, dict[str, Any]]] = []

        def __getattr__(self, name: str) -> Any:
            return lambda **kwargs: self.calls.append((name, kwargs)) or {}

    client = Client()
    store = DynamoTokenStore(client, "tokens")
    assert store.add(_token(), MAX_TOKENS_PER_USER)
    ((name, request),) = client.calls  # one call: nothing read first
    assert name == "transact_write_items" and request["ClientRequestToken"]
    count, put = request["TransactItems"]
    update = count["Update"]
    assert (
        update["Key"] == to_item(identity_codec.count_key(ALICE.sub)) and update["UpdateExpression"] == "ADD #held :id"
    )
    assert update["ConditionExpression"] == (
        "attribute_exists(#seeded) AND (attribute_not_exists(#held) OR size(#held) < :limit)"
    )
    assert update["ExpressionAttributeValues"] == {":id": {"SS": [_token().token_id]}, ":limit": {"N": "50"}}
    assert put["Put"]["Item"]["token_id"] == {"S": _token().token_id}
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(token_id)"
    # a delete uncounts in the same transaction as it deletes
    client.calls.clear()
    assert store.delete(_token().token_id, ALICE.sub)
    ((name, request),) = client.calls
    delete, uncount = request["TransactItems"]
    assert delete["Delete"]["ConditionExpression"] == "#o = :o"
    assert uncount["Update"]["UpdateExpression"] == "DELETE #held :id"
    assert uncount["Update"]["ExpressionAttributeValues"] == {":id": {"SS": [_token().token_id]}}


class ConflictedStore(FakeTokenStore):
    def __init__(self, conflicts: int) -> None:
        super().__init__()
        self.conflicts = conflicts
        self.adds = 0

    def add(self, token: PersonalToken, limit: int) -> bool:
        self.adds += 1
        if self.conflicts:
            self.conflicts -= 1
            raise TransactionRetryable("cancelled: ['TransactionConflict']")
        return super().add(token, limit)


def test_a_conflict_on_the_count_is_retried_after_a_pause() -> None:
    store = ConflictedStore(conflicts=2)
    sleeps: list[float] = []
    created = PatService(store, FakeDirectory(), sleep=sleeps.append).create(ALICE.caller, {"name": "a"})
    assert created["id"] in store.tokens and store.adds == 3
    assert len(sleeps) == 2 and all(0 < s <= Backoff.LONGEST for s in sleeps)


def test_conflicts_past_the_attempts_are_a_503() -> None:
    store = ConflictedStore(conflicts=CONFLICT_ATTEMPTS)
    sleeps: list[float] = []
    with pytest.raises(TransactionRetryable):
        PatService(store, FakeDirectory(), sleep=sleeps.append).create(ALICE.caller, {"name": "a"})
    assert store.adds == CONFLICT_ATTEMPTS and len(sleeps) == CONFLICT_ATTEMPTS - 1 and not store.tokens


def test_unknown_fields_are_echoed_bounded_and_printable() -> None:
    body: dict[str, Any] = {"name": "laptop"}
    body.update({f"{i:04d}\x1b[2J\n{'x' * 500}": 1 for i in range(2_000)})
    with pytest.raises(ValidationFailed) as refused:
        parse_create(body)
    details = refused.value.details
    assert details["count"] == 2_000 and len(details["fields"]) == ECHO_ITEMS
    for i, name in enumerate(details["fields"]):
        assert name.isprintable() and name.startswith(f"{i:04d}\\x1b[2J\\n") and name.endswith("…")
        assert len(name) <= ECHO_CHARS + 8  # cut at ECHO_CHARS, then two escapes of 4 and 2 characters
    message = refused.value.message
    assert message.isprintable() and "1995 more" in message and len(json.dumps(refused.value.to_body())) < 2_000


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain name", "plain name"),
        ("\x00\x07\x1b\x7f\x85", "\\x00\\x07\\x1b\\x7f\\x85"),
        ("line\nbreak\ttab\r", "line\\nbreak\\ttab\\r"),
        ("rtl\u202eoverride\u2028sep", "rtl\\u202eoverride\\u2028sep"),
        ("\ud800lone", "\\ud800lone"),
        ("ünïcødé ✓", "ünïcødé ✓"),
    ],
)
def test_printable_escapes_what_a_terminal_or_log_would_act_on(raw: str, shown: str) -> None:
    assert printable(raw) == shown and shown.encode("utf-8")
