"""Items <-> records: the one place that parses every kind of item and writes every whole item.

An item here is what DynamoDB holds, as Python values (:func:`from_item` turns its attribute values into these,
:func:`to_item` back). Readers accept any item of their kind the product writes (the reconcile
workflow's included) and ignore attributes the domain does not need (index keys, TTLs). Update expressions
name attributes in the aggregate modules; the whole items they put are built here, and so are the keys and the
update of the counters table's tenant items (precheck counts) and of the tenants' usage shards (in the tenant
view's table), which other adapters write too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from dfd.adapters.dynamo.values import deserialize, serialize
from dfd.core import clock
from dfd.core.records import (
    CounterShard,
    EventRecord,
    FileRecord,
    KeyClaim,
    Lease,
    PrecheckCount,
    TenantRef,
    TenantUsage,
    UploadRecord,
    UploadStatus,
)
from dfd.core.usage import USAGE_SHARDS, UsageShard

if TYPE_CHECKING:
    from dfd.ingest.ports import ObjectVersion
    from dfd.uploads.ports import NewMultipart, NewUpload, PrecheckDuplicate

Item = dict[str, Any]
LOST = "lost"  # FileMetadata `state` of a content every copy of which is gone (the reconcile sweep writes it)
# A usage shard is an item of the tenant view's table: (tenant, "u#NNN"), beside the tenant's references (whose
# sort key is a SHA-256 in hex, which never holds a `#`), so a tenant's shards are one item collection read by one
# Query. Its counts have one-letter attribute names and pending_bytes is not stored (every write keeps used =
# pending + stored on each shard, so it is used - stored): 200 items stay under 16 KB (docs/design/cost.md, "Quota
# and GET /me").
USAGE_PREFIX = "u#"
USAGE_ATTRS = {"pending_count": "c", "stored_bytes": "s", "used_bytes": "u"}
PRECHECK_PREFIX = "precheck#"
LEASE_ID = "lease#reconcile"
# an upload item's claim of its object's key (the content stored there; `claimed_at` beside it): what the claim
# item (Events, claim#<bucket>/<key>) says of a key with no upload id
CLAIM_HASH = "claim_hash"

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


# ---------------------------------------------------------------------------------------------- attribute values
def to_attr(value: Any) -> dict[str, Any]:
    return serialize(value)


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def from_item(raw: Mapping[str, Any]) -> Item:
    return {key: deserialize(attr) for key, attr in raw.items()}


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


def upload_claim(item: Mapping[str, Any] | None) -> KeyClaim | None:
    """The claim of its object's key an upload item carries (`claim_hash`: the content stored at that key), or
    None (docs/design/storage.md)."""
    if not item or item.get(CLAIM_HASH) is None:
        return None
    return KeyClaim(str(item[CLAIM_HASH]), _optional(item.get("claimed_at")))


def upload_event(item: Mapping[str, Any] | None) -> EventRecord | None:
    """The event record an upload item carries: the ingest's commit of the object version that processed it
    (`event_key`, with its `outcome`) writes it there instead of an item of its own (docs/design/storage.md). None:
    no version processed it (pending, cancelled first, or answered by the precheck)."""
    if not item or item.get("event_key") is None or item.get("outcome") is None:
        return None
    return EventRecord(
        event_key=str(item["event_key"]),
        outcome=str(item["outcome"]),
        hash=_optional(item.get("hash")),
        bucket=_optional(item.get("bucket")),
        key=_optional(item.get("s3_key")),
        etag=_optional(item.get("etag")),
        size=int(item["size"]) if item.get("size") is not None else None,
        upload_id=_optional(item.get("upload_id")),
        processed_at=_optional(item.get("processed_at")),
    )


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def tenant_usage(item: Mapping[str, Any] | None) -> TenantUsage:
    """The counts of a usage shard's item (zeros: no item)."""
    found = item or {}
    counts = {name: int(found.get(attr, 0)) for name, attr in USAGE_ATTRS.items()}
    return TenantUsage(**counts, pending_bytes=counts["used_bytes"] - counts["stored_bytes"])


def usage_shard(item: Mapping[str, Any]) -> UsageShard | None:
    """The usage shard an item of the tenant view's table is (None: a tenant's reference)."""
    tenant, sort = str(item.get("tenant", "")), str(item.get("hash", ""))
    index = sort.removeprefix(USAGE_PREFIX)
    if not tenant or not sort.startswith(USAGE_PREFIX) or not (index.isdigit() and int(index) < USAGE_SHARDS):
        return None
    shard = UsageShard(tenant, int(index))
    return shard if usage_key(shard) == {"tenant": tenant, "hash": sort} else None


def is_usage(item: Mapping[str, Any]) -> bool:
    """An item of the tenant view's table that is a usage shard, not a reference."""
    return str(item.get("hash", "")).startswith(USAGE_PREFIX)


def precheck_count(item: Mapping[str, Any]) -> PrecheckCount:
    return _parse(PrecheckCount, item)


def counter_shard(item: Mapping[str, Any]) -> CounterShard:
    return _parse(CounterShard, item)


def lease(item: Mapping[str, Any] | None) -> Lease:
    return _parse(Lease, item or {})


# ---------------------------------------------------------------------------------------------- keys
def file_key(digest: str) -> Item:
    return {"hash": digest}


def upload_key(upload_id: str) -> Item:
    return {"upload_id": upload_id}


def event_key(key: str) -> Item:
    return {"event_key": key}


def tenant_ref_key(tenant: str, digest: str) -> Item:
    return {"tenant": tenant, "hash": digest}


def usage_key(shard: UsageShard) -> Item:
    """A usage shard's key in the tenant view's table: the tenant's item collection, sort key u#NNN."""
    return {"tenant": shard.tenant, "hash": f"{USAGE_PREFIX}{shard.index:03d}"}


def lease_key() -> Item:
    """The reconcile's lease: one item in the counters table (stats read the shard keys only)."""
    return {"counter_id": LEASE_ID}


def precheck_key(tenant: str) -> Item:
    return {"counter_id": f"{PRECHECK_PREFIX}{tenant}"}


# ---------------------------------------------------------------------------------------------- updates
def precheck_update(tenant: str, expression: str, condition: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The Update (less its table) of the tenant's precheck count: `expression` and `condition` name its window
    `#w` and its count `#n`; `values`: theirs, as Python values."""
    return {
        "Key": to_item(precheck_key(tenant)),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#w": "precheck_window", "#n": "prechecks"},
        "ExpressionAttributeValues": {name: to_attr(value) for name, value in values.items()},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


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
    }


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
    """New content: this object is its stored copy, one live reference, generation 1 (one store)."""
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
    """The key's claim (a key with no upload id: an upload item carries its own, :func:`upload_claim`): no TTL, it
    lives as long as the record whose stored copy is there."""
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


def processed_upload(
    version: ObjectVersion, status: UploadStatus, outcome: UploadStatus, stamp: str, commit: str
) -> Item:
    """What an ingest's commit sets on the upload it processes: its status (the tenant's view) and the ingest's
    outcome (STORED: this object became the content's copy; DUPLICATE: the content was stored already) — and the
    event record of the object version (`event_key`, its `etag`; :func:`upload_event` reads it back), with the
    nonce of the commit's one request (`commit`: a retry of that request finds its own write, a concurrent
    delivery of the same version another's)."""
    return {
        "status": status.value,
        "outcome": outcome.value,
        "hash": version.hash,
        "size": version.size,
        "processed_at": stamp,
        "s3_key": version.key,
        "bucket": version.bucket,
        "event_key": version.event_key,
        "etag": version.etag,
        "commit": commit,
    }


def ingested_upload_item(
    version: ObjectVersion, outcome: UploadStatus, stamp: str, filename: str, content_type: str
) -> Item:
    """An upload item as an ingest's commit leaves an object put at an upload key with no record of its own,
    its key claimed when the object became the content's copy (the bench's seeding writes it whole)."""
    assert version.upload_id is not None
    claim = {CLAIM_HASH: version.hash, "claimed_at": stamp} if outcome == UploadStatus.STORED else {}
    return (
        upload_key(version.upload_id)
        | {"filename": filename, "content_type": content_type, "created_at": stamp}
        | processed_upload(version, outcome, outcome, stamp, "seeded")
        | claim
    )
