"""The repository's port: every read and write of the stored records, as intents in the domain's terms
(what a write is: the package, dfd.ports). :class:`dfd.adapters.dynamo.Repository` implements it."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dfd.core.records import (
        EventRecord,
        FileRecord,
        KeyClaim,
        Lease,
        TenantRef,
        TenantUsage,
        UploadRecord,
        UploadStatus,
    )
    from dfd.ingest.ports import IngestState, ObjectVersion, TenantShare
    from dfd.uploads.ports import NewMultipart, NewUpload, PrecheckDuplicate, UploadDeletion

# where the next page of a listing starts, as the adapter wrote it (JSON: it travels in the workflow's state)
Cursor = dict[str, str]


class Repository(Protocol):
    # reads
    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        """The ingest's first read, ONE consistent read: the event record, the file record, the upload record
        (with an upload id) and `tenant_hint`'s reference to the content (with an upload id and a hint)."""
        ...

    def get_file(self, digest: str, *, consistent: bool = False) -> FileRecord | None: ...

    def get_upload(self, upload_id: str) -> UploadRecord | None: ...

    def get_event(self, event_key: str) -> EventRecord | None: ...

    def get_claim(self, bucket: str, key: str) -> KeyClaim | None:
        """The claim of an object key that holds a stored copy (its `hash`), or None."""
        ...

    def tenant_file(
        self, tenant: str, digest: str, *, consistent: bool = True
    ) -> tuple[FileRecord | None, TenantRef | None]:
        """The file record for the content and the tenant's reference to it (each None when absent), in ONE
        read, consistent unless not `consistent` (half the read units; a write of the last second possibly not in
        it yet)."""
        ...

    def counter_totals(self, *, consistent: bool = False) -> dict[str, int]:
        """The sum of every counter shard, one entry per dfd.core.records.COUNTER_FIELDS name."""
        ...

    def scan_files(
        self, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[FileRecord], dict[str, str] | None]: ...

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[UploadRecord], dict[str, str] | None]:
        """One page of the owner's uploads, newest first, and where the next page starts (owner, created_at,
        upload_id; None on the last page)."""
        ...

    def tenant_usage(self, tenant: str, *, consistent: bool = True) -> TenantUsage:
        """The tenant's quota usage (zeros when it has none yet), read consistently unless not `consistent` (what
        only shows it: half the read units, a write of the last second possibly not in it yet)."""
        ...

    def get_events(self, event_keys: Collection[str]) -> dict[str, EventRecord]:
        """The event records among `event_keys` that exist, by event key (consistent reads)."""
        ...

    def get_uploads(self, upload_ids: Collection[str]) -> dict[str, UploadRecord]: ...

    def get_claims(self, bucket: str, keys: Collection[str]) -> dict[str, KeyClaim]:
        """The claims of those object keys that hold a stored copy, by key."""
        ...

    # writes
    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        """Record the version's outcome on its own (nothing else changes); False when already recorded."""
        ...

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
        """In one transaction: the event (stored), the file record, the key's claim, the upload finished,
        counted as a file stored, and (with a tenant) +1 upload on the tenant's reference, created when absent.
        Raises EventRecorded, KeyClaimed, FileAppeared, UploadTaken, TenantRefChanged, CommitRefused."""
        ...

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
        """In one transaction: the event (duplicate), +1 upload on the file record, no claim on the key, the
        upload finished (`duplicate`, or `stored` when its tenant did not hold the content), counted as a
        duplicate avoided, and (with a tenant) +1 upload on the tenant's reference, created when absent.
        Raises EventRecorded, KeyClaimed, FileVanished, FileIsThisObject, FileChanged, UploadTaken,
        TenantRefChanged, CommitRefused."""
        ...

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
        """Tombstoned content uploaded again, in one transaction: THIS object becomes the canonical copy of a new
        generation (the record's s3_key/etag move here, its key is claimed, live again with one reference); the
        tombstoned generation's object is handed to the reaper (`reap_key`/`reap_etag`). Conditioned on the record
        still tombstoned at the generation read. Raises EventRecorded, KeyClaimed, FileChanged (resurrected or
        reaped meanwhile: FileVanished), ReapPending, UploadTaken, TenantRefChanged."""
        ...

    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        """Content the caller's tenant holds, announced by POST /upload, in one transaction: the caller's upload
        record (processed: `duplicate`), +1 upload on the file record and on the tenant's reference, counted as
        a duplicate avoided of the stored size. Raises FileVanished, TenantRefChanged (the reference is gone)."""
        ...

    def register_upload(self, upload: NewUpload, now: datetime) -> None:
        """Record an issued upload as pending (the reconcile sweep finds it if its object never arrives); with a
        tenant, in the same transaction, count it against the tenant's quota (Settings.tenant_quota_bytes,
        tenant_pending_limit). Raises QuotaRefused when it would exceed a limit."""
        ...

    # ------------------------------------------------------------------ multipart (dfd.uploads.multipart)
    def register_multipart_upload(self, upload: NewUpload, multipart: NewMultipart, now: datetime) -> None:
        """Record an issued multipart upload as pending, with its owner, tenant, part size and count."""
        ...

    def attach_s3_upload(self, upload_id: str, s3_upload_id: str, *, part_checksums: bool) -> None:
        """Keep the S3 multipart upload id on a pending upload that has none yet; raises MultipartAttached
        (carrying the record as it is) when it has one or is no longer pending."""
        ...

    def mark_multipart_completed(self, upload_id: str, now: datetime) -> None:
        """Note when CompleteMultipartUpload succeeded (kept from the first success)."""
        ...

    def end_pending_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        """A pending upload ends without an object (`deleted`, `expired`): False when it was not pending. With its
        `tenant` and the `quota_bytes` its record holds, in the same transaction, those bytes are released from the
        tenant's pending usage (conditioned on the record still holding them: False otherwise)."""
        ...

    def adopt_copy(
        self, version: ObjectVersion, lost: FileRecord, now: datetime, *, upload_deleted: bool = False
    ) -> None:
        """The file record's stored object (`lost`: the record as read) is gone: make this duplicate's object
        the stored copy, in one transaction conditioned on the record still naming the lost object — the
        record's key and ETag, the key's claim moved, and the upload (if any) reading `stored` unless it is
        deleted (`upload_deleted`, as read: its bytes still serve the content's other uploads, the upload stays
        deleted). Raises FileChanged (the record moved on: item is the record now), UploadTaken (the upload was
        deleted meanwhile: item is the upload now) or CommitRefused."""
        ...

    # ------------------------------------------------------------------ deletes (dfd.deletes.service)
    def cancel_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        """An upload that holds no reference (pending, expired, failed) becomes `deleted` with `deleted_at`,
        conditioned on its status still being `status`; False when it is not. A pending one releases its
        `quota_bytes` as end_pending_upload does."""
        ...

    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """In one transaction, without reading the content or the reference: the upload `deleted` (status still as
        read), -1 on its tenant's reference (conditioned on a count above 0; marked for the reaper, which deletes
        it at 0), -1 live reference on the content (conditioned on a count above 0; marked for the reaper:
        `reap_after` = now + the grace period, so the grace runs from the last delete; at 0 the content is
        tombstoned), +1 `deleted_uploads`. Raises DeleteRaced (the status moved on) or ReferenceMissing."""
        ...

    # ------------------------------------------------------------------ the reconcile (dfd.reconcile.service)
    def due_uploads(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[UploadRecord], Cursor | None]:
        """One page of the pending uploads of index shard `shard` whose grace period ended before `now`, and where
        the next page starts (None: the last)."""
        ...

    def count_redrive(self, upload_id: str, now: datetime) -> int | None:
        """+1 re-drive on a pending upload: its count, or None when it is no longer pending."""
        ...

    def give_up_upload(
        self, upload: UploadRecord, status: UploadStatus, now: datetime, *, failure: str | None = None
    ) -> bool:
        """A pending upload (as read) becomes `status` (expired or failed, with `failure`), out of the pending
        index, its quota bytes released; False when it is no longer pending or no longer holds those bytes."""
        ...

    def due_contents(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[FileRecord], Cursor | None]:
        """One page of the contents marked for the reaper (index shard `shard`) whose grace ended before `now`."""
        ...

    def forget_older_generation(self, file: FileRecord) -> bool:
        """A resurrected content's older object is deleted: forget it (`reap_key`/`reap_etag`, as read) and its
        key's claim (unless another content's). False when the record moved on."""
        ...

    def unindex_content(self, file: FileRecord) -> bool:
        """A content counted again (live references, no older object left) leaves the reaper's index; False when
        that no longer holds."""
        ...

    def reap_content(self, file: FileRecord, *, counter_shard: int) -> bool:
        """A tombstoned content whose object is deleted: in one transaction its record (still tombstoned at the
        generation and key read), its key's claim (unless another content's), and on one counter shard the file
        and its bytes out, its history (uploads, duplicates, bytes saved) into the reaped counters. False when
        the record changed (resurrected meanwhile)."""
        ...

    def due_references(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[TenantRef], Cursor | None]:
        """One page of the tenant references a delete marked (index shard `shard`) before `now`."""
        ...

    def reap_reference(self, ref: TenantRef) -> bool:
        """A reference at 0 is deleted and its size released from its tenant's usage, in one transaction; False
        when it is counted again."""
        ...

    def unindex_reference(self, ref: TenantRef) -> bool:
        """A reference counted again leaves the reaper's index; False when it is at 0 again."""
        ...

    def mark_lost(self, file: FileRecord, now: datetime) -> bool:
        """Every copy of a live content is gone: mark it lost (conditioned on its record still naming the object
        read, live); False when it changed."""
        ...

    def take_lease(self, holder: str, now: datetime, until: datetime) -> Lease:
        """Take the reconcile's lease for `holder` until `until` when it is free or expired at `now`: the lease as
        it is afterwards (held by another: not taken)."""
        ...

    def renew_lease(self, holder: str, until: datetime) -> None:
        """Extend `holder`'s lease; raises LeaseLost when it holds it no more."""
        ...

    def note_sweep_due(self, now: datetime) -> None:
        """A sweep was asked for and skipped (the lease was held): the next run sweeps."""
        ...

    def release_lease(self, holder: str, *, swept_at: datetime | None = None) -> None:
        """Free `holder`'s lease (nothing when it holds it no more); `swept_at`: the run completed a sweep started
        then."""
        ...
