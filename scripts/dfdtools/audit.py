"""The design brief's invariants, checked against a live deployment (moto, the local stack, or AWS).

One reusable checker: the test suites call `audit(...)` after every scenario, `scripts/audit` prints it.
Reads everything with consistent scans, so keep it for test-sized and modest tables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from dfd import clock
from dfd.adapters.dynamo import COUNTER_FIELDS
from dfd.config import Settings
from dfd.ids import event_key, version_token
from dfd.ports import is_tombstoned
from dfdtools.tools import add_target_args, reports_unreachable, target

_deserializer = TypeDeserializer()
# counter-shard attributes the reaper ADDs: a reaped content's upload_count, its duplicates and the bytes they
# saved (history counters are never rewritten, the recount needs them once the record is gone)
REAPED_FIELDS = ("reaped_uploads", "reaped_duplicates", "reaped_saved")


@dataclass
class Check:
    name: str
    holds: bool
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"{'holds ' if self.holds else 'BROKEN'}  {self.name}  ({counts})"


@dataclass
class Report:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.holds for check in self.checks)

    def problems(self) -> list[str]:
        return [f"{c.name}: {p}" for c in self.checks for p in c.problems]

    def text(self) -> str:
        lines = [check.line() for check in self.checks]
        lines += [f"    - {p}" for p in self.problems()[:50]]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [
                {"name": c.name, "holds": c.holds, "counts": c.counts, "problems": c.problems} for c in self.checks
            ],
        }


def _plain(raw: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in raw.items():
        plain = _deserializer.deserialize(value)
        out[key] = int(plain) if hasattr(plain, "to_integral_value") else plain
    return out


def _scan(ddb: Any, table: str) -> Iterator[dict[str, Any]]:
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page.get("Items", []):
            yield _plain(item)


def _objects(s3: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from page.get("Contents", [])


def _sha256(s3: Any, bucket: str, key: str) -> str | None:
    """The object's SHA-256, or None when it is gone by now (listed a moment ago: deleted meanwhile)."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    except s3.exceptions.NoSuchKey:
        return None
    digest = hashlib.sha256()
    for chunk in body.iter_chunks(1024 * 1024):
        digest.update(chunk)
    return digest.hexdigest()


def audit(ddb: Any, s3: Any, settings: Settings, *, settled: bool = True) -> Report:
    """Check every invariant. settled=False tolerates objects whose events are still in flight."""
    files = list(_scan(ddb, settings.files_table))
    events = list(_scan(ddb, settings.events_table))
    uploads = list(_scan(ddb, settings.uploads_table))
    shards = list(_scan(ddb, settings.counters_table))
    objects = {o["Key"]: o for o in _objects(s3, settings.bucket, settings.upload_prefix)}
    checks: list[Check] = []

    # 1 + 5 + 6: one record per content, its object exists and hashes to its key
    c1 = Check("1. one FileMetadata item per content; its object exists and hashes to its key", True)
    keys_seen: dict[str, str] = {}
    lost: list[str] = []
    for item in files:
        key = item.get("s3_key", "")
        if key in keys_seen:
            c1.problems.append(f"{key} is the stored object of two hashes: {keys_seen[key]} and {item['hash']}")
        keys_seen[key] = item["hash"]
        if is_tombstoned(item):
            continue  # live_refs 0: its object is the reaper's, deleted first (at any moment), then the record
        if item.get("state") == "lost":
            lost.append(f"{item['hash']} (its object {key} is gone, marked lost at {item.get('lost_at')})")
            continue  # reported by the reconcile (LostFiles alarm): listed below, not a new violation
        if key not in objects:
            c1.problems.append(f"stored object {key} of {item['hash']} is missing (invariant 5)")
            continue
        actual = _sha256(s3, settings.bucket, key)
        if actual is None:
            c1.problems.append(f"stored object {key} of {item['hash']} vanished while audited (invariant 5)")
        elif actual != item["hash"]:
            c1.problems.append(f"{key} hashes to {actual}, its record says {item['hash']} (invariant 6)")
    c1.counts = {"files": len(files), "checked_objects": sum(1 for i in files if i.get("s3_key") in objects)}
    c1.holds = not c1.problems
    checks.append(c1)
    c1l = Check("1l. files the reconcile marked lost (no copy survives; an upload of the content restores it)", True)
    c1l.counts = {"lost": len(lost)}
    c1l.problems = lost  # listed, yet the invariant holds: the loss is known and alarmed, not silent
    checks.append(c1l)

    # 2 + 3: counters equal an independent recount (each upload counted once in upload_count)
    totals = dict.fromkeys(COUNTER_FIELDS, 0)
    reaped = dict.fromkeys(REAPED_FIELDS, 0)  # the history of reaped contents, moved there by the reaper
    for shard in shards:
        for name in COUNTER_FIELDS:
            totals[name] += int(shard.get(name, 0))
        for name in REAPED_FIELDS:
            reaped[name] += int(shard.get(name, 0))
    recount = {
        "total_files": len(files),
        "total_bytes_stored": sum(int(i["size"]) for i in files),
        "total_uploads": sum(int(i.get("upload_count", 0)) for i in files) + reaped["reaped_uploads"],
        # `stores`: the content's generations (a tombstoned content uploaded again is stored anew, not a duplicate)
        "duplicates_avoided": sum(int(i.get("upload_count", 0)) - int(i.get("stores", 1)) for i in files)
        + reaped["reaped_duplicates"],
        "total_s3_size_saved": sum(
            (int(i.get("upload_count", 0)) - int(i.get("stores", 1))) * int(i["size"]) for i in files
        )
        + reaped["reaped_saved"],
        # processed uploads deleted (a cancelled pending one was never processed: no processed_at)
        "deleted_uploads": sum(1 for u in uploads if u.get("status") == "deleted" and u.get("processed_at")),
    }
    c3 = Check("2+3. counters equal the recount (each object version counted exactly once)", True)
    for name in COUNTER_FIELDS:
        if totals[name] != recount[name]:
            c3.problems.append(f"{name}: counters say {totals[name]}, recount says {recount[name]}")
    dup_events = sum(1 for e in events if e.get("outcome") == "duplicate")
    new_events = sum(1 for e in events if e.get("outcome") == "stored")
    generations = sum(int(i.get("stores", 1)) for i in files)
    generations += reaped["reaped_uploads"] - reaped["reaped_duplicates"]
    if new_events > generations:
        c3.problems.append(f"{new_events} 'stored' event records but only {generations} stored generations")
    c3.counts = {"counters_" + k: v for k, v in totals.items()} | {"dup_events": dup_events}
    c3.holds = not c3.problems
    checks.append(c3)
    checks.append(_upload_count_check(files, events, uploads, settings))

    # 4: no duplicate bytes remain once committed; unprocessed objects only while events are in flight
    c4 = Check("4. no duplicate object remains after its transaction committed", True)
    canonical = {i.get("s3_key") for i in files}
    canonical |= {i.get("reap_key") for i in files if i.get("reap_key")}  # an older generation's: the reaper's
    by_event = {e["event_key"]: e for e in events}
    leftover = unprocessed = 0
    for key, obj in objects.items():
        if key in canonical or key.endswith("/"):  # folder markers are never ingested
            continue
        record = by_event.get(event_key(settings.bucket, key, version_token(None, obj["ETag"])))
        if record is None:
            unprocessed += 1
            if settled:
                c4.problems.append(f"{key} was never ingested (no event record, not stored)")
        elif record.get("outcome") == "duplicate":
            leftover += 1
            c4.problems.append(f"{key} is a committed duplicate whose bytes remain")
        else:
            c4.problems.append(f"{key} has outcome {record.get('outcome')} but is not the stored object")
    c4.counts = {"objects": len(objects), "leftover_duplicates": leftover, "unprocessed": unprocessed}
    c4.holds = not c4.problems
    checks.append(c4)

    # uploads agree with files
    c7 = Check("uploads: every processed upload points at a stored file", True)
    hashes = {i["hash"] for i in files}
    states: dict[str, int] = {}
    for upload in uploads:
        status = str(upload.get("status"))
        states[status] = states.get(status, 0) + 1
        if status in ("stored", "duplicate") and upload.get("hash") not in hashes:
            c7.problems.append(f"upload {upload['upload_id']} is {status} but file {upload.get('hash')} is missing")
    c7.counts = states
    c7.holds = not c7.problems
    checks.append(c7)
    refs = list(_scan(ddb, settings.tenant_files_table))
    checks += _tenant_checks(refs, uploads, hashes)
    checks.append(_live_check(files, uploads, events))
    checks.append(_usage_check(shards, refs, uploads))
    return Report(checks)


def _usage_check(counters: list[dict[str, Any]], refs: list[dict[str, Any]], uploads: list[dict[str, Any]]) -> Check:
    """Quotas (docs/design.md, "Quotas"): each tenant's usage item `usage#<tenant>` against a recount —
        `stored_bytes` = the sizes of its reference items that exist (at any count: a reference at 0 is released by
        the reaper when it deletes the item), `pending_count`/`pending_bytes` = its upload records still holding
        `quota_bytes` (registered and still pending: the ingest, the reconcile's expire/fail and a cancel release them
    with the same write), `used_bytes` = pending + stored. Every write
        of these is in one transaction with the items it counts, so the recount is exact once nothing is in flight
        (read while ingests commit, it may see one side only: the storm tests wait for it to hold)."""
    check = Check("quotas: each tenant's usage = its reference items' sizes + its pending uploads' quota_bytes", True)
    stored: dict[str, int] = {}
    for ref in refs:
        stored[str(ref["tenant"])] = stored.get(str(ref["tenant"]), 0) + int(ref.get("size", 0))
    pending: dict[str, list[int]] = {}
    for upload in uploads:
        if upload.get("tenant") and "quota_bytes" in upload:
            pending.setdefault(str(upload["tenant"]), []).append(int(upload["quota_bytes"]))
            if upload.get("status") != "pending":  # ingested, expired, failed or cancelled: released with it
                check.problems.append(f"upload {upload['upload_id']} is {upload.get('status')} yet holds quota_bytes")
    items = {
        str(item["counter_id"]).removeprefix("usage#"): item
        for item in counters
        if str(item.get("counter_id", "")).startswith("usage#")
    }
    for tenant in sorted(set(stored) | set(pending) | set(items)):
        item = items.get(tenant, {})
        held = pending.get(tenant, [])
        expected = {
            "stored_bytes": stored.get(tenant, 0),
            "pending_count": len(held),
            "pending_bytes": sum(held),
            "used_bytes": stored.get(tenant, 0) + sum(held),
        }
        for name, value in expected.items():
            if int(item.get(name, 0)) != value:
                check.problems.append(f"tenant {tenant}: {name} {int(item.get(name, 0))}, recounted {value}")
    check.counts = {"tenants": len(set(stored) | set(pending) | set(items)), "usage_items": len(items)}
    check.holds = not check.problems
    return check


def _live_check(files: list[dict[str, Any]], uploads: list[dict[str, Any]], events: list[dict[str, Any]]) -> Check:
    """Deletes (issue 13): a content's live count is the number of live references to it — its processed,
    undeleted uploads, plus objects put straight into the bucket outside `uploads/<upload_id>` keys (their
    ingest's event record, no upload); a content is tombstoned exactly when it has none (derived from the count:
    dfd.ports.is_tombstoned), and then it is marked for the reaper; the bytes its duplicates saved (`saved_bytes`,
    the reaper's history) are (upload_count - stores) x size."""
    check = Check("deletes: live_refs = the live references to the content; at 0 marked for the reaper", True)
    refs: dict[str, int] = {}
    for upload in uploads:
        if upload.get("status") in ("stored", "duplicate") and upload.get("hash"):
            refs[str(upload["hash"])] = refs.get(str(upload["hash"]), 0) + 1
    for event in events:
        if event.get("outcome") in ("stored", "duplicate") and not event.get("upload_id") and event.get("hash"):
            refs[str(event["hash"])] = refs.get(str(event["hash"]), 0) + 1
    tombstoned = 0
    for item in files:
        digest, live = str(item["hash"]), int(item.get("live_refs", 0))
        dead = is_tombstoned(item)
        tombstoned += dead
        if live != refs.get(digest, 0):
            check.problems.append(f"content {digest}: live_refs {live}, live references {refs.get(digest, 0)}")
        if dead and not (item.get("tombstone_shard") and item.get("reap_after")):
            check.problems.append(f"content {digest}: no live reference, but not marked for the reaper")
        saved = (int(item.get("upload_count", 0)) - int(item.get("stores", 1))) * int(item["size"])
        if int(item.get("saved_bytes", 0)) != saved:
            check.problems.append(f"content {digest}: saved_bytes {item.get('saved_bytes', 0)}, its duplicates {saved}")
    for digest in sorted(set(refs) - {str(i["hash"]) for i in files}):
        check.problems.append(f"{refs[digest]} live reference(s) to content {digest}, which has no file record")
    check.counts = {"files": len(files), "tombstoned": tombstoned}
    check.holds = not check.problems
    return check


def _upload_count_check(
    files: list[dict[str, Any]], events: list[dict[str, Any]], uploads: list[dict[str, Any]], settings: Settings
) -> Check:
    """Each file's upload_count against what it counts, recounted from the records of each counted upload: the
    ingests' event records (outcome stored / duplicate) and the processed upload records (a precheck's has no
    event), one per event key or upload id. So a count applied twice (a lost response retried) shows, although
    the counters still equal the sums of upload_count. Event records expire (EVENT_TTL_DAYS): for content first
    stored before that, upload records alone (which never expire once processed) give a lower bound."""
    check = Check("2+3. each file's upload_count = its uploads, recounted from event and upload records", True)
    counted: dict[str, set[str]] = {}
    from_uploads: dict[str, int] = {}
    for event in events:
        if event.get("outcome") in ("stored", "duplicate") and event.get("hash"):
            counted.setdefault(str(event["hash"]), set()).add(str(event["event_key"]))
    for upload in uploads:
        # a deleted upload that had been processed stays counted: upload_count is history (issue 13)
        processed = upload.get("status") in ("stored", "duplicate") or (
            upload.get("status") == "deleted" and upload.get("processed_at")
        )
        if processed and upload.get("hash"):
            digest = str(upload["hash"])
            counted.setdefault(digest, set()).add(str(upload.get("event_key") or "upload#" + upload["upload_id"]))
            from_uploads[digest] = from_uploads.get(digest, 0) + 1
    horizon = clock.iso(clock.plus(clock.now(), days=-settings.event_ttl_days))
    for item in files:
        digest, count = str(item["hash"]), int(item.get("upload_count", 0))
        recount = len(counted.get(digest, ()))
        if str(item.get("created_at", "")) >= horizon:
            if count != recount:
                check.problems.append(f"file {digest}: upload_count {count}, its uploads recounted {recount}")
        elif count < from_uploads.get(digest, 0):
            check.problems.append(f"file {digest}: upload_count {count} < its {from_uploads[digest]} uploads")
    check.counts = {"files": len(files), "counted_uploads": sum(len(v) for v in counted.values())}
    check.holds = not check.problems
    return check


def _tenant_checks(refs: list[dict[str, Any]], uploads: list[dict[str, Any]], hashes: set[str]) -> list[Check]:
    """The tenant layer (issue 11): references agree with the uploads, API uploads carry their caller."""
    c8 = Check(
        "tenants: each reference's upload_count = its tenant's processed uploads of the content (at 0: the reaper's)",
        True,
    )
    recount: dict[tuple[str, str], int] = {}
    for upload in uploads:
        if upload.get("tenant") and upload.get("status") in ("stored", "duplicate") and upload.get("hash"):
            key = (str(upload["tenant"]), str(upload["hash"]))
            recount[key] = recount.get(key, 0) + 1
    held = {(str(ref["tenant"]), str(ref["hash"])): int(ref.get("upload_count", 0)) for ref in refs}
    for ref in refs:  # a reference at 0 (its tenant holds nothing) exists only until the reaper deletes it
        if int(ref.get("upload_count", 0)) <= 0 and not (ref.get("reap_shard") and ref.get("reap_after")):
            c8.problems.append(f"tenant {ref['tenant']}, content {ref['hash']}: at 0 but not marked for the reaper")
    for key in sorted(set(held) | set(recount)):
        if held.get(key) != recount.get(key, 0):
            c8.problems.append(
                f"tenant {key[0]}, content {key[1]}: reference says {held.get(key)}, uploads say {recount.get(key, 0)}"
            )
        if key in held and key[1] not in hashes:
            c8.problems.append(f"tenant {key[0]} references content {key[1]}, which has no file record")
    c8.counts = {"references": len(refs), "tenants": len({tenant for tenant, _ in held})}
    c8.holds = not c8.problems

    # made through the API: an issued URL (expires_at) or a precheck duplicate (never touched by an ingest);
    # records the ingest made for objects put straight into the bucket carry an event_key and no expires_at
    c9 = Check("tenants: every upload made through the API has an owner and a tenant", True)
    api = [u for u in uploads if "expires_at" in u or "event_key" not in u]
    for upload in api:
        if not upload.get("owner") or not upload.get("tenant"):
            c9.problems.append(f"upload {upload.get('upload_id')} was made through the API without owner/tenant")
    c9.counts = {"api_uploads": len(api), "direct": len(uploads) - len(api)}
    c9.holds = not c9.problems
    return [c8, c9]


@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/audit", description=__doc__)
    add_target_args(parser)
    parser.add_argument("--unsettled", action="store_true", help="tolerate objects whose events are in flight")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    where = target(args)
    report = audit(where.client("dynamodb"), where.client("s3"), where.settings, settled=not args.unsettled)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
