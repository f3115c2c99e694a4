"""In-memory models of the two ports (dfd.ports): the domain's logic, tested in milliseconds.

FakeRepository keeps the five tables as dicts of items — written and parsed by the adapter's own codec
(dfd.adapters.dynamo.codec), so its items are the adapter's and its reads the same records — and honours the
conditions of the adapter's writes: a transaction either applies all its writes or none, and a refused one raises
the typed conflict of the first failed condition in the adapter's order (event, claim, file, upload, tenant)
carrying the record that stood in the way. tests/contract runs one suite against this model and the moto-backed
Repository, so the two cannot drift.

Fault seams: `faults` (exceptions the next transactions raise before any condition is checked: throttling,
TransactionConflict), `after_state` (runs once, right after ingest_state has read: a concurrent writer) and
`after_tenant_file` (the same after tenant_file).
"""

from __future__ import annotations

import copy
import hashlib
import io
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from dfd.adapters.dynamo import codec
from dfd.core import clock
from dfd.core.config import Settings
from dfd.core.conflicts import (
    CommitRefused,
    DeleteRaced,
    EventRecorded,
    FileAppeared,
    FileChanged,
    FileIsThisObject,
    FileVanished,
    KeyClaimed,
    LeaseLost,
    MultipartAttached,
    PendingReleased,
    PrecheckLimited,
    QuotaRefused,
    ReapPending,
    ReferenceMissing,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.errors import MultipartGone, ObjectChanged, ObjectNotFound
from dfd.core.ids import tenant_from_metadata, upload_id_of_event
from dfd.core.objects import ListedObject, ObjectInfo, OpenedObject, PartInfo, Sink
from dfd.core.records import (
    COUNTER_FIELDS,
    EventRecord,
    FileRecord,
    KeyClaim,
    Lease,
    TenantRef,
    TenantUsage,
    UploadRecord,
    UploadStatus,
    counts_stored,
    holds,
)
from dfd.core.repository import Cursor
from dfd.ingest.ports import IngestState, ObjectVersion, TenantShare
from dfd.reconcile.service import Reconciler
from dfd.uploads.ports import NewMultipart, NewUpload, PrecheckDuplicate, UploadDeletion

Item = dict[str, Any]
R = TypeVar("R")


def _parsed(parse: Callable[[Item], R], item: Mapping[str, Any] | None) -> R | None:
    """The record of a stored item (None: absent), as the adapter parses it — a copy: the model's item stays."""
    return None if item is None else parse(copy.deepcopy(dict(item)))


class FakeRepository:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.files: dict[str, Item] = {}
        self.uploads: dict[str, Item] = {}
        self.events: dict[str, Item] = {}
        self.claims: dict[tuple[str, str], Item] = {}
        self.tenant_refs: dict[tuple[str, str], Item] = {}  # (tenant, hash) -> the tenant's reference
        self.counters: dict[int, dict[str, int]] = {}
        self.usage: dict[str, dict[str, int]] = {}  # tenant -> its usage item (the adapter's shards summed in one)
        self.prechecks: dict[str, dict[str, int]] = {}  # tenant -> its precheck bound's item (precheck#<tenant>)
        self.lease: Item = {}  # the reconcile's lease item (lease#reconcile)
        self.faults: list[Exception] = []
        self.after_state: Callable[[], None] | None = None
        self.after_tenant_file: Callable[[], None] | None = None
        self.transactions = 0  # attempted (faults included)
        self.committed = 0
        self.state_reads: list[str | None] = []  # each ingest_state's tenant hint (None: no reference read)
        self.adopted: list[tuple[str, str]] = []  # (hash, the key that became its stored copy)
        self.nonces = 0  # the commits' nonces (the adapter's are random)

    # ---------------------------------------------------------------- reads
    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        self.state_reads.append(tenant_hint if upload_id is not None else None)
        ref = self.tenant_refs.get((tenant_hint, digest)) if upload_id is not None and tenant_hint else None
        state = IngestState(  # the adapter's read: the event its upload carries, else (no upload) its own item
            self._carried_event(event_key) if upload_id is not None else self.get_event(event_key),
            self.get_file(digest),
            self.get_upload(upload_id) if upload_id is not None else None,
            _parsed(codec.tenant_ref, ref),
        )
        hook, self.after_state = self.after_state, None
        if hook is not None:
            hook()
        return state

    def get_file(self, digest: str, *, consistent: bool = False) -> FileRecord | None:
        return _parsed(codec.file_record, self.files.get(digest))

    def get_upload(self, upload_id: str) -> UploadRecord | None:
        return _parsed(codec.upload_record, self.uploads.get(upload_id))

    def get_event(self, event_key: str) -> EventRecord | None:
        carried = self._carried_event(event_key)
        return carried if carried is not None else _parsed(codec.event_record, self.events.get(event_key))

    def _carried_event(self, event_key: str) -> EventRecord | None:
        """The event record the upload item of its object carries (the adapter's ingest commits write it there)."""
        upload_id = upload_id_of_event(self.settings.upload_prefix, event_key)
        event = codec.upload_event(copy.deepcopy(self.uploads.get(upload_id or "")))
        return event if event is not None and event.event_key == event_key else None

    def get_claim(self, bucket: str, key: str) -> KeyClaim | None:
        return _parsed(codec.key_claim, self.claims.get((bucket, key)))

    def tenant_file(
        self, tenant: str, digest: str, *, consistent: bool = True
    ) -> tuple[FileRecord | None, TenantRef | None]:
        found = self.get_file(digest), _parsed(codec.tenant_ref, self.tenant_refs.get((tenant, digest)))
        hook, self.after_tenant_file = self.after_tenant_file, None
        if hook is not None:
            hook()
        return found

    def counter_totals(self, *, consistent: bool = False) -> dict[str, int]:
        totals = dict.fromkeys(COUNTER_FIELDS, 0)
        for shard in self.counters.values():
            for name in COUNTER_FIELDS:
                totals[name] += shard.get(name, 0)
        return totals

    def tenant_usage(self, tenant: str, *, consistent: bool = True) -> TenantUsage:
        return codec.tenant_usage(self.usage.get(tenant))

    def scan_files(
        self, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[FileRecord], dict[str, str] | None]:
        after = (start_key or {}).get("hash", "")
        rest = [self.files[h] for h in sorted(self.files) if h > after]
        page = [codec.file_record(copy.deepcopy(item)) for item in rest[:limit]]
        return page, ({"hash": page[-1].hash} if len(rest) > limit else None)

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[UploadRecord], dict[str, str] | None]:
        mine = sorted(
            (u for u in self.uploads.values() if u.get("owner") == owner and u.get("created_at")),
            key=lambda u: (u["created_at"], u["upload_id"]),
            reverse=True,
        )
        if start_key:
            after = (start_key["created_at"], start_key["upload_id"])
            mine = [u for u in mine if (u["created_at"], u["upload_id"]) < after]
        page = [codec.upload_record(copy.deepcopy(item)) for item in mine[:limit]]
        last = page[-1] if page and len(mine) > limit else None
        return page, (
            {"owner": owner, "created_at": str(last.created_at), "upload_id": last.upload_id} if last else None
        )

    # ---------------------------------------------------------------- uploads
    def register_upload(self, upload: NewUpload, now: datetime, *, multipart: NewMultipart | None = None) -> None:
        assert upload.upload_id not in self.uploads, "upload ids are unique"
        usage = codec.tenant_usage(self.usage.get(upload.tenant))
        bytes_limit, pending_limit = self.settings.tenant_quota_bytes, self.settings.tenant_pending_limit
        if (pending_limit and usage.pending_count >= pending_limit) or (
            bytes_limit and usage.used_bytes + upload.size > bytes_limit
        ):
            raise QuotaRefused(_parsed(codec.tenant_usage, self.usage.get(upload.tenant)))
        self._move(upload.tenant, pending_count=1, pending_bytes=upload.size, used_bytes=upload.size)
        self.uploads[upload.upload_id] = codec.pending_upload_item(
            upload,
            now,
            reconcile_after=clock.plus(now, seconds=self.settings.reconcile_grace_seconds),
            pending_shard="p#0",
            ttl=clock.epoch(clock.plus(now, days=self.settings.upload_ttl_days)),
            multipart=multipart,
        )

    def register_multipart_upload(self, upload: NewUpload, multipart: NewMultipart, now: datetime) -> None:
        self.register_upload(upload, now, multipart=multipart)

    def _move(self, tenant: str, **deltas: int) -> None:
        """ADD `deltas` (by TenantUsage field) to the tenant's usage item, its attributes named as the adapter's."""
        usage = self.usage.setdefault(tenant, {})
        for name, delta in deltas.items():
            if attr := codec.USAGE_ATTRS.get(name):  # pending_bytes is used - stored
                usage[attr] = usage.get(attr, 0) + delta

    def attach_s3_upload(self, upload_id: str, s3_upload_id: str, *, part_checksums: bool) -> None:
        record = self.uploads.get(upload_id)
        if record is None or record.get("s3_upload_id") or record.get("status") != UploadStatus.PENDING:
            raise MultipartAttached(_parsed(codec.upload_record, record))
        record.update(s3_upload_id=s3_upload_id, part_checksums=part_checksums)

    def mark_multipart_completed(self, upload_id: str, now: datetime) -> None:
        if upload_id in self.uploads:
            self.uploads[upload_id].setdefault("completed_at", clock.iso(now))

    def end_pending_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        record = self.uploads.get(upload_id)
        if record is None or record.get("status") != UploadStatus.PENDING:
            return False
        if not self._released(record, tenant, quota_bytes):
            return False
        record.update(status=UploadStatus(status).value, ended_at=clock.iso(now))
        if status == UploadStatus.DELETED:
            record["deleted_at"] = clock.iso(now)
        record.pop("pending_shard", None)
        return True

    def cancel_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        record = self.uploads.get(upload_id)
        if record is None or record.get("status") != status:
            return False
        if not self._released(record, tenant, quota_bytes):
            return False
        record.update(status=UploadStatus.DELETED.value, deleted_at=clock.iso(now))
        record.pop("pending_shard", None)
        return True

    def _released(self, record: Item, tenant: str | None, quota_bytes: int) -> bool:
        """The adapter's _end_upload: with a tenant and quota bytes, the record must still hold exactly those
        (False: the condition fails, nothing changes); they leave it and the tenant's pending usage together."""
        if tenant is None or quota_bytes <= 0:
            return True
        if record.get("quota_bytes") != quota_bytes:
            return False
        del record["quota_bytes"]
        self._move(tenant, pending_count=-1, pending_bytes=-quota_bytes, used_bytes=-quota_bytes)
        return True

    # ---------------------------------------------------------------- deletes
    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """The adapter's one transaction, reading nothing first: the status condition (DeleteRaced) is checked before
        the counts' (ReferenceMissing), each count conditioned on being above 0; both marked for the reaper."""
        self._begin(counter_shard)
        upload = self.uploads.get(deletion.upload_id)
        file = self.files.get(deletion.hash)
        ref = None if deletion.tenant is None else self.tenant_refs.get((deletion.tenant, deletion.hash))
        if upload is None or upload.get("status") != deletion.status:
            raise DeleteRaced(None)
        if deletion.tenant is not None and (ref is None or int(ref.get("upload_count", 0)) <= 0):
            raise ReferenceMissing(None)
        if file is None or int(file.get("live_refs", 0)) <= 0:
            raise ReferenceMissing(None)
        stamp = clock.iso(now)
        upload.update(status=UploadStatus.DELETED.value, deleted_at=stamp)
        if ref is not None:
            ref["upload_count"] -= 1
            ref.update(reap_after=stamp)
            ref.setdefault("reap_shard", "t#0")
        file["live_refs"] -= 1
        file["reap_after"] = clock.iso(clock.plus(now, seconds=self.settings.delete_grace_seconds))
        file.setdefault("tombstone_shard", "t#0")
        self._count(counter_shard, deleted_uploads=1)

    # ---------------------------------------------------------------- contents
    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        if version.event_key in self.events:
            return False
        self.events[version.event_key] = self._event(version, outcome, now)
        return True

    def commit_stored(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        refused = FileAppeared(codec.file_record(copy.deepcopy(file))) if file is not None else None
        self._begin_commit(version, counter_shard, claims=True, file=refused, tenant=tenant)
        stamp = clock.iso(now)
        self.files[version.hash] = codec.new_file_item(version, filename, content_type, stamp)
        self._commit(version, "stored", UploadStatus.STORED, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1, total_files=1, total_bytes_stored=version.size)

    def commit_duplicate(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        record = _parsed(codec.file_record, file)
        refused: CommitRefused | None = None
        if record is None:
            refused = FileVanished(None)
        elif record.s3_key is None:  # `s3_key <> :key` is false on a missing attribute
            refused = FileChanged(record)
        elif record.s3_key == version.key:
            refused = FileIsThisObject(record)
        elif record.tombstoned:  # new references only to live (or lost: adopted) content: a count above 0
            refused = FileChanged(record)
        self._begin_commit(version, counter_shard, claims=False, file=refused, tenant=tenant)
        assert file is not None
        self._count_duplicate(file, now)
        status = UploadStatus.STORED if tenant is not None and not tenant.held else UploadStatus.DUPLICATE
        self._commit(version, "duplicate", status, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1, duplicates_avoided=1, total_s3_size_saved=version.size)

    def commit_resurrect(
        self,
        version: ObjectVersion,
        tombstoned: FileRecord,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        file = self.files.get(version.hash)
        record = _parsed(codec.file_record, file)
        refused: CommitRefused | None = None
        if record is None:
            refused = FileVanished(None)
        elif not record.tombstoned or record.generation != tombstoned.generation:
            refused = FileChanged(record)
        elif record.s3_key != tombstoned.s3_key or record.reap_key is not None:
            refused = ReapPending(record)
        self._begin_commit(version, counter_shard, claims=True, file=refused, tenant=tenant)
        assert file is not None
        file.pop("state", None)  # a lost mark goes: this copy exists
        file.pop("lost_at", None)
        file.update(
            generation=tombstoned.generation + 1,
            reap_key=file["s3_key"],
            reap_etag=file.get("etag", ""),
            s3_key=version.key,
            bucket=version.bucket,
            etag=version.etag,
            live_refs=1,
            last_upload_at=clock.iso(now),
            stores=file.get("stores", 1) + 1,
            upload_count=file.get("upload_count", 0) + 1,
        )
        self._commit(version, "stored", UploadStatus.STORED, filename, content_type, now, tenant)
        self._count(counter_shard, total_uploads=1)

    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        self._begin(counter_shard)
        assert upload.upload_id not in self.uploads, "upload ids are unique"
        file = self.files.get(upload.hash)
        record = _parsed(codec.file_record, file)
        # the adapter's order: upload (a fresh id: never refused), file, tenant; no new reference unless live
        if file is None or record is None or not record.live:
            raise FileVanished(record)
        refused = self._tenant_refused(TenantShare(upload.tenant, held=True, counted=True), upload.hash)
        if refused is not None:
            raise refused
        counted = self.prechecks.get(upload.tenant, {})
        bound = upload.bound
        if bound is not None:  # the adapter's precheck_bound_update
            window = counted.get("precheck_window")
            same = window == bound.window and counted.get("prechecks", 0) < bound.limit
            if (window == bound.window) if bound.fresh else not same:
                raise PrecheckLimited(_parsed(codec.precheck_count, self.prechecks.get(upload.tenant)))
            counted = self.prechecks.setdefault(upload.tenant, {})
            counted["prechecks"] = 1 if bound.fresh else counted["prechecks"] + 1
            counted["precheck_window"] = bound.window
        stamp = clock.iso(now)
        self.uploads[upload.upload_id] = codec.precheck_upload_item(upload, stamp)
        self._count_duplicate(file, now)
        ref = self.tenant_refs[(upload.tenant, upload.hash)]
        ref["upload_count"] = ref.get("upload_count", 0) + 1
        ref["last_upload_at"] = stamp
        ref.pop("reap_shard", None)
        ref.pop("reap_after", None)
        self._count(counter_shard, total_uploads=1, duplicates_avoided=1, total_s3_size_saved=upload.size)

    def adopt_copy(
        self, version: ObjectVersion, lost: FileRecord, now: datetime, *, upload_deleted: bool = False
    ) -> None:
        self.transactions += 1
        if self.faults:
            raise self.faults.pop(0)
        file = self.files.get(version.hash)
        if file is None or file.get("s3_key") != lost.s3_key or (lost.etag and file.get("etag") != lost.etag):
            raise FileChanged(_parsed(codec.file_record, file))
        claim = self.claims.get((version.bucket, version.key))
        if claim is not None:
            raise KeyClaimed(_parsed(codec.key_claim, claim))
        upload = self.uploads.get(version.upload_id) if version.upload_id is not None and not upload_deleted else None
        if version.upload_id is not None and version.upload_id not in self.uploads:
            raise UploadTaken(None)  # the adapter's claim goes on the upload item, which must exist
        if upload is not None and (
            upload.get("event_key") != version.event_key or upload.get("status") == UploadStatus.DELETED
        ):
            raise UploadTaken(_parsed(codec.upload_record, upload))
        lost_claim = (str(file.get("bucket") or version.bucket), str(file["s3_key"]))
        if self.claims.get(lost_claim, {}).get("hash", version.hash) == version.hash:
            self.claims.pop(lost_claim, None)
        file.update(s3_key=version.key, etag=version.etag, bucket=version.bucket, adopted_at=clock.iso(now))
        file.pop("state", None)
        file.pop("lost_at", None)
        self.claims[(version.bucket, version.key)] = codec.claim_item("", version.hash, clock.iso(now))
        if upload is not None:
            upload["status"] = UploadStatus.STORED.value
        self.adopted.append((version.hash, version.key))

    # ---------------------------------------------------------------- the reconcile (dfd.reconcile.service)
    def get_events(self, event_keys: Collection[str]) -> dict[str, EventRecord]:
        found = {key: self.get_event(key) for key in event_keys}
        return {key: event for key, event in found.items() if event is not None}

    def get_uploads(self, upload_ids: Collection[str]) -> dict[str, UploadRecord]:
        found = {upload_id: self.uploads.get(upload_id) for upload_id in upload_ids}
        return {upload_id: codec.upload_record(copy.deepcopy(item)) for upload_id, item in found.items() if item}

    def get_claims(self, bucket: str, keys: Collection[str]) -> dict[str, KeyClaim]:
        found = {key: self.claims.get((bucket, key)) for key in keys}
        return {key: codec.key_claim(copy.deepcopy(item)) for key, item in found.items() if item}

    def _due(
        self,
        items: Mapping[Any, Item],
        index: tuple[str, str],
        shard: int,
        now: datetime,
        page: tuple[int, Cursor | None],
    ) -> tuple[list[Item], Cursor | None]:
        """A page (its limit and start) of a sparse index's shard (`index`: the shard attribute, its key prefix) due
        by `now`, ordered by (due time, the item's key) as DynamoDB orders a GSI's items."""
        shard_name, prefix = index
        limit, start = page
        due_name = "reconcile_after" if shard_name == "pending_shard" else "reap_after"
        keys = {"pending_shard": ("upload_id",), "tombstone_shard": ("hash",), "reap_shard": ("tenant", "hash")}
        order = (due_name, *keys[shard_name])
        stamp = clock.iso(now)
        due = sorted(
            (i for i in items.values() if i.get(shard_name) == f"{prefix}#{shard}" and str(i.get(due_name)) <= stamp),
            key=lambda item: tuple(str(item[name]) for name in order),
        )
        if start:
            after = tuple(start[name] for name in order)
            due = [item for item in due if tuple(str(item[name]) for name in order) > after]
        found = [copy.deepcopy(item) for item in due[:limit]]
        following = {name: str(found[-1][name]) for name in (shard_name, *order)} if len(due) > limit else None
        return found, following

    def due_uploads(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[UploadRecord], Cursor | None]:
        page, following = self._due(self.uploads, ("pending_shard", "p"), shard, now, (limit, start))
        return [codec.upload_record(item) for item in page], following

    def count_redrive(self, upload_id: str, now: datetime) -> int | None:
        upload = self.uploads.get(upload_id)
        if upload is None or upload.get("status") != UploadStatus.PENDING:
            return None
        upload["redrives"] = upload.get("redrives", 0) + 1
        upload["last_redrive_at"] = clock.iso(now)
        return int(upload["redrives"])

    def give_up_upload(
        self, upload: UploadRecord, status: UploadStatus, now: datetime, *, failure: str | None = None
    ) -> bool:
        record = self.uploads.get(upload.upload_id)
        if record is None or record.get("status") != UploadStatus.PENDING:
            return False
        if not self._released(record, upload.tenant, upload.quota_bytes):
            return False
        record.update({"status": status.value, f"{status.value}_at": clock.iso(now)})
        if failure:
            record["failure"] = failure
        record.pop("pending_shard", None)
        return True

    def due_contents(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[FileRecord], Cursor | None]:
        page, following = self._due(self.files, ("tombstone_shard", "t"), shard, now, (limit, start))
        return [codec.file_record(item) for item in page], following

    def forget_older_generation(self, file: FileRecord) -> bool:
        record = self.files.get(file.hash)
        if record is None or record.get("reap_etag") != file.reap_etag:
            return False
        self._drop_claim(record, file, str(file.reap_key))
        record.pop("reap_key", None)
        record.pop("reap_etag", None)
        return True

    def _drop_claim(self, record: Item, file: FileRecord, key: str) -> None:
        """The key claim of a content's object goes with it, unless another content claims that key now."""
        claim = (str(record.get("bucket") or self.settings.bucket), key)
        if self.claims.get(claim, {}).get("hash", file.hash) == file.hash:
            self.claims.pop(claim, None)

    def unindex_content(self, file: FileRecord) -> bool:
        record = self.files.get(file.hash)
        if record is None or int(record.get("live_refs", 0)) <= 0 or "reap_key" in record:
            return False
        record.pop("tombstone_shard", None)
        record.pop("reap_after", None)
        return True

    def reap_content(self, file: FileRecord, *, counter_shard: int) -> bool:
        self._begin(counter_shard)
        record = self.files.get(file.hash)
        if (
            record is None
            or int(record.get("live_refs", 0)) != 0
            or int(record.get("generation", 0)) != file.generation
            or record.get("s3_key") != file.s3_key
            or "reap_key" in record
        ):
            return False
        reaped = codec.file_record(record)
        del self.files[file.hash]
        self._drop_claim(record, file, str(file.s3_key))
        self._count(
            counter_shard,
            total_files=-1,
            total_bytes_stored=-reaped.size,
            reaped_uploads=reaped.upload_count,
            reaped_duplicates=reaped.duplicates,
            reaped_saved=reaped.saved_bytes,
        )
        return True

    def due_references(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[TenantRef], Cursor | None]:
        page, following = self._due(self.tenant_refs, ("reap_shard", "t"), shard, now, (limit, start))
        return [codec.tenant_ref(item) for item in page], following

    def reap_reference(self, ref: TenantRef) -> bool:
        key = (ref.tenant, ref.hash)
        record = self.tenant_refs.get(key)
        if record is not None and int(record.get("upload_count", 0)) > 0:
            return False
        self.tenant_refs.pop(key, None)
        if ref.size:  # the adapter's transaction: the size released with the item's delete
            self._move(ref.tenant, stored_bytes=-ref.size, used_bytes=-ref.size)
        return True

    def unindex_reference(self, ref: TenantRef) -> bool:
        record = self.tenant_refs.get((ref.tenant, ref.hash))
        if record is None or int(record.get("upload_count", 0)) <= 0:
            return False
        record.pop("reap_shard", None)
        record.pop("reap_after", None)
        return True

    def mark_lost(self, file: FileRecord, now: datetime) -> bool:
        record = self.files.get(file.hash)
        if record is None or "state" in record or record.get("s3_key") != file.s3_key:
            return False
        if int(record.get("live_refs", 0)) <= 0:
            return False
        record.update(state=codec.LOST, lost_at=clock.iso(now))
        return True

    def take_lease(self, holder: str, now: datetime, until: datetime) -> Lease:
        lease = self.lease
        if lease.get("holder") not in (None, holder) and str(lease.get("expires_at")) >= clock.iso(now):
            return codec.lease(copy.deepcopy(lease))
        lease.update(holder=holder, expires_at=clock.iso(until))
        return codec.lease(copy.deepcopy(lease))

    def renew_lease(self, holder: str, until: datetime) -> None:
        if self.lease.get("holder") != holder:
            raise LeaseLost(codec.lease(copy.deepcopy(self.lease)))
        self.lease["expires_at"] = clock.iso(until)

    def note_sweep_due(self, now: datetime) -> None:
        self.lease["sweep_due_at"] = clock.iso(now)

    def release_lease(self, holder: str, *, swept_at: datetime | None = None) -> None:
        if self.lease.get("holder") != holder:
            return
        self.lease.pop("holder", None)
        self.lease.pop("expires_at", None)
        if swept_at is not None:
            self.lease["swept_at"] = clock.iso(swept_at)

    # ---------------------------------------------------------------- the model's rules
    def _begin(self, counter_shard: int) -> None:
        self.transactions += 1
        assert 0 <= counter_shard < self.settings.counter_shards, counter_shard
        if self.faults:
            raise self.faults.pop(0)

    def _begin_commit(
        self,
        version: ObjectVersion,
        counter_shard: int,
        *,
        claims: bool,
        file: CommitRefused | None,
        tenant: TenantShare | None,
    ) -> None:
        """Every condition of an ingest's commit; the first failed one in the adapter's order (event, claim, file,
        upload, tenant) wins. `claims`: the commit claims the key (else: conditioned on no claim there)."""
        self._begin(counter_shard)
        claim = self.claims.get((version.bucket, version.key))
        # the event's condition: on the upload item that carries it (an object at an upload key), else on its own
        event: EventRecord | None = None
        upload_refused: CommitRefused | None = None
        if version.upload_id is not None:
            upload = self.uploads.get(version.upload_id)
            record = _parsed(codec.upload_record, upload)
            event = self._carried_event(version.event_key)
            releasing = tenant is not None and tenant.pending_bytes > 0
            if record is not None:
                if record.event_key is not None or record.status == UploadStatus.DELETED:
                    upload_refused = UploadTaken(record)
                elif releasing and upload is not None and "quota_bytes" not in upload:
                    upload_refused = PendingReleased(record)
            elif releasing:
                upload_refused = UploadTaken(None)  # `attribute_exists(quota_bytes)` fails on a missing record
        elif version.event_key in self.events:
            event = codec.event_record(copy.deepcopy(self.events[version.event_key]))
        for refused in (
            EventRecorded(event) if event is not None else None,
            KeyClaimed(codec.key_claim(copy.deepcopy(claim))) if claim is not None else None,
            file,
            upload_refused,
            self._tenant_refused(tenant, version.hash),
        ):
            if refused is not None:
                raise refused

    def _tenant_refused(self, tenant: TenantShare | None, digest: str) -> CommitRefused | None:
        """The tenant reference's condition: absent, at 0 or held (the item exists with a count above 0) exactly as
        read or assumed."""
        if tenant is None:
            return None
        ref = _parsed(codec.tenant_ref, self.tenant_refs.get((tenant.tenant, digest)))
        if (tenant.held, tenant.counted) != (holds(ref), counts_stored(ref)):
            return TenantRefChanged(ref)
        return None

    def _commit(
        self,
        version: ObjectVersion,
        outcome: str,
        status: UploadStatus,
        filename: str,
        content_type: str,
        now: datetime,
        tenant: TenantShare | None,
    ) -> None:
        """What every ingest commit writes besides the file record: the event, the key's claim (when the file record
        names this object), the upload finished, the tenant's reference and usage."""
        stamp = clock.iso(now)
        if version.upload_id is None:  # else the upload item carries it (_finish_upload)
            self.events[version.event_key] = self._event(version, outcome, now)
        if self.files[version.hash].get("s3_key") == version.key:
            self.claims[(version.bucket, version.key)] = codec.claim_item("", version.hash, stamp)
        self._finish_upload(version, status, UploadStatus(outcome), filename, content_type, stamp)
        self._add_tenant_ref(tenant, version, filename, content_type, stamp)

    def _count_duplicate(self, file: Item, now: datetime) -> None:
        file["upload_count"] = file.get("upload_count", 0) + 1
        file["live_refs"] = file.get("live_refs", 0) + 1
        file["last_upload_at"] = clock.iso(now)

    def _add_tenant_ref(
        self, tenant: TenantShare | None, version: ObjectVersion, filename: str, content_type: str, stamp: str
    ) -> None:
        if tenant is None:
            return
        stored = 0 if tenant.counted else version.size  # the adapter's _add_usage_moves: a reference item created
        if tenant.pending_bytes:
            self._move(tenant.tenant, pending_count=-1, pending_bytes=-tenant.pending_bytes)
        self._move(tenant.tenant, stored_bytes=stored, used_bytes=stored - tenant.pending_bytes)
        ref = self.tenant_refs.setdefault(
            (tenant.tenant, version.hash), dict(codec.tenant_ref_key(tenant.tenant, version.hash))
        )
        for name, value in codec.first_reference(version, filename, content_type, stamp).items():
            if value is not None:  # a new reference (none, or one at 0) takes them anew; a held one keeps its own
                ref[name] = ref.get(name, value) if tenant.held else value
        ref["upload_count"] = ref.get("upload_count", 0) + 1
        ref["last_upload_at"] = stamp
        ref.pop("reap_shard", None)
        ref.pop("reap_after", None)

    def _event(self, version: ObjectVersion, outcome: str, now: datetime) -> Item:
        return codec.event_item(version, outcome, now, clock.epoch(clock.plus(now, days=self.settings.event_ttl_days)))

    def _finish_upload(
        self,
        version: ObjectVersion,
        status: UploadStatus,
        outcome: UploadStatus,
        filename: str,
        content_type: str,
        stamp: str,
    ) -> None:
        if version.upload_id is None:
            return
        upload = self.uploads.setdefault(version.upload_id, dict(codec.upload_key(version.upload_id)))
        self.nonces += 1
        upload.update(codec.processed_upload(version, status, outcome, stamp, f"{self.nonces:016x}"))
        for name, value in (("filename", filename), ("content_type", content_type), ("created_at", stamp)):
            upload.setdefault(name, value)
        for name in ("pending_shard", "ttl", "quota_bytes"):
            upload.pop(name, None)

    def _count(self, shard: int, **deltas: int) -> None:
        totals = self.counters.setdefault(shard, {})
        for name, delta in deltas.items():
            totals[name] = totals.get(name, 0) + delta
        self.committed += 1


@dataclass
class FakeObject:
    data: bytes
    etag: str
    version_id: str | None
    content_type: str | None
    checksum_sha256: str | None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeObjectStore:
    """Objects by (bucket, key). A GET answers IfMatch like S3 (ObjectChanged when the ETag moved on)."""

    objects: dict[tuple[str, str], FakeObject] = field(default_factory=dict)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    presigned: list[dict[str, Any]] = field(default_factory=list)
    before_stream: Callable[[ObjectInfo], None] | None = None  # runs once, between the open and the read
    streams: int = 0  # bodies read through stream()
    heads: list[tuple[str, str]] = field(default_factory=list)  # exists() calls (HeadObject IfMatch)
    _puts: int = 0

    def put(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        checksum: bool = False,
        content_type: str | None = "application/octet-stream",
        metadata: dict[str, str] | None = None,
    ) -> FakeObject:
        self._puts += 1
        etag = '"' + hashlib.md5(data + str(self._puts).encode(), usedforsecurity=False).hexdigest() + '"'
        digest = hashlib.sha256(data).hexdigest() if checksum else None
        self.objects[(bucket, key)] = FakeObject(data, etag, None, content_type, digest, dict(metadata or {}))
        return self.objects[(bucket, key)]

    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject:
        found = self.objects.get((bucket, key))
        if found is None:
            raise ObjectNotFound(f"s3 object {key} does not exist")
        info = ObjectInfo(
            bucket,
            key,
            found.etag,
            found.version_id,
            len(found.data),
            found.content_type,
            found.checksum_sha256,
            tenant_from_metadata(found.metadata),
        )
        body = None if expect_checksum else io.BytesIO(found.data)
        return OpenedObject(info, body)

    def stream(self, opened: OpenedObject, sink: Sink) -> int:
        self.streams += 1
        hook, self.before_stream = self.before_stream, None
        if hook is not None:
            hook(opened.info)
        body = opened.take_body()
        if body is None:  # GetObject IfMatch the ETag the HEAD identified
            info = opened.info
            found = self.objects.get((info.bucket, info.key))
            if found is None:
                raise ObjectNotFound(f"s3 object {info.key} does not exist")
            if found.etag != info.etag:
                raise ObjectChanged(f"s3 object {info.key} changed while it was read")
            body = io.BytesIO(found.data)
        count = 0
        with body:
            while chunk := body.read(7):
                sink(memoryview(chunk))
                count += len(chunk)
        return count

    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        found = self.objects.get((bucket, key))
        if found is None:
            return True
        if etag and found.etag != etag:
            return False
        del self.objects[(bucket, key)]
        self.deleted.append((bucket, key))
        return True

    def list_objects(
        self, bucket: str, prefix: str, limit: int, token: str | None
    ) -> tuple[list[ListedObject], str | None]:
        """ListObjectsV2: keys in order; the token is the last key of the page."""
        keys = sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix) and k > (token or ""))
        page = [ListedObject(key, self.objects[(bucket, key)].etag) for key in keys[:limit]]
        return page, (page[-1].key if len(keys) > limit else None)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        found = self.objects.get((bucket, key))
        if found is None:
            raise ObjectNotFound(f"s3 object {key} does not exist")
        return found.data

    def exists(self, bucket: str, key: str, etag: str | None) -> bool:
        self.heads.append((bucket, key))
        found = self.objects.get((bucket, key))
        return found is not None and (not etag or found.etag == etag)

    def presign_put(
        self,
        bucket: str,
        key: str,
        *,
        size: int,
        content_type: str,
        checksum_b64: str | None,
        expires_in: int,
        metadata: dict[str, str] | None = None,
    ) -> tuple[str, dict[str, str]]:
        self.presigned.append(
            {
                "bucket": bucket,
                "key": key,
                "size": size,
                "content_type": content_type,
                "checksum_b64": checksum_b64,
                "metadata": dict(metadata or {}),
            }
        )
        headers = {"content-type": content_type, "content-length": str(size), "if-none-match": "*"}
        if checksum_b64:
            headers["x-amz-checksum-sha256"] = checksum_b64
        for name, value in (metadata or {}).items():
            headers[f"x-amz-meta-{name}"] = value
        return f"https://fake-s3/{bucket}/{key}?expires={expires_in}", headers

    def presign_get(
        self, bucket: str, key: str, *, disposition: str, content_type: str | None = None, expires_in: int
    ) -> str:
        typed = f"&response-content-type={content_type}" if content_type else ""
        return f"https://fake-s3/{bucket}/{key}?expires={expires_in}{typed}"

    # ---------------------------------------------------------------- multipart
    # multiparts: S3 upload id → {"bucket", "key", "checksum", "parts": {n: PartInfo}, "data": {n: bytes}}
    multiparts: dict[str, dict[str, Any]] = field(default_factory=dict)
    aborted: list[str] = field(default_factory=list)

    def create_multipart(
        self, bucket: str, key: str, *, content_type: str, checksum: bool, metadata: dict[str, str] | None = None
    ) -> str:
        s3_upload_id = f"mpu-{len(self.multiparts) + len(self.aborted) + 1}"
        self.multiparts[s3_upload_id] = {"bucket": bucket, "key": key, "checksum": checksum, "parts": {}, "data": {}}
        self.multiparts[s3_upload_id]["metadata"] = dict(metadata or {})
        return s3_upload_id

    def upload_part(self, s3_upload_id: str, part_number: int, data: bytes, checksum_b64: str | None = None) -> str:
        """A client's PUT of one part (what S3 keeps); its ETag."""
        upload = self.multiparts[s3_upload_id]
        etag = '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'
        upload["parts"][part_number] = PartInfo(part_number, etag, len(data), checksum_b64)
        upload["data"][part_number] = data
        return etag

    def presign_upload_part(
        self,
        bucket: str,
        key: str,
        s3_upload_id: str,
        part_number: int,
        *,
        size: int,
        checksum_b64: str | None,
        expires_in: int,
    ) -> tuple[str, dict[str, str]]:
        headers = {"content-length": str(size)}
        if checksum_b64:
            headers["x-amz-checksum-sha256"] = checksum_b64
        return f"https://fake-s3/{bucket}/{key}?uploadId={s3_upload_id}&partNumber={part_number}", headers

    def list_parts(self, bucket: str, key: str, s3_upload_id: str) -> list[PartInfo]:
        upload = self.multiparts.get(s3_upload_id)
        if upload is None:
            raise MultipartGone(f"no multipart upload {s3_upload_id}")
        return [upload["parts"][n] for n in sorted(upload["parts"])]

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        upload = self.multiparts.get(s3_upload_id)
        if upload is None:
            raise MultipartGone(f"no multipart upload {s3_upload_id}")
        if (bucket, key) in self.objects:
            raise ObjectChanged(f"s3 object {key} exists")
        data = b"".join(upload["data"][part.part_number] for part in parts)
        assert len(data) == size
        self.put(bucket, key, data, metadata=upload["metadata"])
        del self.multiparts[s3_upload_id]

    def abort_multipart(self, bucket: str, key: str, s3_upload_id: str) -> None:
        if self.multiparts.pop(s3_upload_id, None) is not None:
            self.aborted.append(s3_upload_id)

    def head(self, bucket: str, key: str) -> ObjectInfo:
        with self.open(bucket, key, expect_checksum=True) as opened:
            return opened.info


@dataclass
class FakeIngestQueue:
    """The ingest queue (dfd.reconcile.ports.IngestQueue): the bodies sent, in order."""

    bodies: list[str] = field(default_factory=list)

    def send(self, body: str) -> None:
        self.bodies.append(body)


def run_reconcile(reconciler: Reconciler, **given: Any) -> dict[str, Any]:
    """A whole reconcile run in this process, as the workflow drives it (begin, every page of every phase,
    finish): its summary (or its "skipped" answer)."""
    state = reconciler.begin(given)
    if "skipped" in state:
        return state
    while state["pos"]["phase"] != "done":
        state = reconciler.page(state["pos"]["phase"], state, lambda *_: None)
    return reconciler.finish(state)
