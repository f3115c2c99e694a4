"""The drop zone end to end on the template's tables (DynamoDB Local) and bucket (moto): an object written under a
caller's s3/ prefix is moved to its upload key by one event and ingested there by the copy's own event — listed,
readable, deduplicated across tenants — or rejected; replays change nothing, a crash between steps converges."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dfd import deps
from dfd.core.notifications import ObjectRef
from dfd.handlers import download, ingest, me, metadata, upload, uploads
from dfd.identity.s3access import prefix_for
from dfd.reconcile.service import Reconciler
from tests.integration.support import Aws, s3_writer, upload_as
from tests.support import ALICE, BOB, CAROL, ApiUser, LambdaContext, api_event, call, sqs_batch


@pytest.fixture(autouse=True)
def writers(monkeypatch: pytest.MonkeyPatch, aws: Aws) -> None:
    """ALICE, BOB and CAROL write with credentials POST /me/s3-credentials issued (tests/unit/test_s3_writers.py:
    others)."""
    for user in (ALICE, BOB, CAROL):
        s3_writer(monkeypatch, user)


def drop(aws: Aws, data: bytes, name: str, user: ApiUser = ALICE) -> str:
    key = prefix_for(user.caller.tenant, user.caller.owner) + name
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=data, ContentType="text/plain")
    return key


def settle(aws: Aws) -> list[dict[str, Any]]:
    """Deliver what S3 sent until the queue is empty (the drop's event, then its copy's)."""
    results = []
    while messages := aws.drain():
        result = ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext())
        assert result == {"batchItemFailures": []}
        results.append(result)
    return results


def listed(user: ApiUser = ALICE) -> dict[str, dict[str, Any]]:
    status, page = call(uploads.handler, api_event("GET", "/uploads", user=user, query={"limit": "100"}))
    assert status == 200, page
    return {item["filename"]: item for item in page["items"]}


def keys(aws: Aws, prefix: str) -> list[str]:
    listing = aws.s3.list_objects_v2(Bucket=aws.settings.bucket, Prefix=prefix).get("Contents", [])
    return [o["Key"] for o in listing]


def test_new_content_is_stored_listed_and_readable(aws: Aws) -> None:
    data = b"through the drop zone"
    key = drop(aws, data, "docs/report.txt")
    settle(aws)
    item = listed()["docs/report.txt"]
    assert item["status"] == "stored" and item["size"] == len(data)
    assert item["hash"] == hashlib.sha256(data).hexdigest()
    assert keys(aws, "s3/") == [] and keys(aws, "uploads/") == [f"uploads/{item['upload_id']}"]
    body = aws.s3.get_object(Bucket=aws.settings.bucket, Key=f"uploads/{item['upload_id']}")["Body"].read()
    assert body == data
    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{item['upload_id']}"))
    assert status == 200 and meta["status"] == "stored" and meta["filename"] == "docs/report.txt"
    status, answer = call(download.handler, api_event("GET", f"/download/{item['upload_id']}"))
    assert status == 200 and answer["size"] == len(data)
    assert key not in keys(aws, "s3/")
    aws.assert_invariants()


def test_a_duplicate_of_another_tenants_content_keeps_one_copy(aws: Aws) -> None:
    data = b"bob stored this first"
    upload_as(aws, BOB, data, "bob.txt")  # stored, its event delivered
    drop(aws, data, "mine.txt")
    settle(aws)
    item = listed()["mine.txt"]
    assert item["status"] == "stored"  # new to ALICE's tenant; globally a duplicate
    assert keys(aws, "s3/") == [] and len(keys(aws, "uploads/")) == 1  # bob's copy only
    aws.assert_invariants()


def test_a_replayed_event_changes_nothing(aws: Aws) -> None:
    drop(aws, b"replayed", "r.txt")
    messages = aws.drain()
    batch = sqs_batch(*(m["Body"] for m in messages))
    assert ingest.handler(batch, LambdaContext()) == {"batchItemFailures": []}
    settle(aws)
    before = aws.snapshot()
    assert ingest.handler(batch, LambdaContext()) == {"batchItemFailures": []}  # the drop's event again
    assert aws.drain() == [] and aws.snapshot() == before
    aws.assert_invariants()


def test_an_overwrite_with_new_bytes_is_a_second_upload(aws: Aws) -> None:
    drop(aws, b"version one", "same.txt")
    settle(aws)
    drop(aws, b"version two!", "same.txt")
    settle(aws)
    status, page = call(uploads.handler, api_event("GET", "/uploads", user=ALICE))
    mine = [item for item in page["items"] if item["filename"] == "same.txt"]
    assert status == 200 and len(mine) == 2 and {item["status"] for item in mine} == {"stored"}
    assert len(keys(aws, "uploads/")) == 2 and keys(aws, "s3/") == []
    aws.assert_invariants()


@pytest.fixture
def limits(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("TENANT_QUOTA_BYTES", "100")
    monkeypatch.setenv("MAX_UPLOAD_BYTES", "60")
    deps.reset()
    yield aws
    aws.assert_invariants()


def test_too_large_and_over_quota_are_rejected_and_deleted(limits: Aws) -> None:
    aws = limits
    drop(aws, b"a" * 50, "fits.bin")
    settle(aws)
    drop(aws, b"b" * 61, "big.bin")
    drop(aws, b"c" * 51, "over.bin")
    settle(aws)
    items = listed()
    assert items["fits.bin"]["status"] == "stored"
    assert (items["big.bin"]["status"], items["big.bin"]["reason"]) == ("rejected", "too_large")
    assert (items["over.bin"]["status"], items["over.bin"]["reason"]) == ("rejected", "quota_exceeded")
    assert keys(aws, "s3/") == [] and len(keys(aws, "uploads/")) == 1
    status, answer = call(me.handler, api_event("GET", "/me", user=ALICE))
    assert status == 200 and answer["usage"]["used_bytes"] == 50 and answer["usage"]["pending_count"] == 0


def test_a_crash_after_the_copy_is_finished_by_the_redelivery(aws: Aws) -> None:
    key = drop(aws, b"crash between copy and delete", "c.txt")
    messages = aws.drain()
    ingestor = deps.ingestor()
    objects = ingestor._drops._objects
    real = objects.delete

    def crash(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("crashed")

    objects.delete = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        ingestor.ingest(ObjectRef(aws.settings.bucket, key))
    objects.delete = real  # type: ignore[method-assign]
    assert key in keys(aws, "s3/") and len(keys(aws, "uploads/")) == 1  # copied, not deleted
    assert messages  # the drop's event: redelivered
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}
    settle(aws)
    assert keys(aws, "s3/") == [] and listed()["c.txt"]["status"] == "stored"
    aws.assert_invariants()


def test_the_sweep_re_drives_an_object_left_under_s3(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_QUEUE_URL", aws.queue_url)
    drop(aws, b"its event was lost", "lost-event.txt")
    aws.drain()  # the notification never reaches the ingest
    reconciler: Reconciler = deps.reconciler()
    state = reconciler.begin({"sweep": True})
    while state["pos"]["phase"] != "done":
        state = reconciler.page(state["pos"]["phase"], state, lambda *metric: None)
    assert reconciler.finish(state)["orphans"] == 1
    settle(aws)
    assert keys(aws, "s3/") == [] and listed()["lost-event.txt"]["status"] == "stored"
    aws.assert_invariants()


def test_a_large_object_is_copied_in_parts(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd.adapters.s3 import copies

    monkeypatch.setattr(copies, "COPY_MAX", 1024 * 1024)  # UploadPartCopy from 1 MiB (S3's: above 5 GiB)
    monkeypatch.setattr(copies, "COPY_PART", 5 * 1024 * 1024)
    data = bytes(range(256)) * (11 * 4096)  # 11 MiB: parts of 5, 5 and 1 MiB
    drop(aws, data, "big.bin")
    settle(aws)
    item = listed()["big.bin"]
    assert item["status"] == "stored" and item["hash"] == hashlib.sha256(data).hexdigest()
    assert keys(aws, "s3/") == [] and not aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads")
    aws.assert_invariants()


def test_the_copy_is_conditional_on_both_ends(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """CopySourceIfMatch the version identified, IfNoneMatch "*" on the target (what the bucket policy requires under
    the upload prefix), on both copy paths: moto enforces neither, so the requests are checked as sent (the domain's
    answers to both refusals: tests/unit/test_dropzone.py)."""
    from dfd.adapters.s3 import copies

    size = 6 * 1024 * 1024 + 10
    key = drop(aws, b"s" * size, "s.txt")
    aws.drain()
    etag = aws.s3.head_object(Bucket=aws.settings.bucket, Key=key)["ETag"]
    objects = deps.ingestor()._drops._objects
    sent: list[tuple[str, dict[str, Any]]] = []
    objects._s3.meta.events.register(
        "provide-client-params.s3.*", lambda params, model, **_: sent.append((model.name, dict(params)))
    )
    objects.copy(aws.settings.bucket, key, etag, "uploads/one", content_type="text/plain", metadata={}, size=size)
    monkeypatch.setattr(copies, "COPY_MAX", 1024)
    monkeypatch.setattr(copies, "COPY_PART", 5 * 1024 * 1024)
    objects.copy(aws.settings.bucket, key, etag, "uploads/two", content_type="text/plain", metadata={}, size=size)
    calls = {name: params for name, params in sent}
    assert calls["CopyObject"]["IfNoneMatch"] == "*" and calls["CopyObject"]["CopySourceIfMatch"] == etag
    assert calls["CompleteMultipartUpload"]["IfNoneMatch"] == "*"
    assert all(params["CopySourceIfMatch"] == etag for name, params in sent if name == "UploadPartCopy")
    aws.drain()


def test_a_folder_key_is_rejected_and_deleted(aws: Aws) -> None:
    prefix = prefix_for(ALICE.caller.tenant, ALICE.caller.owner)
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=prefix + "folder-x/", Body=b"f" * 4096)
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=prefix, Body=b"")
    settle(aws)
    items = listed()
    assert (items["folder-x/"]["status"], items["folder-x/"]["reason"]) == ("rejected", "not_a_file")
    assert keys(aws, "s3/") == [] and keys(aws, "uploads/") == []
    status, answer = call(me.handler, api_event("GET", "/me", user=ALICE))
    assert status == 200 and answer["usage"]["used_bytes"] == 0
    aws.assert_invariants()


def test_an_archived_object_is_rejected_not_retried(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd.ingest import dropzone

    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "cold.bin"
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=b"glacier", StorageClass="GLACIER")
    settle(aws)  # no batch item failure: nothing for the DLQ
    assert (listed()["cold.bin"]["status"], listed()["cold.bin"]["reason"]) == ("rejected", "archived_storage_class")
    assert keys(aws, "s3/") == []
    # one whose HeadObject says nothing of it: S3 refuses the copy (ObjectNotInActiveTierError), the pending upload
    # is rejected
    monkeypatch.setattr(dropzone, "ARCHIVE_CLASSES", frozenset())
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=b"deep archive", StorageClass="DEEP_ARCHIVE")
    settle(aws)
    status, page = call(uploads.handler, api_event("GET", "/uploads", user=ALICE))
    assert status == 200 and [item["reason"] for item in page["items"]] == ["archived_storage_class"] * 2
    assert keys(aws, "s3/") == [] and keys(aws, "uploads/") == []
    status, answer = call(me.handler, api_event("GET", "/me", user=ALICE))
    assert status == 200 and answer["usage"]["used_bytes"] == 0 and answer["usage"]["pending_count"] == 0
    aws.assert_invariants()


def test_an_invalid_content_type_is_served_as_octet_stream(aws: Aws) -> None:
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "odd.txt"
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=b"odd", ContentType="not a mime type")
    settle(aws)
    item = listed()["odd.txt"]
    status, meta = call(metadata.handler, api_event("GET", f"/metadata/{item['upload_id']}"))
    assert status == 200 and meta["content_type"] == "application/octet-stream"
    head = aws.s3.head_object(Bucket=aws.settings.bucket, Key=f"uploads/{item['upload_id']}")
    assert head["ContentType"] == "application/octet-stream"
    aws.assert_invariants()


def test_the_same_file_sent_again_after_its_delete_is_a_new_upload(aws: Aws) -> None:
    drop(aws, b"sent, deleted, sent again", "again.txt")
    settle(aws)
    first = listed()["again.txt"]["upload_id"]
    status, _ = call(uploads.handler, api_event("DELETE", f"/uploads/{first}", user=ALICE))
    assert status == 204
    time.sleep(1.1)  # S3's Last-Modified is to the second: the second write is a later one
    drop(aws, b"sent, deleted, sent again", "again.txt")
    settle(aws)
    status, page = call(uploads.handler, api_event("GET", "/uploads", user=ALICE))
    mine = {item["upload_id"]: item["status"] for item in page["items"] if item["filename"] == "again.txt"}
    assert status == 200 and mine.pop(first) == "deleted" and list(mine.values()) == ["stored"]
    assert keys(aws, "s3/") == []  # the deleted upload's content stays until the reaper's next run
    aws.assert_invariants()


def test_drop_zone_uploads_leave_the_shared_pending_limit_to_the_others(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENANT_PENDING_LIMIT", "2")
    deps.reset()
    for n in range(4):
        drop(aws, f"alice's {n}".encode(), f"f{n}.txt")
    messages = aws.drain()  # the drops' events only: four registered and copied, their copies' events not yet in
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}
    status, answer = call(me.handler, api_event("GET", "/me", user=CAROL))
    assert status == 200 and answer["usage"]["pending_count"] == 0 and answer["usage"]["pending_bytes"] > 0
    status, created = call(
        upload.handler, api_event("POST", "/upload", user=CAROL, body={"filename": "c.txt", "size": 3})
    )
    assert status == 201, created
    settle(aws)
    assert {item["status"] for item in listed().values()} == {"stored"}


def test_refusals_publish_upload_rejected_and_the_sweep_finds_a_folder_key(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dfd.ingest import dropzone
    from tests.integration.outbox import Outbox, in_process_client, kinds

    outbox = Outbox(aws.model, in_process_client)
    monkeypatch.setenv("INGEST_QUEUE_URL", aws.queue_url)
    prefix = prefix_for(ALICE.caller.tenant, ALICE.caller.owner)
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=prefix + "lost/", Body=b"marker")
    aws.drain()  # its notification never reaches the ingest: the sweep re-drives it
    reconciler: Reconciler = deps.reconciler()
    state = reconciler.begin({"sweep": True})
    while state["pos"]["phase"] != "done":
        state = reconciler.page(state["pos"]["phase"], state, lambda *metric: None)
    assert reconciler.finish(state)["orphans"] == 1
    settle(aws)
    monkeypatch.setattr(dropzone, "ARCHIVE_CLASSES", frozenset())  # registered first, its copy refused
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=prefix + "cold.bin", Body=b"cold", StorageClass="GLACIER")
    settle(aws)
    assert keys(aws, "s3/") == []
    events = outbox.publish()
    assert kinds(events) == {"Upload Rejected": 2}
    assert {event["detail"]["filename"] for event in events} == {"lost/", "cold.bin"}
    assert {event["detail"]["tenant"] for event in events} == {ALICE.caller.tenant}
    aws.assert_invariants()
