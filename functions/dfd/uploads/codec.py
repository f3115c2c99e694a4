"""The upload items (Uploads table) and the tenants' precheck counts (counters table) <-> their records: keys,
readers and the whole items registration and the precheck put (dfd.core.codec: what an item is)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.codec import Item, parse
from dfd.core.records import PrecheckCount, UploadRecord, UploadStatus, UploadVia

if TYPE_CHECKING:
    from dfd.uploads.ports import NewMultipart, NewUpload, PrecheckDuplicate

PRECHECK_PREFIX = "precheck#"


def upload_record(item: Mapping[str, Any]) -> UploadRecord:
    """The upload an item is. `via` (how its object came in) is written by every path that creates the item; an item
    written before dfd kept it takes what its other attributes prove (:func:`derived_via`)."""
    if item.get("via") is not None:
        return parse(UploadRecord, item)
    return parse(UploadRecord, item, via=derived_via(item))


def derived_via(item: Mapping[str, Any]) -> UploadVia | None:
    """How the object of an item without `via` came in, where its attributes prove it: no owner — an object put
    straight into the bucket (its item is the ingest commit's: every registration names an owner); `multipart` —
    POST /upload's multipart; no object key — the precheck's duplicate. Else None: a presigned PUT of POST /upload
    or of /lfs, or a drop-zone object, registered before `via` was written (their items hold the same attributes)."""
    if item.get("owner") is None:
        return UploadVia.BUCKET
    if item.get("multipart"):
        return UploadVia.MULTIPART
    if item.get("s3_key") is None:
        return UploadVia.PRECHECK
    return None


def upload_key(upload_id: str) -> Item:
    return {"upload_id": upload_id}


def precheck_key(tenant: str) -> Item:
    return {"counter_id": f"{PRECHECK_PREFIX}{tenant}"}


def precheck_count(item: Mapping[str, Any]) -> PrecheckCount:
    return parse(PrecheckCount, item)


def pending_upload_item(
    upload: NewUpload,
    now: datetime,
    *,
    reconcile_after: datetime,
    pending_shard: str,
    ttl: int,
    multipart: NewMultipart | None = None,
) -> Item:
    """A registered upload, pending: in the pending index (`pending_shard`, found by the reconcile sweep after
    `reconcile_after`), holding its declared size against its tenant's quota (`quota_bytes`)."""
    item: Item = {
        "upload_id": upload.upload_id,
        "status": UploadStatus.PENDING.value,
        "filename": upload.filename,
        "size": upload.size,
        "content_type": upload.content_type,
        "sha256": upload.sha256,
        "s3_key": upload.key,
        "bucket": upload.bucket,
        "created_at": clock.iso(now),
        "expires_at": clock.iso(upload.expires_at),
        "reconcile_after": clock.iso(reconcile_after),
        "pending_shard": pending_shard,
        "ttl": ttl,
        "owner": upload.owner,
        "tenant": upload.tenant,
        "quota_bytes": upload.size,
        "via": upload.via.value,
    } | _incarnation(upload)
    if multipart is not None:  # its `s3_upload_id` and `part_checksums` come with the first parts call
        item |= {
            "multipart": True,
            "owner": multipart.owner,
            "tenant": multipart.tenant,
            "part_size": multipart.part_size,
            "part_count": multipart.part_count,
        }
    return item


def rejected_upload_item(upload: NewUpload, reason: str, now: datetime, *, ttl: int) -> Item:
    """An object put under s3/ that its tenant's quota or MaxUploadBytes refused (dfd.ingest.dropzone): ended at
    once, `rejected` with the reason in `failure`; it holds no quota and no reference, nor is it in the pending index
    (the record expires with the TTL of any unprocessed upload)."""
    return {
        "upload_id": upload.upload_id,
        "status": UploadStatus.REJECTED.value,
        "filename": upload.filename,
        "size": upload.size,
        "content_type": upload.content_type,
        "s3_key": upload.key,
        "bucket": upload.bucket,
        "created_at": clock.iso(now),
        "failed_at": clock.iso(now),
        "failure": reason,
        "ttl": ttl,
        "owner": upload.owner,
        "tenant": upload.tenant,
        "via": upload.via.value,
    } | _incarnation(upload)


def _incarnation(upload: NewUpload) -> Item:
    return {} if upload.incarnation is None else {"incarnation": upload.incarnation}


def precheck_upload_item(upload: PrecheckDuplicate, stamp: str) -> Item:
    """The caller's upload answered by the precheck: processed at once, a duplicate."""
    return {
        "upload_id": upload.upload_id,
        "status": UploadStatus.DUPLICATE.value,
        "outcome": UploadStatus.DUPLICATE.value,
        "owner": upload.owner,
        "tenant": upload.tenant,
        "hash": upload.hash,
        "filename": upload.filename,
        "size": upload.size,
        "content_type": upload.content_type,
        "created_at": stamp,
        "processed_at": stamp,
        "via": UploadVia.PRECHECK.value,
    }
