"""The reaper (issue 13): the reconcile workflow, executed by moto's Step Functions interpreter, frees tombstoned
contents past DeleteGraceSeconds (their object IfMatch the generation's ETag, then their record conditioned on
that generation, with total_files / total_bytes_stored), frees a resurrected content's older object, and never
touches a live one. Crashes between the object delete and the record delete are replayed by the next run."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from dfd.handlers import admin_stats, download, upload
from tests.integration.test_deletes import delete
from tests.integration.test_reconcile import Local, emulator, later, local
from tests.support import BOB, api_event, call

__all__ = ["emulator", "local"]  # the fixtures

DATA = b"reaped after the grace period\n" * 200
DIGEST = hashlib.sha256(DATA).hexdigest()


def stored(local: Local, user: Any = None) -> dict[str, Any]:
    answer = local.upload(DATA, "r.bin") if user is None else _upload_as(local, user)
    local.deliver()
    return answer


def _upload_as(local: Local, user: Any) -> dict[str, Any]:
    status, answer = call(
        upload.handler, api_event("POST", "/upload", body={"filename": "b.bin", "size": len(DATA)}, user=user)
    )
    assert status == 201
    assert requests.put(answer["upload_url"], data=DATA, headers=answer["headers"], timeout=10).status_code == 200
    return answer


def file_item(local: Local) -> dict[str, Any] | None:
    raw = local.ddb.get_item(TableName=local.settings.files_table, Key={"hash": {"S": DIGEST}}, ConsistentRead=True)
    item = raw.get("Item")
    return {k: next(iter(v.values())) for k, v in item.items()} if item else None


def keys(local: Local) -> set[str]:
    return {o["Key"] for o in local.s3.list_objects_v2(Bucket=local.settings.bucket).get("Contents", [])}


def totals() -> dict[str, Any]:
    return call(admin_stats.handler, api_event("GET", "/admin/stats"))[1]


def test_tombstoned_content_is_reaped_after_the_grace_period_only(local: Local) -> None:
    answer = stored(local)
    assert delete(answer["upload_id"])[0] == 204
    local.run()  # within the grace period: nothing goes
    assert answer["key"] in keys(local) and file_item(local) is not None
    local.assert_invariants()
    local.run(now=later(hours=2))
    assert answer["key"] not in keys(local) and file_item(local) is None
    stats = totals()
    assert stats["total_files"] == 0 and stats["total_bytes_stored"] == 0
    assert stats["total_uploads"] == 1 and stats["deleted_uploads"] == 1  # history is not rewritten
    local.assert_invariants()
    local.run(now=later(hours=3))  # again: nothing more
    assert totals() == stats


def test_a_resurrected_content_keeps_its_new_bytes_and_loses_the_old(local: Local) -> None:
    first = stored(local)
    assert delete(first["upload_id"])[0] == 204
    second = stored(local, BOB)
    item = file_item(local)
    assert item is not None and item["state"] == "live" and item["reap_key"] == first["key"]
    local.run(now=later(hours=2))
    assert keys(local) == {second["key"]}
    item = file_item(local)
    assert item is not None and item["state"] == "live" and "reap_key" not in item and "tombstone_shard" not in item
    status, link = call(download.handler, api_event("GET", f"/download/{second['upload_id']}", user=BOB))
    assert status == 200 and requests.get(link["download_url"], timeout=10).content == DATA
    assert totals()["total_files"] == 1
    local.assert_invariants()


def test_a_crash_between_the_object_and_the_record_is_finished_by_the_next_run(local: Local) -> None:
    answer = stored(local)
    assert delete(answer["upload_id"])[0] == 204
    local.s3.delete_object(Bucket=local.settings.bucket, Key=answer["key"])  # the object went, the record stayed
    local.run(now=later(hours=2))
    assert file_item(local) is None and totals()["total_files"] == 0
    local.assert_invariants()


def test_an_upload_after_the_object_went_resurrects_with_its_own_bytes(local: Local) -> None:
    """The reaper deleted the object and has not deleted the record yet: an upload now resurrects the content
    with its own bytes, and the reaper's record delete (conditioned on the generation) does nothing."""
    answer = stored(local)
    assert delete(answer["upload_id"])[0] == 204
    local.s3.delete_object(Bucket=local.settings.bucket, Key=answer["key"])
    again = stored(local, BOB)
    local.run(now=later(hours=2))
    item = file_item(local)
    assert item is not None and item["state"] == "live" and item["s3_key"] == again["key"]
    assert keys(local) == {again["key"]} and totals()["total_files"] == 1
    local.assert_invariants()
