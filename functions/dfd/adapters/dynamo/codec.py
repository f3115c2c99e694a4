"""Items <-> records: the one place that parses every kind of item and writes every whole item.

An item here is what DynamoDB holds, as Python values (dfd.adapters.dynamo.base.from_item turns its attribute
values into these, to_item back). Readers accept any item of their kind the product writes (the reconcile
workflow's included) and ignore attributes the domain does not need (index keys, TTLs). Update expressions
name attributes in the aggregate modules; the whole items they put are built here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, TypeVar

from dfd import clock
from dfd.ports import NewMultipart, NewUpload, ObjectVersion, PrecheckDuplicate
from dfd.records import (
    CounterShard,
    EventRecord,
    FileRecord,
    KeyClaim,
    PrecheckCount,
    TenantRef,
    TenantUsage,
    UploadRecord,
    UploadStatus,
)

Item = dict[str, Any]
LOST = "lost"  # FileMetadata `state` of a content every copy of which is gone (the reconcile sweep writes it)


R = TypeVar("R")
# how an attribute's value becomes a record field's, by the field's annotation
_COERCE: dict[str, Callable[[Any], Any]] = {
    "str": str,
    "str | None": str,
    "int": int,
    "int | None": int,
    "bool": bool,
    "UploadStatus": UploadStatus,
    "UploadStatus | None": UploadStatus,
}


def _parse(kind: type[R], item: Mapping[str, Any], **derived: Any) -> R:
    """The record of an item: each field from the attribute of its name (absent: the field's default), except
    `derived` ones."""
    values = dict(derived)
    for spec in fields(kind):  # type: ignore[arg-type]
        raw = item.get(spec.name)
        if spec.name not in derived and raw is not None:
            values[spec.name] = _COERCE[str(spec.type)](raw)
    return kind(**values)


# ---------------------------------------------------------------------------------------------- readers
def file_record(item: Mapping[str, Any]) -> FileRecord:
    return _parse(FileRecord, item, lost=item.get("state") == LOST)


def upload_record(item: Mapping[str, Any]) -> UploadRecord:
    return _parse(UploadRecord, item)


def tenant_ref(item: Mapping[str, Any]) -> TenantRef:
    return _parse(TenantRef, item)


def event_record(item: Mapping[str, Any]) -> EventRecord:
    return _parse(EventRecord, item)


def key_claim(item: Mapping[str, Any]) -> KeyClaim:
    return _parse(KeyClaim, item)


def tenant_usage(item: Mapping[str, Any] | None) -> TenantUsage:
    return _parse(TenantUsage, item or {})


def precheck_count(item: Mapping[str, Any]) -> PrecheckCount:
    return _parse(PrecheckCount, item)


def counter_shard(item: Mapping[str, Any]) -> CounterShard:
    return _parse(CounterShard, item)


# ---------------------------------------------------------------------------------------------- keys
def file_key(digest: str) -> Item:
    return {"hash": digest}


def upload_key(upload_id: str) -> Item:
    return {"upload_id": upload_id}


def event_key(key: str) -> Item:
    return {"event_key": key}


def tenant_ref_key(tenant: str, digest: str) -> Item:
    return {"tenant": tenant, "hash": digest}


# ---------------------------------------------------------------------------------------------- whole items
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
    }
    if multipart is not None:  # its `s3_upload_id` and `part_checksums` come with the first parts call
        item |= {
            "multipart": True,
            "owner": multipart.owner,
            "tenant": multipart.tenant,
            "part_size": multipart.part_size,
            "part_count": multipart.part_count,
        }
    return item


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
    }


def new_file_item(version: ObjectVersion, filename: str, content_type: str, stamp: str) -> Item:
    """New content: this object is its stored copy, one live reference, generation 1 (one store), nothing saved yet
    (saved_bytes = (upload_count - stores) x size, kept as duplicates are counted: the reaper's history)."""
    return {
        "hash": version.hash,
        "size": version.size,
        "content_type": content_type,
        "filename": filename,
        "s3_key": version.key,
        "bucket": version.bucket,
        "etag": version.etag,
        "created_at": stamp,
        "last_upload_at": stamp,
        "upload_count": 1,
        "first_upload_id": version.upload_id,
        "live_refs": 1,
        "generation": 1,
        "stores": 1,
        "saved_bytes": 0,
    }


def event_item(version: ObjectVersion, outcome: str, now: datetime, ttl: int) -> Item:
    return {
        "event_key": version.event_key,
        "outcome": str(outcome),
        "hash": version.hash,
        "bucket": version.bucket,
        "key": version.key,
        "etag": version.etag,
        "size": version.size,
        "upload_id": version.upload_id,
        "processed_at": clock.iso(now),
        "ttl": ttl,
    }


def claim_item(claim: str, digest: str, stamp: str) -> Item:
    """The key's claim: no TTL, it lives as long as the record whose stored copy is there."""
    return {"event_key": claim, "hash": digest, "claimed_at": stamp}


def first_reference(version: ObjectVersion, filename: str, content_type: str, stamp: str) -> Item:
    """What a tenant's new reference to a content takes from the upload that creates it."""
    return {
        "filename": filename,
        "content_type": content_type,
        "size": version.size,
        "created_at": stamp,
        "first_upload_id": version.upload_id,
    }


def processed_upload(version: ObjectVersion, status: UploadStatus, outcome: UploadStatus, stamp: str) -> Item:
    """What an ingest's commit sets on the upload it processes: its status (the tenant's view) and the ingest's
    outcome (STORED: this object became the content's copy; DUPLICATE: the content was stored already)."""
    return {
        "status": status.value,
        "outcome": outcome.value,
        "hash": version.hash,
        "size": version.size,
        "processed_at": stamp,
        "s3_key": version.key,
        "bucket": version.bucket,
    }
