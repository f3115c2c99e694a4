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

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import from_item
from dfd.core import clock
from dfd.core import codec as core_codec
from dfd.core.config import Settings
from dfd.core.ids import event_key, version_token
from dfd.core.records import (
    COUNTER_FIELDS,
    REAPED_FIELDS,
    EventRecord,
    FileRecord,
    TenantRef,
    TenantUsage,
    UploadRecord,
    UploadStatus,
)
from dfd.core.usage import total
from dfd.ingest import codec as ingest_codec
from dfd.reconcile.audit import Recount
from dfd.reconcile.codec import LEASE_ID
from dfd.uploads import codec as uploads_codec
from dfdtools.tools import add_target_args, interruptible, reports_unreachable, target

# Items are parsed by the features' codecs (dfd.core.codec, dfd.uploads.codec, dfd.ingest.codec) into the records
# the product reads. The
# counter shards' REAPED_FIELDS are the reaper's history: a reaped content's upload_count, its duplicates and the
# bytes they saved (history counters are never rewritten, the recount needs them once the record is gone).


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


def _scan(ddb: Any, table: str) -> Iterator[dict[str, Any]]:
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page.get("Items", []):
            yield from_item(item)


def _objects(s3: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from page.get("Contents", [])


@dataclass(frozen=True)
class Unreadable:
    """Why an object could not be hashed (its S3 error code, or the client's error)."""

    reason: str
    gone: bool = False  # NoSuchKey: deleted since it was listed


def _no_checksum_mode(params: dict[str, Any], model: Any, **_: Any) -> None:
    """Undo botocore's default ChecksumMode on GetObject (set by its own handler of the same event: this one is
    registered last, on the generic event, as botocore calls specific handlers first)."""
    if model.name == "GetObject":
        params.pop("ChecksumMode", None)


def _sha256(s3: Any, bucket: str, key: str) -> str | Unreadable:
    """The SHA-256 of the object's bytes, or why they cannot be read (archived, denied, gone, cut short). The
    bytes are hashed here, never checked against S3's stored checksum by botocore: a checksum that disagrees
    with the bytes would raise mid-read, and what matters is what the bytes hash to."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        digest = hashlib.sha256()
        for chunk in body.iter_chunks(1024 * 1024):
            digest.update(chunk)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", "")) or "unknown error"
        message = str(error.response.get("Error", {}).get("Message", "")).strip()
        return Unreadable(f"{code}: {message}" if message else code, gone=code in ("NoSuchKey", "404"))
    except BotoCoreError as error:
        return Unreadable(f"{type(error).__name__}: {error}")
    return digest.hexdigest()


def _events(items: list[dict[str, Any]], upload_items: list[dict[str, Any]]) -> list[EventRecord]:
    """The event records: the Events items proper (a key's claim shares their table: it has a hash and no outcome)
    and those the upload items carry (the ingest's commit of an object at an upload key)."""
    carried = [event for event in map(ingest_codec.upload_event, upload_items) if event is not None]
    return [ingest_codec.event_record(item) for item in items if "outcome" in item] + carried


# The audit reads table after table, not one snapshot of them all: a commit between two reads (an ingest, a
# delete, an upload registered, the reaper moving a content's history into the shards or releasing a reference)
# would show as counters or usage disagreeing with the records. Every such commit changes a counter or usage shard
# in its own transaction, so a report is of one state when those shards read the same before and after it; a
# failing report is taken again, at most READS times, until they held still while it was taken.
READS = 5


def audit(ddb: Any, s3: Any, settings: Settings, *, settled: bool = True) -> Report:
    """Check every invariant. settled=False tolerates objects whose events are still in flight."""
    handler = "before-parameter-build"
    s3.meta.events.register_last(handler, _no_checksum_mode, unique_id="dfd-audit-no-checksum-mode")
    try:
        for _ in range(READS):
            before = _shards(ddb, settings)
            report = _audit(ddb, s3, settings, settled=settled)
            if report.ok or _shards(ddb, settings) == before:
                return report
        return report
    finally:
        s3.meta.events.unregister(handler, unique_id="dfd-audit-no-checksum-mode")


def _shards(ddb: Any, settings: Settings) -> list[dict[str, Any]]:
    """The counter shards and the tenants' usage shards as they are now: what every counted commit changes."""
    counters = [item for item in _scan(ddb, settings.counters_table) if item.get("counter_id") != LEASE_ID]
    usage = [item for item in _scan(ddb, settings.tenant_files_table) if core_codec.is_usage(item)]
    return sorted(counters + usage, key=repr)


def _audit(ddb: Any, s3: Any, settings: Settings, *, settled: bool) -> Report:
    files = [ingest_codec.file_record(item) for item in _scan(ddb, settings.files_table)]
    upload_items = list(_scan(ddb, settings.uploads_table))
    events = _events(list(_scan(ddb, settings.events_table)), upload_items)
    uploads = [uploads_codec.upload_record(item) for item in upload_items]
    counters = list(_scan(ddb, settings.counters_table))
    shards = [core_codec.counter_shard(item) for item in counters]
    objects = {o["Key"]: o for o in _objects(s3, settings.bucket, settings.upload_prefix)}
    checks: list[Check] = []

    # 1 + 5 + 6: one record per content, its object exists and hashes to its key
    c1 = Check("1. one FileMetadata item per content; its object exists and hashes to its key", True)
    keys_seen: dict[str, str] = {}
    lost: list[str] = []
    for file in files:
        key = file.s3_key or ""
        if key in keys_seen:
            c1.problems.append(f"{key} is the stored object of two hashes: {keys_seen[key]} and {file.hash}")
        keys_seen[key] = file.hash
        if file.tombstoned:
            continue  # live_refs 0: its object is the reaper's, deleted first (at any moment), then the record
        if file.lost:
            lost.append(f"{file.hash} (its object {key} is gone, marked lost at {file.lost_at})")
            continue  # reported by the reconcile (LostFiles alarm): listed below, not a new violation
        if key not in objects:
            c1.problems.append(f"stored object {key} of {file.hash} is missing (invariant 5)")
            continue
        actual = _sha256(s3, settings.bucket, key)
        if isinstance(actual, Unreadable) and actual.gone:
            c1.problems.append(f"stored object {key} of {file.hash} vanished while audited (invariant 5)")
        elif isinstance(actual, Unreadable):
            c1.problems.append(f"stored object {key} of {file.hash} cannot be read: {actual.reason} (invariant 5)")
        elif actual != file.hash:
            c1.problems.append(f"{key} hashes to {actual}, its record says {file.hash} (invariant 6)")
    c1.counts = {"files": len(files), "checked_objects": sum(1 for f in files if f.s3_key in objects)}
    c1.holds = not c1.problems
    checks.append(c1)
    c1l = Check("1l. files the reconcile marked lost (no copy survives; an upload of the content restores it)", True)
    c1l.counts = {"lost": len(lost)}
    c1l.problems = lost  # listed, yet the invariant holds: the loss is known and alarmed, not silent
    checks.append(c1l)

    # 2 + 3: counters equal an independent recount (each upload counted once in upload_count)
    totals = {name: sum(getattr(shard, name) for shard in shards) for name in COUNTER_FIELDS}
    reaped = {name: sum(getattr(shard, name) for shard in shards) for name in REAPED_FIELDS}
    # the reconcile's audit recounts the same way (dfd.reconcile.audit), a page at a time
    recount = Recount().add(files).with_reaped(reaped)
    # processed uploads deleted (a cancelled pending one was never processed: no processed_at)
    recount["deleted_uploads"] = sum(1 for u in uploads if u.status == UploadStatus.DELETED and u.processed_at)
    c3 = Check("2+3. counters equal the recount (each object version counted exactly once)", True)
    for name in COUNTER_FIELDS:
        if totals[name] != recount[name]:
            c3.problems.append(f"{name}: counters say {totals[name]}, recount says {recount[name]}")
    dup_events = sum(1 for e in events if e.outcome == "duplicate")
    new_events = sum(1 for e in events if e.outcome == "stored")
    generations = sum(f.stores for f in files) + reaped["reaped_uploads"] - reaped["reaped_duplicates"]
    if new_events > generations:
        c3.problems.append(f"{new_events} 'stored' event records but only {generations} stored generations")
    c3.counts = {"counters_" + k: v for k, v in totals.items()} | {"dup_events": dup_events}
    c3.holds = not c3.problems
    checks.append(c3)
    checks.append(_upload_count_check(files, events, uploads, settings))

    # 4: no duplicate bytes remain once committed; unprocessed objects only while events are in flight
    c4 = Check("4. no duplicate object remains after its transaction committed", True)
    canonical = {f.s3_key for f in files}
    canonical |= {f.reap_key for f in files if f.reap_key}  # an older generation's: the reaper's
    by_event = {e.event_key: e for e in events}
    leftover = unprocessed = 0
    for key, obj in objects.items():
        if key in canonical or key.endswith("/"):  # folder markers are never ingested
            continue
        record = by_event.get(event_key(settings.bucket, key, version_token(None, obj["ETag"])))
        if record is None:
            unprocessed += 1
            if settled:
                c4.problems.append(f"{key} was never ingested (no event record, not stored)")
        elif record.outcome == "duplicate":
            leftover += 1
            c4.problems.append(f"{key} is a committed duplicate whose bytes remain")
        else:
            c4.problems.append(f"{key} has outcome {record.outcome} but is not the stored object")
    c4.counts = {"objects": len(objects), "leftover_duplicates": leftover, "unprocessed": unprocessed}
    c4.holds = not c4.problems
    checks.append(c4)

    # uploads agree with files
    c7 = Check("uploads: every processed upload points at a stored file", True)
    hashes = {f.hash for f in files}
    states: dict[str, int] = {}
    for upload in uploads:
        states[upload.status.value] = states.get(upload.status.value, 0) + 1
        if upload.status.processed and upload.hash not in hashes:
            c7.problems.append(f"upload {upload.upload_id} is {upload.status.value} but file {upload.hash} is missing")
    c7.counts = states
    c7.holds = not c7.problems
    checks.append(c7)
    tenant_items = list(_scan(ddb, settings.tenant_files_table))  # references, and the tenants' usage shards
    refs = [ingest_codec.tenant_ref(item) for item in tenant_items if not core_codec.is_usage(item)]
    checks += _tenant_checks(refs, uploads, hashes)
    checks.append(_live_check(files, uploads, events))
    checks.append(_usage_check([item for item in tenant_items if core_codec.is_usage(item)], refs, uploads))
    return Report(checks)


def _usage_check(usages: list[dict[str, Any]], refs: list[TenantRef], uploads: list[UploadRecord]) -> Check:
    """Quotas (docs/design.md, "Quotas"): each tenant's usage (the sum of its usage shards, (tenant, `u#NNN`))
    against a recount —
    `stored_bytes` = the sizes of its reference items that exist (at any count: a reference at 0 is released by
    the reaper when it deletes the item), `pending_count`/`pending_bytes` = its upload records still holding
    `quota_bytes` (registered and still pending: the ingest, the reconcile's expire/fail and a cancel release them
    with the same write; `pending_count` leaves out the `pending_uncounted`), `used_bytes` = pending + stored.
    Every write of these is in one transaction with the items it counts, so the recount is exact once nothing is
    in flight (read while ingests commit, it may see one side only: the storm tests wait for it to hold)."""
    check = Check("quotas: each tenant's usage = its reference items' sizes + its pending uploads' quota_bytes", True)
    stored: dict[str, int] = {}
    for ref in refs:
        stored[ref.tenant] = stored.get(ref.tenant, 0) + (ref.size or 0)
    pending: dict[str, list[int]] = {}
    uncounted: dict[str, int] = {}  # of those, the ones not among the tenant's pending uploads (drop-zone objects)
    for upload in uploads:
        if upload.tenant and upload.quota_bytes:
            pending.setdefault(upload.tenant, []).append(upload.quota_bytes)
            uncounted[upload.tenant] = uncounted.get(upload.tenant, 0) + upload.pending_uncounted
            if upload.status != UploadStatus.PENDING:  # ingested, expired, failed or cancelled: released with it
                check.problems.append(f"upload {upload.upload_id} is {upload.status.value} yet holds quota_bytes")
    shards: dict[str, list[TenantUsage]] = {}  # a tenant's usage is the sum of its usage shards (dfd.core.usage)
    for item in usages:
        shard = core_codec.usage_shard(item)
        if shard is not None:
            shards.setdefault(shard.tenant, []).append(core_codec.tenant_usage(item))
    usage = {tenant: total(found) for tenant, found in shards.items()}
    for tenant in sorted(set(stored) | set(pending) | set(usage)):
        found = usage.get(tenant, core_codec.tenant_usage(None)).as_dict()
        held = pending.get(tenant, [])
        expected = {
            "stored_bytes": stored.get(tenant, 0),
            "pending_count": len(held) - uncounted.get(tenant, 0),
            "pending_bytes": sum(held),
            "used_bytes": stored.get(tenant, 0) + sum(held),
        }
        for name, value in expected.items():
            if found[name] != value:
                check.problems.append(f"tenant {tenant}: {name} {found[name]}, recounted {value}")
    check.counts = {
        "tenants": len(set(stored) | set(pending) | set(usage)),
        "usage_items": sum(len(found) for found in shards.values()),
    }
    check.holds = not check.problems
    return check


def _live_check(files: list[FileRecord], uploads: list[UploadRecord], events: list[EventRecord]) -> Check:
    """Deletes: a content's live count is the number of live references to it — its processed, undeleted uploads,
    plus objects put straight into the bucket outside `uploads/<upload_id>` keys (their ingest's event record, no
    upload); a content is tombstoned exactly when it has none (derived from the count: FileRecord.tombstoned), and
    then it is marked for the reaper."""
    check = Check("deletes: live_refs = the live references to the content; at 0 marked for the reaper", True)
    refs: dict[str, int] = {}
    for upload in uploads:
        if upload.status.processed and upload.hash:
            refs[upload.hash] = refs.get(upload.hash, 0) + 1
    for event in events:
        if event.outcome in ("stored", "duplicate") and not event.upload_id and event.hash:
            refs[event.hash] = refs.get(event.hash, 0) + 1
    tombstoned = 0
    for file in files:
        tombstoned += file.tombstoned
        if file.live_refs != refs.get(file.hash, 0):
            check.problems.append(
                f"content {file.hash}: live_refs {file.live_refs}, live references {refs.get(file.hash, 0)}"
            )
        if file.tombstoned and not (file.tombstone_shard and file.reap_after):
            check.problems.append(f"content {file.hash}: no live reference, but not marked for the reaper")
    for digest in sorted(set(refs) - {f.hash for f in files}):
        check.problems.append(f"{refs[digest]} live reference(s) to content {digest}, which has no file record")
    check.counts = {"files": len(files), "tombstoned": tombstoned}
    check.holds = not check.problems
    return check


def _upload_count_check(
    files: list[FileRecord], events: list[EventRecord], uploads: list[UploadRecord], settings: Settings
) -> Check:
    """Each file's upload_count against what it counts, recounted from the records of each counted upload: the
    ingests' event records (outcome stored / duplicate) and the processed upload records (a precheck's has no
    event), one per event key or upload id. So a count applied twice (a lost response retried) shows, although
    the counters still equal the sums of upload_count. Event records expire (EVENT_TTL_DAYS): for content first
    stored before that, upload records alone (which never expire once processed) give a lower bound."""
    check = Check("2+3. each file's upload_count = its uploads, recounted from event and upload records", True)
    counted: dict[str, set[str]] = {}
    from_uploads: dict[str, int] = {}
    # a content reaped and stored again is a new record counting from 0: what an earlier one counted (processed
    # before this one was created) is not its
    created = {file.hash: file.created_at or "" for file in files}
    for event in events:
        if event.outcome in ("stored", "duplicate") and event.hash:
            if (event.processed_at or "") < created.get(event.hash, ""):
                continue
            counted.setdefault(event.hash, set()).add(event.event_key)
    for upload in uploads:
        # a deleted upload that had been processed stays counted: upload_count is history
        processed = upload.status.processed or (upload.status == UploadStatus.DELETED and upload.processed_at)
        if processed and upload.hash and (upload.processed_at or "") < created.get(upload.hash, ""):
            continue
        if processed and upload.hash:
            counted.setdefault(upload.hash, set()).add(upload.event_key or "upload#" + upload.upload_id)
            from_uploads[upload.hash] = from_uploads.get(upload.hash, 0) + 1
    horizon = clock.iso(clock.plus(clock.now(), days=-settings.event_ttl_days))
    for file in files:
        recount = len(counted.get(file.hash, ()))
        if (file.created_at or "") >= horizon:
            if file.upload_count != recount:
                check.problems.append(
                    f"file {file.hash}: upload_count {file.upload_count}, its uploads recounted {recount}"
                )
        elif file.upload_count < from_uploads.get(file.hash, 0):
            check.problems.append(
                f"file {file.hash}: upload_count {file.upload_count} < its {from_uploads[file.hash]} uploads"
            )
    check.counts = {"files": len(files), "counted_uploads": sum(len(v) for v in counted.values())}
    check.holds = not check.problems
    return check


def _tenant_checks(refs: list[TenantRef], uploads: list[UploadRecord], hashes: set[str]) -> list[Check]:
    """The tenant layer: references agree with the uploads, API uploads carry their caller."""
    c8 = Check(
        "tenants: each reference's upload_count = its tenant's processed uploads of the content (at 0: the reaper's)",
        True,
    )
    recount: dict[tuple[str, str], int] = {}
    for upload in uploads:
        if upload.tenant and upload.status.processed and upload.hash:
            key = (upload.tenant, upload.hash)
            recount[key] = recount.get(key, 0) + 1
    held = {(ref.tenant, ref.hash): ref.upload_count for ref in refs}
    for ref in refs:  # a reference at 0 (its tenant holds nothing) exists only until the reaper deletes it
        if not ref.holds and not (ref.reap_shard and ref.reap_after):
            c8.problems.append(f"tenant {ref.tenant}, content {ref.hash}: at 0 but not marked for the reaper")
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
    api = [u for u in uploads if u.expires_at is not None or u.event_key is None]
    for upload in api:
        if not upload.owner or not upload.tenant:
            c9.problems.append(f"upload {upload.upload_id} was made through the API without owner/tenant")
    c9.counts = {"api_uploads": len(api), "direct": len(uploads) - len(api)}
    c9.holds = not c9.problems
    return [c8, c9]


@interruptible
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
