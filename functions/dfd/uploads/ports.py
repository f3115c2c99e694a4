"""The uploads aggregate's port: what the upload and multipart services read and write through the repository
(dfd.adapters.dynamo.uploads, .contents' precheck), and the payloads of those writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dfd.core.reads import TenantFileReads, UploadReads
from dfd.core.records import UploadVia

if TYPE_CHECKING:
    from dfd.core.records import UploadStatus


@dataclass(frozen=True)
class NewUpload:
    """An upload just issued (a presigned PUT to `key`, or the parts of one), pending until its object is ingested;
    or a drop-zone object registered (dfd.ingest.dropzone)."""

    upload_id: str
    filename: str
    size: int
    content_type: str
    sha256: str | None
    key: str
    bucket: str
    expires_at: datetime
    owner: str  # the caller's sub (dfd.identity.caller.Caller.owner)
    tenant: str  # the caller's tenant (dfd.identity.caller.Caller.tenant)
    via: UploadVia = UploadVia.PRESIGNED  # how its object comes in (dfd.core.records.UploadVia)
    # written with the record when its id is not random (UploadRecord.incarnation): a drop-zone object's
    incarnation: str | None = None


@dataclass(frozen=True)
class PrecheckDuplicate:
    """POST /upload with the sha256 of content the caller's tenant holds: the caller's own upload record,
    processed at once as a duplicate (no bytes to upload)."""

    upload_id: str
    owner: str
    tenant: str
    hash: str
    filename: str
    size: int  # the STORED size (never the client's claim)
    content_type: str
    bound: PrecheckBound | None = None  # counted against the tenant's precheck bound, in the same transaction


@dataclass(frozen=True, slots=True)
class PrecheckBound:
    """At most `limit` precheck duplicates per tenant per window (docs/design.md, "Prechecks bounded"), counted
    on the tenant's precheck item: `window` is the window's number (epoch seconds // its length); `fresh`: the
    item counts an earlier window (or none), so this one starts the count at 1."""

    window: int
    limit: int
    fresh: bool = False


# ---------------------------------------------------------------------------------------------- multipart
@dataclass(frozen=True)
class NewMultipart:
    """What a multipart upload adds to its upload record: whose it is and how it is cut into parts."""

    owner: str
    tenant: str
    part_size: int
    part_count: int


# ---------------------------------------------------------------------------------------------- the ports
class UploadCancels(Protocol):
    """A pending or failed upload ends without an object."""

    def cancel_upload(
        self,
        upload_id: str,
        status: UploadStatus,
        now: datetime,
        *,
        tenant: str | None = None,
        quota_bytes: int = 0,
        counted: bool = True,
    ) -> bool:
        """An upload that holds no reference (pending, expired, failed) becomes `deleted` with `deleted_at`,
        conditioned on its status still being `status`; False when it is not. A pending one releases its
        `quota_bytes` as end_pending_upload does, and one of its tenant's pending uploads when it was `counted`
        among them (its record is not `pending_uncounted`)."""
        ...


class MultipartStore(UploadReads, Protocol):
    """What dfd.uploads.multipart reads and writes."""

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


class UploadStore(MultipartStore, TenantFileReads, Protocol):
    """What dfd.uploads.service reads and writes (its multipart service's slice included)."""

    def register_upload(self, upload: NewUpload, now: datetime) -> None:
        """Record an issued upload as pending (the reconcile sweep finds it if its object never arrives); with a
        tenant, in the same transaction, count it against the tenant's quota (Settings.tenant_quota_bytes,
        tenant_pending_limit). Raises QuotaRefused when it would exceed a limit."""
        ...

    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        """Content the caller's tenant holds, announced by POST /upload, in one transaction: the caller's upload
        record (processed: `duplicate`), +1 upload on the file record and on the tenant's reference, counted as
        a duplicate avoided of the stored size. Raises FileVanished, TenantRefChanged (the reference is gone)."""
        ...
