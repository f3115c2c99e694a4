"""DELETE /uploads/{id} on moto: who may delete, 204 and its repetition, 404 vs 403, the deleted
record in metadata and 410 on download, the references (tenant and live count), the tombstone, cancels of
pending uploads (single PUT and multipart), an object arriving for a cancelled upload, and the audit."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from dfd import deps
from dfd.handlers import admin_stats, download, ingest, metadata, upload, uploads
from tests.integration.support import ALICE_CLAIMS, Aws, create, delete, deliver, put, route
from tests.integration.support import DATA as MP_DATA
from tests.support import ADMIN, ALICE, BOB, CAROL, DAVE, ApiUser, LambdaContext, api_event, call, sqs_batch

DATA = b"delete me, twice over\n" * 300
DIGEST = hashlib.sha256(DATA).hexdigest()


def post(data: bytes, name: str, user: ApiUser = ALICE, **extra: Any) -> tuple[int, dict[str, Any]]:
    body = {"filename": name, "size": len(data), **extra}
    return call(upload.handler, api_event("POST", "/upload", body=body, user=user))


def stored(aws: Aws, data: bytes, name: str, user: ApiUser = ALICE) -> str:
    status, answer = post(data, name, user)
    assert status == 201, answer
    assert put(answer, data).status_code == 200
    assert deliver(aws) == {"batchItemFailures": []}
    return str(answer["upload_id"])


def file_item(aws: Aws, digest: str = DIGEST) -> dict[str, Any] | None:
    raw = aws.ddb.get_item(TableName=aws.settings.files_table, Key={"hash": {"S": digest}}, ConsistentRead=True)
    item = raw.get("Item")
    return {k: next(iter(v.values())) for k, v in item.items()} if item else None


def tenant_ref(aws: Aws, tenant: str, digest: str = DIGEST) -> dict[str, Any] | None:
    key = {"tenant": {"S": tenant}, "hash": {"S": digest}}
    raw = aws.ddb.get_item(TableName=aws.settings.tenant_files_table, Key=key, ConsistentRead=True)
    item = raw.get("Item")
    return {k: next(iter(v.values())) for k, v in item.items()} if item else None


def stats() -> dict[str, Any]:
    return call(admin_stats.handler, api_event("GET", "/admin/stats"))[1]


def test_who_may_delete_and_what_a_deleted_upload_shows(aws: Aws) -> None:
    first = stored(aws, DATA, "one.bin")
    assert delete("0" * 32)[0] == 404  # unknown
    status, body = delete(first, BOB)  # another tenant's
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = delete(first, CAROL)  # the same tenant, not the owner
    assert status == 403 and body["error"]["code"] == "not_owner"
    assert delete(first, DAVE)[0] == 404
    status, body = delete("not-an-id")
    assert status == 400 and body["error"]["code"] == "invalid_id"
    assert file_item(aws)["live_refs"] == "1"  # type: ignore[index]

    assert delete(first) == (204, {})
    before = aws.snapshot()
    assert delete(first) == (204, {})  # repeated: nothing changes
    assert delete(first, ADMIN) == (204, {})
    assert aws.snapshot() == before
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{first}"))
    assert status == 200 and shown["status"] == "deleted" and shown["deleted_at"].endswith("Z")
    status, gone = call(download.handler, api_event("GET", f"/download/{first}"))
    assert status == 410 and gone["error"]["code"] == "deleted"
    # the last reference: the tenant holds the content no more (its reference at 0 awaits the reaper), the content
    # is tombstoned (derived from live_refs 0: nothing else written, no new generation)
    ref = tenant_ref(aws, "acme")
    assert ref is not None and ref["upload_count"] == "0" and ref["reap_shard"] and ref["reap_after"].endswith("Z")
    assert call(metadata.handler, api_event("GET", f"/metadata/{DIGEST}"))[0] == 404
    item = file_item(aws)
    assert item is not None and "state" not in item and item["live_refs"] == "0"
    assert item["generation"] == "1" and item["reap_after"].endswith("Z") and item["tombstone_shard"]
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{DIGEST}", user=ADMIN))
    assert status == 200 and shown["state"] == "tombstoned"  # admins see the derived state
    assert call(download.handler, api_event("GET", f"/download/{DIGEST}", user=ADMIN))[0] == 410
    assert stats()["deleted_uploads"] == 1 and stats()["total_files"] == 1
    aws.assert_invariants()


def test_references_are_counted_per_tenant_and_on_the_content(aws: Aws) -> None:
    first = stored(aws, DATA, "one.bin")
    second = stored(aws, DATA, "two.bin", CAROL)  # same tenant: a duplicate
    third = stored(aws, DATA, "three.bin", BOB)  # another tenant
    status, precheck = post(DATA, "four.bin", ALICE, sha256=DIGEST)
    assert status == 409
    assert file_item(aws)["live_refs"] == "4"  # type: ignore[index]
    assert tenant_ref(aws, "acme")["upload_count"] == "3"  # type: ignore[index]
    aws.assert_invariants()

    assert delete(second, ADMIN)[0] == 204  # an admin deletes anyone's
    assert delete(first)[0] == 204
    assert tenant_ref(aws, "acme")["upload_count"] == "1"  # type: ignore[index]
    assert delete(precheck["upload_id"])[0] == 204
    assert tenant_ref(aws, "acme")["upload_count"] == "0"  # type: ignore[index]
    assert tenant_ref(aws, "globex")["upload_count"] == "1"  # type: ignore[index]
    item = file_item(aws)
    assert item is not None and item["live_refs"] == "1" and "state" not in item
    # acme holds it no more: 404 on its hash, 201 on its precheck
    assert call(metadata.handler, api_event("GET", f"/metadata/{DIGEST}"))[0] == 404
    assert post(DATA, "five.bin", ALICE, sha256=DIGEST)[0] == 201
    # bob still downloads the bytes
    status, link = call(download.handler, api_event("GET", f"/download/{third}", user=BOB))
    assert status == 200 and requests.get(link["download_url"], timeout=10).content == DATA
    aws.assert_invariants()
    assert delete(third, BOB)[0] == 204
    assert file_item(aws)["live_refs"] == "0"  # type: ignore[index]
    assert stats()["deleted_uploads"] == 4
    aws.assert_invariants(settled=False)  # five.bin's URL was issued, its bytes never sent


def test_a_reference_at_zero_is_taken_anew_by_the_tenants_next_upload(aws: Aws) -> None:
    """acme's reference went to 0 (the reaper has not run): acme's next upload of the content is a new reference
    — its own filename and dates, out of the reaper's index, `stored` for acme — in one transaction."""
    first = stored(aws, DATA, "one.bin")
    stored(aws, DATA, "bob.bin", BOB)
    assert delete(first)[0] == 204
    again = stored(aws, DATA, "again.bin", CAROL)
    ref = tenant_ref(aws, "acme")
    assert ref is not None and ref["upload_count"] == "1" and ref["filename"] == "again.bin"
    assert ref["first_upload_id"] == again and "reap_shard" not in ref and "reap_after" not in ref
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{again}", user=CAROL))
    assert status == 200 and shown["status"] == "stored" and shown["file"]["filename"] == "again.bin"
    aws.assert_invariants()


def test_a_delete_costs_one_read_and_one_transaction(aws: Aws) -> None:
    """The AWS calls of a delete, counted at the client: GetItem (the upload) and ONE TransactWriteItems."""
    first = stored(aws, DATA, "one.bin")
    second = stored(aws, DATA, "two.bin", CAROL)
    calls: list[str] = []
    client = deps.repository()._db

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    client.meta.events.register("before-call.dynamodb", count)
    try:
        assert delete(first)[0] == 204  # not the last reference
        assert calls == ["GetItem", "TransactWriteItems"]
        calls.clear()
        assert delete(second, CAROL)[0] == 204  # the last
        assert calls == ["GetItem", "TransactWriteItems"]
    finally:
        client.meta.events.unregister("before-call.dynamodb", count)


def test_a_cancelled_upload_and_its_late_object(aws: Aws) -> None:
    status, answer = post(DATA, "late.bin")
    assert status == 201
    assert delete(answer["upload_id"]) == (204, {})
    assert delete(answer["upload_id"]) == (204, {})
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{answer['upload_id']}"))
    assert status == 200 and shown["status"] == "deleted"
    assert put(answer, DATA).status_code == 200  # the presigned URL is still valid
    assert deliver(aws) == {"batchItemFailures": []}
    keys = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket).get("Contents", [])]
    assert answer["key"] not in keys  # deleted by the ingest
    assert file_item(aws) is None
    assert stats()["total_uploads"] == 0 and stats()["deleted_uploads"] == 0  # counted nowhere
    aws.assert_invariants()


def _ingest_deleting_after_its_read(aws: Aws, upload_id: str) -> dict[str, Any]:
    """The queued events ingested, `upload_id` deleted (alice's) between the ingest's first read of the state
    and its transaction: the ingest handler's answer."""
    messages = aws.drain()
    repo = deps.repository()
    read = repo.ingest_state

    def then_deleted(*args: Any) -> Any:
        state = read(*args)
        repo.ingest_state = read  # type: ignore[method-assign]
        assert delete(upload_id)[0] == 204
        return state

    repo.ingest_state = then_deleted  # type: ignore[method-assign]
    try:
        answer: dict[str, Any] = ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext())
    finally:
        del repo.ingest_state
    return answer


def test_an_upload_deleted_while_its_object_is_ingested(aws: Aws) -> None:
    """The ingest read the upload pending; the delete commits before the ingest's transaction: the ingest's
    condition refuses to finish a deleted upload and the object is deleted, counted nowhere."""
    _, answer = post(DATA, "race.bin")
    assert put(answer, DATA).status_code == 200
    assert _ingest_deleting_after_its_read(aws, answer["upload_id"]) == {"batchItemFailures": []}
    assert file_item(aws) is None and stats()["total_uploads"] == 0
    aws.assert_invariants()


def test_a_delete_racing_a_duplicate_ingest_makes_it_resurrect(aws: Aws) -> None:
    """Bob's ingest read the content live (count 1); Alice deletes the last reference before its transaction:
    its `live_refs > 0` condition fails (the real expression), it reads again and resurrects the content with
    its own bytes — never a new reference on content the reaper may free."""
    first = stored(aws, DATA, "one.bin")
    old = file_item(aws)
    assert old is not None
    status, answer = post(DATA, "bob.bin", BOB)
    assert status == 201 and put(answer, DATA).status_code == 200
    assert _ingest_deleting_after_its_read(aws, first) == {"batchItemFailures": []}
    item = file_item(aws)
    assert item is not None and item["live_refs"] == "1" and item["generation"] == "2"
    assert item["s3_key"] == answer["key"] and item["reap_key"] == old["s3_key"]
    status, link = call(download.handler, api_event("GET", f"/download/{answer['upload_id']}", user=BOB))
    assert status == 200 and requests.get(link["download_url"], timeout=10).content == DATA
    aws.assert_invariants()


def test_a_pending_multipart_upload_is_aborted(aws: Aws) -> None:
    answer = create(len(MP_DATA))
    upload_id = answer["upload_id"]
    status, _ = route("POST", upload_id, "parts", ALICE_CLAIMS, {"parts": [{"part_number": 1}]})
    assert status == 200
    assert aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads")
    assert delete(upload_id) == (204, {})
    assert not aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads")
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{upload_id}"))
    assert status == 200 and shown["status"] == "deleted" and shown["deleted_at"].endswith("Z")
    assert delete(upload_id) == (204, {})
    aws.assert_invariants()


def test_tombstoned_content_is_resurrected_by_an_upload_of_its_bytes(aws: Aws) -> None:
    first = stored(aws, DATA, "one.bin")
    old = file_item(aws)
    assert old is not None and old["stores"] == "1" and old["generation"] == "1"
    assert delete(first)[0] == 204
    status, _ = post(DATA, "again.bin", ALICE, sha256=DIGEST)  # no 409 for tombstoned content
    assert status == 201
    second = stored(aws, DATA, "two.bin", BOB)
    item = file_item(aws)
    assert item is not None and "state" not in item and item["generation"] == "2" and item["live_refs"] == "1"
    assert item["s3_key"] == f"uploads/{second}" and item["reap_key"] == old["s3_key"]
    assert item["stores"] == "2" and item["upload_count"] == "2"
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{second}", user=BOB))
    assert status == 200 and shown["status"] == "stored"
    status, link = call(download.handler, api_event("GET", f"/download/{second}", user=BOB))
    assert status == 200 and requests.get(link["download_url"], timeout=10).content == DATA
    third = stored(aws, DATA, "three.bin", CAROL)  # an ordinary duplicate of live content again
    assert file_item(aws)["live_refs"] == "2"  # type: ignore[index]
    assert stats()["duplicates_avoided"] == 1 and stats()["total_uploads"] == 3
    aws.assert_invariants(settled=False)
    assert delete(third, CAROL)[0] == 204 and delete(second, BOB)[0] == 204
    assert file_item(aws)["live_refs"] == "0"  # type: ignore[index]
    aws.assert_invariants(settled=False)


def list_uploads(user: ApiUser = ALICE, **query: str) -> tuple[int, dict[str, Any]]:
    event = api_event("GET", "/uploads", user=user, query=query or None)
    return call(uploads.handler, event)


def test_my_uploads_newest_first_paged_with_a_token_of_the_caller(aws: Aws) -> None:
    first = stored(aws, DATA, "one.bin")
    _, pending = post(b"pending", "two.bin")
    stored(aws, b"bob's", "bob.bin", BOB)
    _, precheck = post(DATA, "three.bin", ALICE, sha256=DIGEST)
    assert delete(first)[0] == 204
    status, page = list_uploads()
    assert status == 200 and page["count"] == 3 and page["last_evaluated_key"] is None
    ids = [item["upload_id"] for item in page["items"]]
    assert set(ids) == {first, pending["upload_id"], precheck["upload_id"]}
    stamps = [item["created_at"] for item in page["items"]]
    assert stamps == sorted(stamps, reverse=True)
    shown = {item["upload_id"]: item for item in page["items"]}
    assert shown[first]["status"] == "deleted" and shown[first]["hash"] == DIGEST and shown[first]["size"] == len(DATA)
    assert shown[pending["upload_id"]]["status"] == "pending" and shown[pending["upload_id"]]["filename"] == "two.bin"
    listed = {"upload_id", "status", "filename", "size", "via", "hash", "created_at", "processed_at", "deleted_at"}
    assert set(shown[first]) <= listed
    assert shown[first]["via"] == "presigned" and shown[precheck["upload_id"]]["via"] == "precheck"

    seen: list[str] = []
    query: dict[str, str] = {"limit": "1"}
    while True:
        status, page = list_uploads(**query)
        assert status == 200 and page["count"] <= 1
        seen += [item["upload_id"] for item in page["items"]]
        if not page["last_evaluated_key"]:
            break
        token = page["last_evaluated_key"]
        status, body = list_uploads(CAROL, limit="1", last_evaluated_key=token)  # another owner's position
        assert status == 400 and body["error"]["code"] == "invalid_token"
        query = {"limit": "1", "last_evaluated_key": token}
    assert seen == ids
    assert list_uploads(limit="0")[0] == 400
    assert list_uploads(last_evaluated_key="bm90IGEgdG9rZW4")[1]["error"]["code"] == "invalid_token"
    status, page = list_uploads(BOB)
    assert status == 200 and page["count"] == 1
    assert list_uploads(CAROL)[1] == {"items": [], "count": 0, "last_evaluated_key": None}
