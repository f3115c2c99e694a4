"""Per-tenant quotas on moto: POST /upload's own transaction counts the upload against its
tenant's usage item (a conditional ADD), the ingest moves its bytes from pending to stored, GET /me shows it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from dfd import deps
from dfd.handlers import me, upload
from tests.integration.support import Aws, delete, deliver, put
from tests.support import ALICE, BOB, CAROL, ApiUser, api_event, call

QUOTA = 1000
PENDING = 3


@pytest.fixture
def quotas(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("TENANT_QUOTA_BYTES", str(QUOTA))
    monkeypatch.setenv("TENANT_PENDING_LIMIT", str(PENDING))
    deps.reset()
    yield aws
    aws.assert_invariants()


def post(size: int, user: ApiUser = ALICE, **extra: Any) -> tuple[int, dict[str, Any]]:
    body = {"filename": "q.bin", "size": size, **extra}
    return call(upload.handler, api_event("POST", "/upload", body=body, user=user))


def usage(user: ApiUser = ALICE) -> dict[str, Any]:
    status, answer = call(me.handler, api_event("GET", "/me", user=user))
    assert status == 200, answer
    return dict(answer["usage"])


def test_me_describes_the_caller_and_its_limits(quotas: Aws) -> None:
    status, answer = call(me.handler, api_event("GET", "/me", user=ALICE))
    assert status == 200
    assert answer == {
        "owner": ALICE.sub,
        "username": "alice",
        "tenant": "acme",
        "is_admin": False,
        "usage": {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 0, "used_bytes": 0},
        "limits": {"bytes": QUOTA, "pending": PENDING},
    }
    status, anonymous = call(me.handler, api_event("GET", "/me", user=None))
    assert status == 401 and anonymous["error"]["code"] == "unauthorized"


def test_bytes_quota_refuses_with_limit_and_usage(quotas: Aws) -> None:
    assert post(600)[0] == 201
    assert usage() == {"pending_count": 1, "pending_bytes": 600, "stored_bytes": 0, "used_bytes": 600}
    before = quotas.snapshot()
    status, answer = post(401)
    assert status == 403, answer
    assert answer["error"]["code"] == "quota_exceeded"
    assert answer["error"]["details"] == {"limit": QUOTA, "usage": 600, "kind": "bytes"}
    assert quotas.snapshot() == before  # nothing registered, nothing counted
    assert post(400)[0] == 201  # exactly up to the limit
    assert usage()["used_bytes"] == QUOTA
    # the tenant is the unit: carol (acme) shares alice's quota, bob (globex) has his own
    assert post(1, CAROL)[0] == 403
    assert post(QUOTA, BOB)[0] == 201


def test_an_upload_larger_than_the_quota_is_refused_outright(quotas: Aws) -> None:
    status, answer = post(QUOTA + 1)
    assert status == 403 and answer["error"]["details"] == {"limit": QUOTA, "usage": 0, "kind": "bytes"}
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 0, "used_bytes": 0}


def test_pending_limit(quotas: Aws) -> None:
    for _ in range(PENDING):
        assert post(1)[0] == 201
    status, answer = post(1)
    assert status == 403 and answer["error"]["details"] == {"limit": PENDING, "usage": PENDING, "kind": "pending"}


def test_ingest_moves_bytes_from_pending_to_stored_once_per_content(quotas: Aws) -> None:
    data = b"q" * 300
    status, answer = post(len(data))
    assert status == 201 and put(answer, data).status_code == 200
    assert deliver(quotas) == {"batchItemFailures": []}
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 300, "used_bytes": 300}

    # the same content again without its sha256: pending while in flight, then a duplicate the tenant holds
    status, again = post(len(data))
    assert status == 201
    assert usage() == {"pending_count": 1, "pending_bytes": 300, "stored_bytes": 300, "used_bytes": 600}
    assert put(again, data).status_code == 200
    assert deliver(quotas) == {"batchItemFailures": []}
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 300, "used_bytes": 300}

    # announced by its sha256: the precheck answers 409, no upload, no usage
    status, known = post(len(data), sha256=hashlib.sha256(data).hexdigest())
    assert status == 409 and known["duplicate"] is True
    assert usage()["used_bytes"] == 300

    # another tenant uploading the same content: new to globex, stored for it (physically a duplicate)
    status, theirs = post(len(data), BOB)
    assert status == 201 and put(theirs, data).status_code == 200
    assert deliver(quotas) == {"batchItemFailures": []}
    assert usage(BOB) == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 300, "used_bytes": 300}


def test_usage_items_are_invisible_to_stats_and_the_audit(quotas: Aws) -> None:
    data = b"s" * 100
    status, answer = post(len(data))
    assert status == 201 and put(answer, data).status_code == 200
    assert deliver(quotas) == {"batchItemFailures": []}
    items = quotas.ddb.scan(TableName=quotas.settings.tenant_files_table)["Items"]
    assert {"tenant": {"S": "acme"}, "hash": {"S": "u#000"}} in [{k: i[k] for k in ("tenant", "hash")} for i in items]
    assert deps.repository().counter_totals()["total_bytes_stored"] == 100
    # (the fixture's audit recounts every counter against the records: the usage item must not disturb it)


def test_an_upload_released_while_its_ingest_commits_is_not_released_twice(
    quotas: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconcile marks the upload failed (releasing its pending bytes, as the ASL's transaction does) between
    the ingest's read and its commit: the commit is refused on `quota_bytes`, and the retry adds the stored bytes
    without releasing the pending ones again."""
    data = b"r" * 70
    status, answer = post(len(data))
    assert status == 201 and put(answer, data).status_code == 200
    repo = deps.repository()
    read = repo.ingest_state

    def read_then_release(*args: Any, **kwargs: Any) -> Any:
        state = read(*args, **kwargs)
        monkeypatch.setattr(repo, "ingest_state", read)  # once
        s = quotas.settings
        quotas.ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": s.uploads_table,
                        "Key": {"upload_id": {"S": answer["upload_id"]}},
                        "UpdateExpression": "SET #s = :failed REMOVE pending_shard, quota_bytes",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":failed": {"S": "failed"}},
                    }
                },
                {
                    "Update": {
                        "TableName": s.tenant_files_table,
                        "Key": {"tenant": {"S": "acme"}, "hash": {"S": "u#000"}},
                        "UpdateExpression": "ADD c :m, u :q",
                        "ExpressionAttributeValues": {":m": {"N": "-1"}, ":q": {"N": "-70"}},
                    }
                },
            ]
        )
        return state

    monkeypatch.setattr(repo, "ingest_state", read_then_release)
    assert deliver(quotas) == {"batchItemFailures": []}
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 70, "used_bytes": 70}
    assert quotas.ddb.get_item(TableName=quotas.settings.uploads_table, Key={"upload_id": {"S": answer["upload_id"]}})[
        "Item"
    ]["status"] == {"S": "stored"}


def test_multipart_uploads_count_against_the_quota(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    mib = 1024**2
    monkeypatch.setenv("TENANT_QUOTA_BYTES", str(12 * mib))
    deps.reset()
    status, answer = post(10 * mib, multipart=True)
    assert status == 201 and answer["multipart"] is True, answer
    assert usage() == {"pending_count": 1, "pending_bytes": 10 * mib, "stored_bytes": 0, "used_bytes": 10 * mib}
    status, refused = post(5 * mib, multipart=True)
    assert status == 403 and refused["error"]["details"] == {"limit": 12 * mib, "usage": 10 * mib, "kind": "bytes"}


def test_a_cancelled_upload_gives_its_pending_bytes_back(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """DELETE /uploads/{id} of a pending upload (single PUT, or multipart: aborted) releases its quota bytes in
    the same transaction as its status: the tenant can use them again at once, and its pending count too."""
    mib = 1024**2
    monkeypatch.setenv("TENANT_QUOTA_BYTES", str(12 * mib))
    monkeypatch.setenv("TENANT_PENDING_LIMIT", "2")
    deps.reset()
    single = post(6 * mib)[1]
    multi = post(6 * mib, multipart=True)[1]
    assert usage() == {"pending_count": 2, "pending_bytes": 12 * mib, "stored_bytes": 0, "used_bytes": 12 * mib}
    assert post(1)[0] == 403
    assert delete(single["upload_id"])[0] == 204
    assert usage() == {"pending_count": 1, "pending_bytes": 6 * mib, "stored_bytes": 0, "used_bytes": 6 * mib}
    assert delete(multi["upload_id"])[0] == 204
    assert delete(multi["upload_id"])[0] == 204  # repeated: nothing released twice
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 0, "used_bytes": 0}
    for answer in (single, multi):
        record = aws.ddb.get_item(TableName=aws.settings.uploads_table, Key={"upload_id": {"S": answer["upload_id"]}})
        assert record["Item"]["status"] == {"S": "deleted"} and "quota_bytes" not in record["Item"]
    assert post(12 * mib)[0] == 201
    aws.assert_invariants(settled=False)  # nothing was ever PUT


def test_a_delete_frees_stored_bytes_only_when_the_reaper_drops_the_reference(quotas: Aws) -> None:
    """Deleting one of two uploads of a content frees nothing (the tenant still holds it); deleting the last
    leaves the reference at 0, still counted, until the reconcile's reference pass (test_reaper) releases it."""
    data = b"d" * 200
    first, second = post(len(data))[1], post(len(data))[1]
    for answer in (first, second):
        assert put(answer, data).status_code == 200
    assert deliver(quotas) == {"batchItemFailures": []}
    assert usage() == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 200, "used_bytes": 200}
    assert delete(first["upload_id"])[0] == 204
    assert usage()["stored_bytes"] == 200
    assert delete(second["upload_id"])[0] == 204
    assert usage()["stored_bytes"] == 200  # the reference at 0 awaits the reaper
