"""A user's S3 sessions record on the LfsTokens table (dfd.adapters.dynamo.s3sessions): read back as written,
concurrent issues never pass the live-sessions limit, the record expires by TTL and never shows among the user's
tokens, and the drop zone's writer check reads it with the tokens it names."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from dfd import deps
from dfd.adapters import aws as dfd_aws
from dfd.adapters.dynamo import from_item, to_item
from dfd.adapters.dynamo.pats import DynamoTokenStore
from dfd.adapters.dynamo.s3sessions import DynamoS3SessionStore
from dfd.core import clock
from dfd.core.errors import TooManyRequests
from dfd.identity import codec as identity_codec
from dfd.identity.pats import PatService
from dfd.identity.ports import S3Session
from dfd.identity.s3sessions import KEEP_SECONDS, MAX_LIVE_SESSIONS, S3SessionLedger, S3Writers
from tests.integration.conftest import Aws
from tests.integration.support import FirstCallsTogether
from tests.support import ALICE
from tests.unit.fakes.lfs import FakeDirectory

NOW = datetime.now(UTC).replace(microsecond=0)


def _store(client: Any = None) -> DynamoS3SessionStore:
    return DynamoS3SessionStore(client or dfd_aws.dynamodb(), deps.lfs_settings().tokens_table)


def _session(index: int, token: str | None = None, lasts: int = 900) -> S3Session:
    return S3Session(f"{index:016x}", "acme", "alice", token, NOW, NOW + timedelta(seconds=lasts))


def test_the_record_reads_back_as_written_and_a_stale_version_writes_nothing(aws: Aws) -> None:
    store = _store()
    assert store.sessions(ALICE.sub) == ([], 0)
    written = [_session(1), _session(2, token="0123456789abcdef")]
    assert store.replace(ALICE.sub, written, 0)
    assert store.sessions(ALICE.sub) == (written, 1)
    assert not store.replace(ALICE.sub, [], 0)  # another issue wrote version 1 meanwhile
    assert store.replace(ALICE.sub, written[:1], 1) and store.sessions(ALICE.sub) == (written[:1], 2)


def test_the_record_expires_by_ttl_and_is_never_one_of_the_users_tokens(aws: Aws) -> None:
    store = _store()
    store.replace(ALICE.sub, [_session(1, lasts=3600)], 0)
    raw = dfd_aws.dynamodb().get_item(
        TableName=deps.lfs_settings().tokens_table, Key=to_item(identity_codec.sessions_key(ALICE.sub))
    )["Item"]
    ttl = int(from_item(raw)["ttl"])
    assert ttl >= clock.epoch(NOW + timedelta(seconds=3600 + KEEP_SECONDS))
    assert DynamoTokenStore(dfd_aws.dynamodb(), deps.lfs_settings().tokens_table).list_for(ALICE.sub) == []


def test_concurrent_issues_cannot_pass_the_live_sessions_limit(aws: Aws) -> None:
    """20 issues at once with 5 places left: 5 recorded, 15 refused 429."""
    held = [_session(100 + index) for index in range(MAX_LIVE_SESSIONS - 5)]
    assert _store().replace(ALICE.sub, held, 0)
    racing = S3SessionLedger(_store(FirstCallsTogether(dfd_aws.dynamodb(), 20)), now=lambda: NOW)

    def add(index: int) -> str:
        try:
            racing.add(ALICE.sub, _session(index))
        except TooManyRequests:
            return "429"
        return "added"

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(add, range(20)))
    assert answers.count("added") == 5 and answers.count("429") == 15
    assert len(_store().sessions(ALICE.sub)[0]) == MAX_LIVE_SESSIONS


def test_the_writer_check_reads_the_record_and_the_tokens_it_names(aws: Aws) -> None:
    tokens = DynamoTokenStore(dfd_aws.dynamodb(), deps.lfs_settings().tokens_table)
    directory = FakeDirectory()
    pats = PatService(tokens, directory)
    pat = pats.create(ALICE.caller, {"name": "laptop"})
    S3SessionLedger(_store()).add(ALICE.sub, _session(1, token=pat["id"]))
    writers = S3Writers(_store(), tokens, directory)
    assert writers.admits("acme", ALICE.sub) and not writers.admits("globex", ALICE.sub)
    pats.revoke(ALICE.caller, pat["id"])
    assert not writers.admits("acme", ALICE.sub)
