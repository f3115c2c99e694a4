"""The stored records, typed: what the repository (the ports of each feature) reads and what its conflicts carry.

Each is parsed from its item and written to it in one place, its feature's codec (dfd.*.codec, dfd.core.codec);
everything else — the domain modules, the views, the handlers — sees these records and enums only. A field the
item does not hold is None (or its zero, for counts). docs/design.md, "Storage", lists the items and invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum


class UploadStatus(StrEnum):
    PENDING = "pending"  # issued, its object not ingested yet (a multipart one may be completed already)
    STORED = "stored"  # processed: new content for its tenant
    DUPLICATE = "duplicate"  # processed: content its tenant held already
    FAILED = "failed"  # its object arrived, its ingest never completed (the reconcile gave up re-driving it)
    EXPIRED = "expired"  # its URL expired without an object
    DELETED = "deleted"  # deleted by its owner or an admin (terminal)
    # an object put under s3/ that was refused (its bytes deleted, nothing counted): `failure` says why —
    # quota_exceeded or too_large (dfd.ingest.dropzone)
    REJECTED = "rejected"

    @property
    def processed(self) -> bool:
        """A processed upload is one reference to its content, until it is deleted."""
        return self in (UploadStatus.STORED, UploadStatus.DUPLICATE)

    @property
    def unreferenced(self) -> bool:
        """An upload holding no reference: deleting it cancels it."""
        return self in (UploadStatus.PENDING, UploadStatus.EXPIRED, UploadStatus.FAILED, UploadStatus.REJECTED)


class UploadVia(StrEnum):
    """How an upload's object came in (the upload record's `via`, shown by the API and carried by its events)."""

    PRESIGNED = "presigned"  # POST /upload: one presigned PUT
    MULTIPART = "multipart"  # POST /upload with multipart: presigned parts (dfd.uploads.multipart)
    LFS = "lfs"  # a Git LFS batch upload action: one presigned PUT (dfd.lfs.batch)
    S3 = "s3"  # an S3 tool writing under the caller's prefix with POST /me/s3-credentials' keys (the drop zone)
    BUCKET = "bucket"  # an object put straight into the bucket at an upload key, with no registration (no owner)
    PRECHECK = "precheck"  # no object: POST /upload's sha256 named content its tenant held (the 409 duplicate)


class ContentState(StrEnum):
    """A content's state, derived in one place (FileRecord.state): only `lost` is written (by the reconcile
    sweep); TOMBSTONED is a live reference count of 0 — its bytes await the reaper, an upload of the content
    resurrects it. New references are only ever added to live content (docs/design.md, "Deletes")."""

    LIVE = "live"
    TOMBSTONED = "tombstoned"
    LOST = "lost"  # every copy of the content is gone: the reconcile sweep marked it


@dataclass(frozen=True, slots=True)
class FileRecord:
    """FileMetadata: one per content, global (its physical facts and its global counts)."""

    hash: str
    size: int = 0
    s3_key: str | None = None
    bucket: str | None = None
    etag: str | None = None
    content_type: str | None = None
    filename: str | None = None
    created_at: str | None = None
    last_upload_at: str | None = None
    upload_count: int = 0
    first_upload_id: str | None = None
    live_refs: int = 0  # processed, undeleted uploads (and direct puts) of the content
    generation: int = 0  # +1 at each resurrection
    stores: int = 1  # generations stored: its duplicates are upload_count - stores
    lost: bool = False  # the reconcile sweep marked every copy gone
    lost_at: str | None = None
    reap_key: str | None = None  # a tombstoned generation's object, awaiting the reaper
    reap_etag: str | None = None
    reap_after: str | None = None  # in the reaper's index (set by a delete) from then on
    tombstone_shard: str | None = None  # the reaper's index key: None when not in it
    # the nonce of the commit that created this record, written once with it: a record reaped and created again
    # is another incarnation (its events' ids differ: dfd.events.outcomes). None: the item holds none
    incarnation: str | None = None

    @property
    def duplicates(self) -> int:
        """Uploads of the content that stored no bytes (each generation's first upload stored them)."""
        return self.upload_count - self.stores

    @property
    def saved_bytes(self) -> int:
        """The bytes its duplicates saved: what the counters' `total_s3_size_saved` holds for it."""
        return self.duplicates * self.size

    @property
    def tombstoned(self) -> bool:
        """Every reference to the content was deleted: the reaper's, or an upload's to resurrect."""
        return self.live_refs <= 0

    @property
    def state(self) -> ContentState:
        if self.tombstoned:
            return ContentState.TOMBSTONED
        return ContentState.LOST if self.lost else ContentState.LIVE

    @property
    def live(self) -> bool:
        return self.state == ContentState.LIVE


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """Uploads: one per upload id (issued by POST /upload, or an object put straight at an upload key)."""

    upload_id: str
    status: UploadStatus
    filename: str | None = None
    size: int | None = None
    content_type: str | None = None
    sha256: str | None = None  # the client's claim, when it gave one
    s3_key: str | None = None
    bucket: str | None = None
    created_at: str | None = None
    expires_at: str | None = None
    processed_at: str | None = None
    hash: str | None = None  # processed: the content it is a reference to
    # processed: what its object was for the content, globally — STORED (its bytes became the content's copy) or
    # DUPLICATE (the content was stored already); `status` is its tenant's view (new to the tenant: STORED)
    outcome: UploadStatus | None = None
    event_key: str | None = None  # the object version that processed it
    owner: str | None = None  # None: an object put straight into the bucket (admins only)
    tenant: str | None = None
    quota_bytes: int = 0  # bytes held against its tenant's quota while pending
    # while pending, not among its tenant's pending uploads (a drop-zone object: its bytes are there already, only
    # they count against the quota); what releases its quota_bytes releases no pending upload either
    pending_uncounted: bool = False
    failed_at: str | None = None
    expired_at: str | None = None  # the reconcile marked it expired
    failure: str | None = None
    redrives: int = 0  # times the reconcile re-drove its object's notification
    deleted_at: str | None = None
    multipart: bool = False
    part_size: int = 0
    part_count: int = 0
    s3_upload_id: str | None = None  # never shown to clients
    part_checksums: bool = False  # its S3 multipart upload was created with SHA-256 part checksums
    completed_at: str | None = None  # CompleteMultipartUpload succeeded
    # how its object came in; None: registered (POST /upload, /lfs, the drop zone) before dfd kept it, the item does
    # not say which (dfd.uploads.codec.upload_record)
    via: UploadVia | None = None
    # written once with the record where its id can name another record later (a drop-zone object's id derives
    # from its version; an object put at an upload key with no registration): that record is another incarnation
    # (its events' ids differ: dfd.events.outcomes). None: a random id's record, or an item that holds none
    incarnation: str | None = None


@dataclass(frozen=True, slots=True)
class TenantRef:
    """TenantFiles: a tenant's reference to a content (its own filename, dates and upload count)."""

    tenant: str
    hash: str
    upload_count: int = 0
    size: int | None = None
    filename: str | None = None
    content_type: str | None = None
    created_at: str | None = None
    last_upload_at: str | None = None
    first_upload_id: str | None = None
    reap_after: str | None = None  # in the reaper's index (set by a delete) from then on
    reap_shard: str | None = None  # the reaper's index key: None when not in it

    @property
    def holds(self) -> bool:
        """The tenant holds the content: a count above 0 (a reference at 0 awaits the reaper)."""
        return self.upload_count > 0


def holds(ref: TenantRef | None) -> bool:
    """Whether a tenant's reference (None: absent) says it holds the content."""
    return ref is not None and ref.holds


def counts_stored(ref: TenantRef | None) -> bool:
    """Whether a tenant's reference counts in its `stored_bytes`: it exists, at any count (a reference at 0 is
    counted until the reaper deletes it and releases its size: docs/design.md, "Quotas")."""
    return ref is not None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """Events: what the ingest of one object version recorded (its outcome), exactly once."""

    event_key: str
    outcome: str = "unknown"
    hash: str | None = None
    bucket: str | None = None
    key: str | None = None
    etag: str | None = None
    size: int | None = None
    upload_id: str | None = None
    processed_at: str | None = None


@dataclass(frozen=True, slots=True)
class KeyClaim:
    """The claim of an object key that holds a stored copy (beside the event records): the content stored there."""

    hash: str
    claimed_at: str | None = None


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """A tenant's quota usage (docs/design.md, "Quotas"): uploads pending and their declared bytes, the bytes of
    the distinct contents the tenant references (`stored_bytes`: the `size` of each of its reference items that
    exists, at any count — a content counts once however often the tenant uploaded it, and until the reaper
    deletes a reference at 0), and `used_bytes` = pending + stored (what TenantQuotaBytes limits)."""

    pending_count: int = 0
    pending_bytes: int = 0
    stored_bytes: int = 0
    used_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class PrecheckCount:
    """A tenant's precheck duplicates counted in one window (dfd.uploads.ports.PrecheckBound; item
    `precheck#<tenant>`)."""

    precheck_window: int | None = None  # the window counted (epoch seconds // its length); None: none yet
    prechecks: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """The reconcile's lease (dfd.reconcile.service): which run holds it until when, and the sweep's bookkeeping — when
    a sweep was last asked for by a run that found the lease held, and when the last completed sweep started."""

    holder: str | None = None
    expires_at: str | None = None
    sweep_due_at: str | None = None
    swept_at: str | None = None

    @property
    def sweep_due(self) -> bool:
        """A sweep was skipped (its run found the lease held) after the last completed sweep started."""
        return self.sweep_due_at is not None and self.sweep_due_at > (self.swept_at or "")


@dataclass(frozen=True, slots=True)
class CounterShard:
    """One shard of the global counters (docs/design.md, "Counters"): summed by StatsReads.counter_totals
    (dfd.core.reads). The history stores its values in this field order (dfd.history.codec): a new field goes
    last."""

    total_files: int = 0
    total_bytes_stored: int = 0
    total_uploads: int = 0
    duplicates_avoided: int = 0
    total_s3_size_saved: int = 0
    deleted_uploads: int = 0  # processed uploads deleted (their references removed); cancelled pending ones are not
    # the history of reaped contents, moved here by the reaper (the audit's recount adds it)
    reaped_uploads: int = 0
    reaped_duplicates: int = 0
    reaped_saved: int = 0
    reaped_contents: int = 0  # contents the reaper removed (total_files + reaped_contents: contents ever recorded)
    reaped_bytes: int = 0  # their bytes
    # pending uploads the reconcile gave up on: no object came before its URL expired, or it was never ingested
    expired_uploads: int = 0
    failed_uploads: int = 0
    # uploads and object versions refused: by the drop zone, or by the ingest (a second PUT at a processed upload's
    # key, a CRC64NVME mismatch, bytes over the quota)
    rejected_uploads: int = 0


COUNTER_FIELDS = (  # what GET /admin/stats shows
    "total_files",
    "total_bytes_stored",
    "total_uploads",
    "duplicates_avoided",
    "total_s3_size_saved",
    "deleted_uploads",
)
REAPED_FIELDS = ("reaped_uploads", "reaped_duplicates", "reaped_saved")
USAGE_FIELDS = tuple(f.name for f in fields(TenantUsage))
