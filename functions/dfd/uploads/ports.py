"""What the upload, multipart and delete services write through the repository (the uploads and deletes
aggregates: dfd.adapters.dynamo.uploads, .contents' precheck, .deletes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dfd.core.records import UploadStatus


@dataclass(frozen=True)
class NewUpload:
    """An upload just issued (a presigned PUT to `key`), pending until its object is ingested."""

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


@dataclass(frozen=True)
class UploadDeletion:
    """Deleting a processed upload, as read from its record alone: its status (the delete is conditioned on it),
    its content and its tenant (None: the upload has no tenant). Nothing else is read: the counts are decremented
    in the transaction, conditioned on being above 0."""

    upload_id: str
    status: UploadStatus
    hash: str
    tenant: str | None
