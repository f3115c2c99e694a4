"""The items an ingest's commit writes <-> their records: the content records (FileMetadata), the tenants'
references (TenantFiles), the event records and key claims (IngestEvents), and what the commit sets on the upload
item it processes (its event record and key claim ride on it: docs/design/storage.md). dfd.core.codec: what an
item is."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.codec import Item, optional, parse
from dfd.core.records import EventRecord, FileRecord, KeyClaim, TenantRef, UploadStatus, UploadVia
from dfd.uploads.codec import upload_key

if TYPE_CHECKING:
    from dfd.ingest.ports import CopyProgress, HashingShown, HashProgress, ObjectVersion

LOST = "lost"  # FileMetadata `state` of a content every copy of which is gone (the reconcile sweep writes it)


# an upload item's claim of its object's key (the content stored there; `claimed_at` beside it): what the claim
# item (Events, claim#<bucket>/<key>) says of a key with no upload id
CLAIM_HASH = "claim_hash"


def file_record(item: Mapping[str, Any]) -> FileRecord:
    return parse(FileRecord, item, lost=item.get("state") == LOST)


def tenant_ref(item: Mapping[str, Any]) -> TenantRef:
    return parse(TenantRef, item)


def event_record(item: Mapping[str, Any]) -> EventRecord:
    return parse(EventRecord, item)


def key_claim(item: Mapping[str, Any]) -> KeyClaim:
    return parse(KeyClaim, item)


def upload_claim(item: Mapping[str, Any] | None) -> KeyClaim | None:
    """The claim of its object's key an upload item carries (`claim_hash`: the content stored at that key), or
    None (docs/design/storage.md)."""
    if not item or item.get(CLAIM_HASH) is None:
        return None
    return KeyClaim(str(item[CLAIM_HASH]), optional(item.get("claimed_at")))


def upload_event(item: Mapping[str, Any] | None) -> EventRecord | None:
    """The event record an upload item carries: the ingest's commit of the object version that processed it
    (`event_key`, with its `outcome`) writes it there instead of an item of its own (docs/design/storage.md). None:
    no version processed it (pending, cancelled first, or answered by the precheck)."""
    if not item or item.get("event_key") is None or item.get("outcome") is None:
        return None
    return EventRecord(
        event_key=str(item["event_key"]),
        outcome=str(item["outcome"]),
        hash=optional(item.get("hash")),
        bucket=optional(item.get("bucket")),
        key=optional(item.get("s3_key")),
        etag=optional(item.get("etag")),
        size=int(item["size"]) if item.get("size") is not None else None,
        upload_id=optional(item.get("upload_id")),
        processed_at=optional(item.get("processed_at")),
    )


def file_key(digest: str) -> Item:
    return {"hash": digest}


def event_key(key: str) -> Item:
    return {"event_key": key}


def tenant_ref_key(tenant: str, digest: str) -> Item:
    return {"tenant": tenant, "hash": digest}


def new_file_item(version: ObjectVersion, filename: str, content_type: str, stamp: str, *, incarnation: str) -> Item:
    """New content: this object is its stored copy, one live reference, generation 1 (one store); `incarnation`:
    the nonce of the commit creating it (FileRecord.incarnation)."""
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
        "incarnation": incarnation,
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


def upload_defaults(filename: str, content_type: str, stamp: str, *, registered: bool, commit: str) -> Item:
    """What an ingest's commit sets on the upload it processes only where the item holds none: its filename, content
    type and creation time — and, for an object put straight at an upload key with no registration (not
    `registered`: the commit creates its item), how it came in (`via`; a registration wrote its own) and its
    incarnation (the commit's nonce: UploadRecord.incarnation)."""
    defaults: Item = {"filename": filename, "content_type": content_type, "created_at": stamp}
    return defaults if registered else defaults | {"via": UploadVia.BUCKET.value, "incarnation": commit}


def ingested_upload_item(
    version: ObjectVersion, outcome: UploadStatus, stamp: str, filename: str, content_type: str
) -> Item:
    """An upload item as an ingest's commit leaves an object put at an upload key with no record of its own,
    its key claimed when the object became the content's copy (the bench's seeding writes it whole)."""
    assert version.upload_id is not None
    claim = {CLAIM_HASH: version.hash, "claimed_at": stamp} if outcome == UploadStatus.STORED else {}
    return (
        upload_key(version.upload_id)
        | upload_defaults(filename, content_type, stamp, registered=False, commit="seeded")
        | processed_upload(version, outcome, outcome, stamp, "seeded")
        | claim
    )


# A version's hashing state (dfd.ingest.segments) is an Events item of its own, beside the version's event record:
# event_key `hashing#<event key>` (an event key starts with a bucket name, which never holds a `#`).
HASHING_PREFIX = "hashing#"


def hashing_key(event_key: str) -> Item:
    return {"event_key": HASHING_PREFIX + event_key}


# beside it, what GET /metadata reads by object key: the progress of the version last hashed there, written after each
# state (display only: nothing decides on it), event_key `hashing-key#<bucket>/<key>`
PROGRESS_PREFIX = "hashing-key#"


def progress_key(bucket: str, key: str) -> Item:
    return {"event_key": f"{PROGRESS_PREFIX}{bucket}/{key}"}


def progress_item(progress: HashProgress, stamp: str, ttl: int) -> Item:
    return {
        **progress_key(progress.bucket, progress.key),
        "of": progress.event_key,
        "hashed": progress.hashed,
        "size": progress.size,
        "updated_at": stamp,
        "ttl": ttl,
    }


def hashing_shown(item: Mapping[str, Any]) -> HashingShown:
    from dfd.ingest.ports import HashingShown

    return HashingShown(str(item["of"]), int(item["hashed"]), int(item["size"]), optional(item.get("updated_at")))


def hashing_item(progress: HashProgress, stamp: str, ttl: int) -> Item:
    """The state item: the SHA-256 words as 64 hex digits (`words`) and the bytes they cover (`hashed`); S3's
    CRC64NVME (`s3_crc64nvme`) and the one of the bytes hashed (`crc64nvme`), 16 hex digits each, when it has one."""
    item: Item = {
        **hashing_key(progress.event_key),
        "bucket": progress.bucket,
        "key": progress.key,
        "etag": progress.etag,
        "size": progress.size,
        "words": progress.state.to_hex(),
        "hashed": progress.state.length,
        "segments": progress.segments,
        "run": progress.run,
        "updated_at": stamp,
        "ttl": ttl,
    }
    for name in ("version_id", "digest", "content_type", "tenant_hint"):
        if (value := getattr(progress, name)) is not None:
            item[name] = value
    if progress.stored_crc64nvme is not None:
        item["s3_crc64nvme"] = f"{progress.stored_crc64nvme:016x}"
        item["crc64nvme"] = f"{progress.crc64nvme or 0:016x}"
    return item


def _crc64(item: Mapping[str, Any], name: str) -> int | None:
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 16 or value.strip("0123456789abcdef"):
        raise ValueError(f"{name} is not 16 hex digits")
    return int(value, 16)


def hash_progress(item: Mapping[str, Any]) -> HashProgress:
    from dfd.ingest.ports import HashProgress
    from dfd.ingest.sha256state import Sha256State

    return HashProgress(
        event_key=str(item["event_key"]).removeprefix(HASHING_PREFIX),
        bucket=str(item["bucket"]),
        key=str(item["key"]),
        etag=str(item["etag"]),
        version_id=optional(item.get("version_id")),
        size=int(item["size"]),
        state=Sha256State.from_hex(str(item["words"]), int(item["hashed"])),
        segments=int(item.get("segments", 0)),
        digest=optional(item.get("digest")),
        updated_at=optional(item.get("updated_at")),
        content_type=optional(item.get("content_type")),
        tenant_hint=optional(item.get("tenant_hint")),
        run=int(item.get("run", 0)),
        stored_crc64nvme=_crc64(item, "s3_crc64nvme"),
        crc64nvme=_crc64(item, "crc64nvme"),
    )


# A drop-zone object's copy across invocations (dfd.ingest.dropcopy) is an Events item of its own, beside the
# object's hashing and event items: event_key `copy#<event key of the s3/ object version>`. Its multipart UploadId
# stays here, server-side: the workflow's input names the version only.
COPY_PREFIX = "copy#"
# what dfd.adapters.dynamo.copies writes on each update (the rest of the item is written once, by its start)
COPY_CHANGES = ("upload_id", "copied", "steps", "uploads", "ended")


def copy_key(event_key: str) -> Item:
    return {"event_key": COPY_PREFIX + event_key}


def copy_item(progress: CopyProgress, stamp: str, ttl: int) -> Item:
    item: Item = {
        **copy_key(progress.event_key),
        "bucket": progress.bucket,
        "key": progress.key,
        "etag": progress.etag,
        "size": progress.size,
        "target": progress.target,
        "content_type": progress.content_type,
        "tenant": progress.tenant,
        "part_bytes": progress.part_bytes,
        "copied": progress.copied,
        "steps": progress.steps,
        "uploads": progress.uploads,
        "run": progress.run,
        "updated_at": stamp,
        "ttl": ttl,
    }
    for name in ("upload_id", "ended"):
        if (value := getattr(progress, name)) is not None:
            item[name] = value
    return item


def copy_progress(item: Mapping[str, Any]) -> CopyProgress:
    from dfd.ingest.ports import CopyProgress

    return CopyProgress(
        event_key=str(item["event_key"]).removeprefix(COPY_PREFIX),
        bucket=str(item["bucket"]),
        key=str(item["key"]),
        etag=str(item["etag"]),
        size=int(item["size"]),
        target=str(item["target"]),
        content_type=str(item["content_type"]),
        tenant=str(item["tenant"]),
        part_bytes=int(item["part_bytes"]),
        upload_id=optional(item.get("upload_id")),
        copied=int(item.get("copied", 0)),
        steps=int(item.get("steps", 0)),
        uploads=int(item.get("uploads", 0)),
        ended=optional(item.get("ended")),
        run=int(item.get("run", 0)),
        updated_at=optional(item.get("updated_at")),
    )
