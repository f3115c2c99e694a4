"""The invariants the simulation checks: after every step, and once the world is quiet.

After every step: the audit's whole set (dfdtools.audit, the checker the integration and e2e suites and
scripts/audit run), on the fakes' tables and objects — except "no duplicate object remains", which holds once
the ingests that committed have deleted their objects, checked when quiet — and no tenant's usage over its quota,
and every published event's id unique. Once quiet (no operation in flight, every message delivered, the reconcile
run past its grace periods): the audit again, settled; every upload acknowledged to its client (its PUT's 200, or
the 409 precheck) and not deleted ends processed, its content live with its bytes; exactly one event per
transition.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import dfdtools.audit as audit_module
from dfd.core import clock
from dfd.core.records import UploadStatus
from tests.sim.world import BUCKET, CONTENTS, QUOTA, World

QUIET_ONLY = ("4. no duplicate object remains",)


class Violation(AssertionError):
    def __init__(self, check: str, problems: list[str]) -> None:
        super().__init__(f"{check}: " + "; ".join(problems[:5]))
        self.check = check
        self.problems = problems


def _tables(world: World) -> dict[str, list[dict[str, Any]]]:
    repo, s = world.repo, world.settings
    usage = [{"tenant": tenant, "hash": "u#000", **counts} for tenant, counts in repo.usage.items()]
    return {
        s.files_table: list(repo.files.values()),
        s.uploads_table: list(repo.uploads.values()),
        s.events_table: list(repo.events.values()),
        s.counters_table: [{"counter_id": f"shard#{i}", **shard} for i, shard in repo.counters.items()],
        s.tenant_files_table: list(repo.tenant_refs.values()) + usage,
    }


@contextmanager
def on_fakes(world: World) -> Iterator[None]:
    """dfdtools.audit reading the fakes' tables and objects (its scans and reads, swapped for the model's) while
    an episode runs."""

    def scan(_ddb: Any, table: str) -> Iterator[dict[str, Any]]:
        yield from (dict(item) for item in _tables(world)[table])

    def objects(_s3: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
        for (b, key), found in sorted(world.objects.objects.items()):
            if b == bucket and key.startswith(prefix):
                yield {"Key": key, "ETag": found.etag, "Size": len(found.data)}

    def sha256(_s3: Any, bucket: str, key: str) -> Any:
        found = world.objects.objects.get((bucket, key))
        if found is None:
            return audit_module.Unreadable("NoSuchKey", gone=True)
        return hashlib.sha256(found.data).hexdigest()

    with (
        mock.patch.object(audit_module, "_scan", scan),
        mock.patch.object(audit_module, "_objects", objects),
        mock.patch.object(audit_module, "_sha256", sha256),
        mock.patch.object(audit_module.clock, "now", world.clock),
    ):
        yield


def _between_reaper_phases(world: World) -> set[str]:
    """What the audit reports while a reconcile run is between its reaper's phases: a content reaped (phase
    `reap`), a tenant's reference to it at 0 still there (deleted by phase `references`, of the same run or the
    next one's)."""
    return {
        f"tenant {tenant} references content {digest}, which has no file record"
        for (tenant, digest), ref in world.repo.tenant_refs.items()
        if int(ref.get("upload_count", 0)) == 0 and digest not in world.repo.files
    }


def audit(world: World, *, quiet: bool) -> None:
    """The audit's checks (within :func:`on_fakes`)."""
    report = audit_module._audit(None, None, world.settings, settled=quiet)
    transient = set() if quiet else _between_reaper_phases(world)
    for check in report.checks:
        if check.holds or (not quiet and check.name.startswith(QUIET_ONLY)):
            continue
        if check.name.startswith("1l."):  # listed, never a violation (the reconcile alarms on it)
            continue
        problems = [p for p in check.problems if p not in transient]
        if problems:
            raise Violation(check.name, problems)


def _failed_then_stored(world: World) -> set[str]:
    """Tenants with an upload the reconcile ended — failed (its re-drives spent) or expired (a drop-zone object's,
    its copy not made yet) — its quota bytes released, that was ingested after all (a late delivery): its bytes
    are stored past the quota's check. docs/design/simulation.md, "Findings" (reported, not fixed)."""
    return {
        str(item["tenant"])
        for item in world.repo.uploads.values()
        if (item.get("failed_at") or item.get("expired_at")) and item.get("processed_at") and item.get("tenant")
    }


def step_checks(world: World) -> None:
    world.publish()
    if world.duplicate_ids:
        event = world.duplicate_ids[0]
        raise Violation("event ids: unique", [f"{event.detail_type} of {event.upload_id or event.sha256} repeats id"])
    for tenant, counts in world.repo.usage.items():
        if counts.get("u", 0) > QUOTA and tenant not in _failed_then_stored(world):
            raise Violation("quotas: never exceeded", [f"tenant {tenant} uses {counts.get('u')} > {QUOTA}"])
    audit(world, quiet=False)


def quiet_checks(world: World) -> None:
    step_checks(world)
    audit(world, quiet=True)
    problems: list[str] = []
    # every acknowledged upload not deleted ends processed, its content live with its bytes
    for issued in world.issued:
        if not issued.acked or issued.deleted:
            continue
        record = world.repo.uploads.get(issued.upload_id)
        status = record.get("status") if record else None
        if status not in (UploadStatus.STORED, UploadStatus.DUPLICATE):
            problems.append(f"acknowledged upload #{issued.ordinal} {issued.upload_id} ends {status}")
            continue
        digest = hashlib.sha256(CONTENTS[issued.content]).hexdigest()
        file = world.repo.files.get(digest)
        if file is None or not file.get("live_refs") or file.get("state") == "lost":
            problems.append(f"acknowledged upload #{issued.ordinal}: content {digest[:12]} not live: {file}")
            continue
        found = world.objects.objects.get((BUCKET, file["s3_key"]))
        if found is None or hashlib.sha256(found.data).hexdigest() != digest:
            problems.append(f"acknowledged upload #{issued.ordinal}: content {digest[:12]}'s bytes are gone")
    if problems:
        raise Violation("acknowledged uploads end final with their bytes", problems)
    _one_event_per_transition(world)


def _one_event_per_transition(world: World) -> None:
    """Each upload record's transitions and each content's stores, against the events published for them."""
    problems: list[str] = []
    by_upload: dict[str, Counter[str]] = {}
    stored_files: Counter[str] = Counter()
    for event in world.events:
        if event.upload_id is not None:
            by_upload.setdefault(event.upload_id, Counter())[event.detail_type.value] += 1
        elif event.detail_type.value == "File Stored" and event.sha256:
            stored_files[event.sha256] += 1
    expected_stores: Counter[str] = Counter()
    # an id whose earlier records DynamoDB's TTL deleted (a drop-zone object sent again alike): each earlier one
    # may have published its own transitions, under ids of its own incarnation
    earlier = Counter(str(item["upload_id"]) for item in world.removed_uploads)
    for item in world.repo.uploads.values():
        upload_id, status = item["upload_id"], item.get("status")
        seen, before = by_upload.get(upload_id, Counter()), earlier[upload_id]
        processed = seen["Upload Stored"] + seen["Upload Deduplicated"]
        was_processed = status in ("stored", "duplicate") or (status == "deleted" and item.get("processed_at"))
        if was_processed and not 1 <= processed <= 1 + before:
            problems.append(f"upload {upload_id} ({status}): {processed} processed events")
        if not was_processed and processed > before:
            problems.append(f"upload {upload_id} ({status}), never processed: {processed} processed events")
        endings = (("deleted", "Upload Deleted"), ("expired", "Upload Expired"), ("rejected", "Upload Rejected"))
        for ending, kind in endings:
            if status == ending and not 1 <= seen[kind] <= 1 + before:
                problems.append(f"upload {upload_id} ({status}): {seen[kind]} {kind} events")
        if item.get("outcome") == "stored" and item.get("hash"):
            expected_stores[item["hash"]] += 1
    removed = {item["upload_id"] for item in world.removed_uploads}
    for event in world.events:
        if event.upload_id is not None and event.upload_id not in world.repo.uploads and event.upload_id not in removed:
            problems.append(f"{event.detail_type} of upload {event.upload_id}, which no record ever was")
    for item in world.repo.events.values():  # objects put straight into the bucket outside upload keys
        if item.get("outcome") == "stored" and not item.get("upload_id"):
            expected_stores[item["hash"]] += 1
    for digest in set(stored_files) | set(expected_stores):
        if stored_files[digest] != expected_stores[digest]:
            problems.append(
                f"content {digest[:12]}: {stored_files[digest]} File Stored events, {expected_stores[digest]} stores"
            )
    if problems:
        raise Violation("exactly one event per transition", problems)


def stamp(world: World) -> str:
    return clock.iso(world.now)
