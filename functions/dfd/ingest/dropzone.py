"""The drop zone: an object written under ``s3/<tenant>/<owner>/`` (prefix-scoped S3 credentials,
dfd.identity.s3access) becomes an upload of that tenant, then the ingest's usual decision at an upload key.

S3 tools overwrite keys freely (no If-None-Match, the bucket is not versioned), so no content is ever kept at an
s3/ key: each object version is moved to the upload key the rest of the system stores contents at.

  1. Identify the version (HeadObject: ETag, size, content type) and derive its upload id from it
     (:func:`drop_upload_id`: bucket, key, ETag and size — a replayed or re-driven event is the same upload, an
     overwrite with other bytes a new one).
  2. No upload yet: register it (pending, counted against the tenant's quota like POST /upload, with
     `filename` = the key after the caller's prefix); an object over MaxUploadBytes, or one the quota refuses, is
     recorded `rejected` (`failure`: too_large / quota_exceeded) instead, counted nowhere.
  3. Pending: copy it server-side to ``uploads/<upload_id>`` (CopySourceIfMatch its ETag, IfNoneMatch "*" as the
     bucket policy wants every write there; skipped when the copy is there already), with the tenant hint. That
     copy's own ObjectCreated event drives the ingest's exactly-once
     commit (dfd.ingest.service: stored, or duplicate and its bytes deleted), counters, usage and events included.
  4. Delete the s3/ object (IfMatch its ETag) — only once its bytes are at the upload key (pending there: the
     reconcile re-drives it; processed: the decision committed), or its upload was rejected or deleted.
Every step is repeatable; a crash between two is finished by the event's redelivery or the reconcile sweep,
which re-drives every object left under s3/ (docs/design/dropzone.md).
"""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

from dfd.core import clock
from dfd.core.conflicts import CommitRefused, QuotaRefused
from dfd.core.errors import ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.core.ids import MAX_FILENAME, clean_filename, object_key, tenant_metadata, version_token
from dfd.core.records import UploadRecord, UploadStatus, UploadVia
from dfd.identity.s3access import ROOT, parse_key
from dfd.uploads.ports import NewUpload

if TYPE_CHECKING:
    from datetime import datetime

    from dfd.core.config import Settings
    from dfd.core.objects import ObjectInfo, ObjectStore
    from dfd.ingest.ports import DropStore

TOO_LARGE = "too_large"
QUOTA_EXCEEDED = "quota_exceeded"
# a drop-zone upload stays pending this long without its copy before the reconcile may expire it: its event's
# redeliveries and the daily sweep (which re-drives every object under s3/) copy it well within
PENDING_SECONDS = 24 * 3600
ATTEMPTS = 3  # reads of the upload record: a concurrent delivery registering the same upload costs one more


def is_drop_key(key: str) -> bool:
    return key.startswith(ROOT)


def drop_upload_id(bucket: str, key: str, version: str, size: int) -> str:
    """32 hex digits derived from the object version: every event of one version names one upload. The last
    digit is even: the checksum hint (dfd.core.ids.hints_checksum) is off — no SHA-256 was signed for it."""
    raw = hashlib.sha256(f"{bucket}/{key}#{version}#{size}".encode()).hexdigest()[:32]
    return raw[:-1] + format(int(raw[-1], 16) & 0xE, "x")


def drop_filename(rest: str) -> str:
    """The upload's filename: the key after the caller's prefix (folders included, as `aws s3 sync` writes them),
    when it is printable and at most 255 characters; else its last component, cleaned like POST /upload's."""
    name = unicodedata.normalize("NFC", rest)
    if len(name) <= MAX_FILENAME and all(unicodedata.category(ch)[0] != "C" for ch in name) and name.strip():
        return name
    try:
        return clean_filename(rest)
    except ValueError:
        return "file"


class DropZone:
    def __init__(
        self, settings: Settings, repo: DropStore, objects: ObjectStore, *, now: Callable[[], datetime] = clock.now
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now

    def ingest(self, bucket: str, key: str) -> tuple[str, dict[str, object]]:
        """One event of an object under s3/: (outcome, details) — `ignored` (not a caller's key), `gone`,
        `superseded` (overwritten meanwhile: its own event follows), `moved` (at its upload key, pending its
        ingest), `rejected`, `settled` (processed before: the leftover deleted), `kept` (left for operators)."""
        parsed = parse_key(key)
        if parsed is None or key.endswith("/"):
            return "ignored", {"reason": "not under a caller's prefix"}
        tenant, owner, rest = parsed
        try:
            info = self._objects.head(bucket, key)
        except ObjectNotFound:
            return "gone", {}
        upload_id = drop_upload_id(bucket, key, version_token(info.version_id, info.etag), info.size)
        detail: dict[str, object] = {"upload_id": upload_id, "tenant": tenant, "size": info.size}
        upload = self._upload(info, upload_id, tenant, owner, rest)
        detail["upload_status"] = upload.status.value
        status = upload.status
        if status == UploadStatus.PENDING:
            target = object_key(self._s.upload_prefix, upload_id)
            if not self._objects.exists(bucket, target, None):
                try:
                    self._objects.copy(
                        bucket,
                        key,
                        info.etag,
                        target,
                        content_type=info.content_type or "application/octet-stream",
                        metadata=tenant_metadata(tenant),
                        size=info.size,
                    )
                except ObjectChanged:
                    # the source moved on, or a concurrent delivery's copy is at the target (IfNoneMatch)
                    if not self._objects.exists(bucket, target, None):
                        return "superseded", detail
                except ObjectNotFound:
                    return "gone", detail
            detail["deleted"] = self._objects.delete(bucket, key, info.etag)
            return "moved", detail
        if status in (UploadStatus.REJECTED, UploadStatus.DELETED) or status.processed:
            # rejected; cancelled by its owner; or processed (its copy's decision committed): nothing needs these
            detail["deleted"] = self._objects.delete(bucket, key, info.etag)
            return ("rejected" if status == UploadStatus.REJECTED else "settled"), detail
        # expired or failed before its copy was made: kept, never deleted on a guess (docs/design/dropzone.md)
        return "kept", detail

    def _upload(self, info: ObjectInfo, upload_id: str, tenant: str, owner: str, rest: str) -> UploadRecord:
        """The upload of this object version: as recorded, else registered (or rejected) now."""
        for _ in range(ATTEMPTS):
            found = self._repo.get_upload(upload_id)
            if found is not None:
                return found
            now = self._now()
            upload = NewUpload(
                upload_id,
                drop_filename(rest),
                info.size,
                info.content_type or "application/octet-stream",
                None,
                object_key(self._s.upload_prefix, upload_id),
                info.bucket,
                clock.plus(now, seconds=PENDING_SECONDS),
                owner=owner,
                tenant=tenant,
                via=UploadVia.S3,
                # its id names the object version: one re-sent alike after this record's TTL is another record
                incarnation=secrets.token_hex(8),
            )
            if info.size > self._s.max_upload_bytes or info.size < 1:
                return self._repo.record_rejected_upload(upload, TOO_LARGE if info.size else "empty", now)
            try:
                # the pending-uploads limit bounds URLs issued and never used: these bytes are here already
                self._repo.register_upload(upload, now, pending_limit=False)
            except QuotaRefused:
                return self._repo.record_rejected_upload(upload, QUOTA_EXCEEDED, now)
            except CommitRefused:
                continue  # registered meanwhile by another delivery: read it
            found = self._repo.get_upload(upload_id)
            if found is not None:
                return found
        raise ServiceUnavailable(f"the upload of {info.key} could not be registered")
