"""The reaper: the reconcile workflow, executed by moto's Step Functions interpreter, frees tombstoned
contents (live_refs 0) past DeleteGraceSeconds (their object IfMatch the generation's ETag — no listing first —
then their record conditioned on that generation, with total_files / total_bytes_stored and the history moved to
reaped_*), frees a resurrected content's older object, drops the tenant references at 0, and never touches a live
one. Crashes between the object delete and the record delete are finished by the next run."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from dfd import deps
from dfd.handlers import admin_stats, download, me, upload
from tests.integration.support import Local, delete, later
from tests.support import ALICE, BOB, CAROL, api_event, call

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


def shards(local: Local) -> dict[str, int]:
    """Every numeric attribute of the counter shards, summed (the reaper's reaped_* included)."""
    out: dict[str, int] = {}
    for item in local.ddb.scan(TableName=local.settings.counters_table, ConsistentRead=True)["Items"]:
        if item["counter_id"]["S"].startswith("shard#"):
            for name, value in item.items():
                if "N" in value:
                    out[name] = out.get(name, 0) + int(value["N"])
    return out


def claimed(local: Local, key: str) -> bool:
    """Whether the key's claim (it holds a stored copy) is there."""
    return deps.repository().get_claim(local.settings.bucket, key) is not None


def refs(local: Local) -> list[dict[str, Any]]:
    items = local.ddb.scan(TableName=local.settings.tenant_files_table, ConsistentRead=True)["Items"]
    references = [item for item in items if "upload_count" in item]  # not the tenants' usage shards
    return [{k: next(iter(v.values())) for k, v in item.items()} for item in references]


def test_tombstoned_content_is_reaped_after_the_grace_period_only(local: Local) -> None:
    answer = stored(local)
    assert delete(answer["upload_id"])[0] == 204
    summary = local.run()  # within the grace period: the content stays; the tenant's reference at 0 goes
    assert (summary["reaped"], summary["refs_reaped"]) == (0, 1), summary
    assert answer["key"] in keys(local) and file_item(local) is not None
    local.assert_invariants()
    summary = local.run(now=later(hours=2))
    assert (summary["reaped"], summary["refs_reaped"]) == (1, 0), summary  # what scripts/reconcile reports
    assert answer["key"] not in keys(local) and file_item(local) is None
    stats = totals()
    assert stats["total_files"] == 0 and stats["total_bytes_stored"] == 0
    assert stats["total_uploads"] == 1 and stats["deleted_uploads"] == 1  # history is not rewritten
    assert refs(local) == []  # the tenant's reference at 0 went too
    assert not claimed(local, answer["key"])  # and the key's claim: a later PUT there is no stored copy
    local.assert_invariants()
    local.run(now=later(hours=3))  # again: nothing more
    assert totals() == stats


def test_the_reaper_moves_the_history_and_drops_only_references_at_zero(local: Local) -> None:
    """Three uploads of one content by two tenants (two duplicates saved), then every one deleted: the reaper
    moves upload_count, the duplicates and the bytes they saved into reaped_*, and drops both references. A
    reference counted again before the reaper runs only leaves its index."""
    alice = stored(local)
    carol = stored(local, CAROL)
    bob = stored(local, BOB)
    assert delete(alice["upload_id"])[0] == 204  # acme still holds it through Carol
    summary = local.run(now=later(hours=2))
    assert (summary["reaped"], summary["refs_reaped"]) == (0, 0), summary  # unindexed is not reaped
    (acme,) = [r for r in refs(local) if r["tenant"] == "acme"]
    assert acme["upload_count"] == "1" and "reap_shard" not in acme  # counted again: unindexed, kept
    item = file_item(local)
    assert item is not None and item["live_refs"] == "2" and "tombstone_shard" not in item
    for answer, user in ((carol, CAROL), (bob, BOB)):
        assert delete(answer["upload_id"], user)[0] == 204
    local.assert_invariants()
    local.run(now=later(hours=2))
    assert file_item(local) is None and refs(local) == [] and keys(local) == set()
    counted = shards(local)
    assert counted["reaped_uploads"] == 3 and counted["reaped_duplicates"] == 2
    assert counted["reaped_saved"] == 2 * len(DATA) == counted["total_s3_size_saved"]
    local.assert_invariants()


def test_a_lost_content_whose_references_all_go_is_reaped_without_its_object(local: Local) -> None:
    answer = stored(local)
    local.s3.delete_object(Bucket=local.settings.bucket, Key=answer["key"])
    local.run()  # the sweep marks it lost
    item = file_item(local)
    assert item is not None and item["state"] == "lost"
    assert delete(answer["upload_id"])[0] == 204
    local.run(now=later(hours=2))
    assert file_item(local) is None and refs(local) == [] and totals()["total_files"] == 0
    local.assert_invariants()


def test_a_resurrected_content_keeps_its_new_bytes_and_loses_the_old(local: Local) -> None:
    first = stored(local)
    assert delete(first["upload_id"])[0] == 204
    second = stored(local, BOB)
    item = file_item(local)
    assert item is not None and item["live_refs"] == "1" and item["reap_key"] == first["key"]
    assert claimed(local, first["key"]) and claimed(local, second["key"])
    local.run(now=later(hours=2))
    assert keys(local) == {second["key"]}
    assert not claimed(local, first["key"]) and claimed(local, second["key"])
    item = file_item(local)
    assert item is not None and item["live_refs"] == "1" and "reap_key" not in item and "tombstone_shard" not in item
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
    assert item is not None and item["live_refs"] == "1" and item["s3_key"] == again["key"]
    assert keys(local) == {again["key"]} and totals()["total_files"] == 1
    local.assert_invariants()


# ---------------------------------------------------------------------------------------------- quota usage
def usage(user: Any = ALICE) -> dict[str, int]:
    """GET /me's usage of the caller's tenant."""
    status, answer = call(me.handler, api_event("GET", "/me", user=user))
    assert status == 200, answer
    return dict(answer["usage"])


def holding(stored_bytes: int) -> dict[str, int]:
    return {"pending_count": 0, "pending_bytes": 0, "stored_bytes": stored_bytes, "used_bytes": stored_bytes}


def test_a_delete_gives_the_tenant_its_quota_back_at_the_next_run(local: Local) -> None:
    """The tenant's last upload of a content deleted: its reference at 0 is still counted (it exists) until the
    reference pass deletes it and releases its size in the same transaction — the next run, references need no
    grace (the content's bytes wait for DeleteGraceSeconds)."""
    answer = stored(local)
    assert usage() == holding(len(DATA))
    assert delete(answer["upload_id"])[0] == 204
    assert usage() == holding(len(DATA))
    local.assert_invariants()
    local.run(now=later(minutes=1))  # within the content's grace period
    assert refs(local) == [] and usage() == holding(0)
    assert file_item(local) is not None and answer["key"] in keys(local)
    local.assert_invariants()
    local.run(now=later(hours=2))
    assert file_item(local) is None and usage() == holding(0)
    local.assert_invariants()


def test_delete_then_upload_again_before_the_run_is_counted_once(local: Local) -> None:
    """Upload, delete, upload again before the reaper (the content resurrected with the new bytes): the new upload
    takes the reference at 0 over — counted already, nothing added — and the run only unindexes it."""
    first = stored(local)
    assert delete(first["upload_id"])[0] == 204
    stored(local, CAROL)
    assert usage() == holding(len(DATA))
    local.run(now=later(hours=2))
    (ref,) = refs(local)
    assert ref["upload_count"] == "1" and "reap_shard" not in ref
    assert usage() == holding(len(DATA)) and usage(CAROL) == holding(len(DATA))
    local.assert_invariants()


def test_the_reference_pass_between_an_ingest_s_read_and_its_commit(local: Local, monkeypatch: Any) -> None:
    """Carol's ingest reads acme's reference at 0 (counted: it would add nothing); the reference pass deletes it and
    releases its size before the commit: the commit's condition (exists at 0) fails, the ingest follows the
    reference it is shown (absent) and creates it, adding the size — counted exactly once."""
    alice = stored(local)
    stored(local, BOB)  # the content stays live: Carol's upload is a duplicate
    assert delete(alice["upload_id"])[0] == 204
    _upload_as(local, CAROL)
    repo = deps.repository()
    read = repo.ingest_state

    def read_then_reap(*args: Any, **kwargs: Any) -> Any:
        state = read(*args, **kwargs)
        monkeypatch.setattr(repo, "ingest_state", read)  # once
        assert state.tenant_ref is not None and state.tenant_ref.upload_count == 0
        local.run(now=later(minutes=1))
        assert [r for r in refs(local) if r["tenant"] == "acme"] == []
        return state

    monkeypatch.setattr(repo, "ingest_state", read_then_reap)
    local.deliver()
    (acme,) = [r for r in refs(local) if r["tenant"] == "acme"]
    assert acme["upload_count"] == "1" and "reap_shard" not in acme
    assert usage(CAROL) == holding(len(DATA))
    local.assert_invariants()
