"""The drop zone: an object written under ``s3/<tenant>/<owner>/`` (prefix-scoped S3 credentials,
dfd.identity.s3access) becomes an upload of that tenant, then the ingest's usual decision at an upload key.

S3 tools overwrite keys freely (no If-None-Match, the bucket is not versioned), so no content is ever kept at an
s3/ key: each object version is moved to the upload key the rest of the system stores contents at.

  1. Identify the write (HeadObject: ETag, size, Last-Modified, storage class, content type) and derive its upload
     id from it (:func:`drop_upload_id`: bucket, key, ETag, size and when it was written — a replayed or re-driven
     event is the same upload, any later write of the key a new one, the same bytes again included).
  2. No upload yet: register it (pending, its bytes counted against the tenant's quota like POST /upload's, not
     among the tenant's pending uploads; `filename` = the key after the caller's prefix, the content type as
     valid_content_type allows one, else application/octet-stream); a key that names no file (ending in ``/``),
     an archived storage class, an empty object, one over MaxUploadBytes, one no still-valid credentials of its
     owner may have written (dfd.identity.s3sessions) or one the quota refuses is recorded `rejected` (`failure`:
     the reason) instead, counted `rejected_uploads` on a counter shard in the same transaction.
  3. Pending: copy it server-side to ``uploads/<upload_id>`` (CopySourceIfMatch its ETag, IfNoneMatch "*" as the
     bucket policy wants every write there; skipped when the copy is there already), with the tenant hint. That
     copy's own ObjectCreated event drives the ingest's exactly-once
     commit (dfd.ingest.service: stored, or duplicate and its bytes deleted), counters, usage and events included.
     Above the copy workflow's threshold (:class:`dfd.ingest.dropcopy.CopyHandoff`) the copy runs across
     invocations instead: its copy item begun and ONE execution started per version (outcome `copying`); the
     workflow's last step deletes the s3/ object (docs/design/dropzone-copies.md).
  4. Delete the s3/ object (IfMatch its ETag) — once its bytes are at the upload key (pending there: the
     reconcile re-drives it; processed: the decision committed), or its upload ended without them (rejected —
     a copy S3 refuses for the object's storage class rejects a pending one —, deleted, expired, failed).
Every step is repeatable; a crash between two is finished by the event's redelivery or the reconcile sweep,
which re-drives every object left under s3/ (docs/design/dropzone.md).
"""

from __future__ import annotations

import hashlib
import random
import secrets
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

from dfd.core import clock
from dfd.core.conflicts import CommitRefused, QuotaRefused
from dfd.core.errors import ObjectArchived, ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.core.ids import (
    MAX_FILENAME,
    clean_filename,
    event_key,
    object_key,
    stored_content_type,
    tenant_metadata,
    version_token,
)
from dfd.core.records import UploadRecord, UploadStatus, UploadVia
from dfd.identity.s3access import ROOT, parse_key
from dfd.uploads.ports import NewUpload

if TYPE_CHECKING:
    from datetime import datetime

    from dfd.core.config import Settings
    from dfd.core.objects import ObjectInfo, ObjectStore
    from dfd.ingest.dropcopy import CopyHandoff
    from dfd.ingest.ports import DropStore

# why a drop-zone object is rejected (the upload's `failure`, shown as its `reason`)
TOO_LARGE = "too_large"
EMPTY = "empty"
QUOTA_EXCEEDED = "quota_exceeded"
NOT_A_FILE = "not_a_file"  # a key ending in "/" (a folder marker): it names no file
ARCHIVED = "archived_storage_class"  # its bytes cannot be read or copied until restored
WRITER_REVOKED = "writer_revoked"  # no still-valid session of its owner may have written it
# storage classes whose objects S3 refuses to copy (ObjectNotInActiveTierError) until restored; an INTELLIGENT_TIERING
# object in an archive tier says so by its ArchiveStatus (ObjectInfo.archived)
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
# a drop-zone upload stays pending this long without its copy before the reconcile may expire it: its event's
# redeliveries and the daily sweep (which re-drives every object under s3/) copy it well within
PENDING_SECONDS = 24 * 3600
# one the copy workflow copies: as long as its s3/ object lives (the bucket's ExpireDropZone rule), past which its
# copy can never finish
COPY_PENDING_SECONDS = 7 * 24 * 3600
ATTEMPTS = 3  # reads of the upload record: a concurrent delivery registering the same upload costs one more


def is_drop_key(key: str) -> bool:
    return key.startswith(ROOT)


def drop_upload_id(bucket: str, key: str, version: str, size: int, written: str) -> str:
    """32 hex digits derived from one write of a key (its version — VersionId or ETag —, size, and `written`:
    its Last-Modified): every event of one write names one upload, a later write of the same bytes another. The
    last digit is even: the checksum hint (dfd.core.ids.hints_checksum) is off — no SHA-256 was signed for it."""
    raw = hashlib.sha256(f"{bucket}/{key}#{version}#{size}#{written}".encode()).hexdigest()[:32]
    return raw[:-1] + format(int(raw[-1], 16) & 0xE, "x")


def drop_key(key: str) -> tuple[str, str, str] | None:
    """(tenant, owner, rest) of a key under a caller's prefix, `rest` the key after it — empty when the key is
    the prefix itself (a folder marker a tool may write there too); None for a key no caller writes."""
    parsed = parse_key(key + "x")
    return None if parsed is None else (parsed[0], parsed[1], parsed[2][:-1])


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
        self,
        settings: Settings,
        repo: DropStore,
        objects: ObjectStore,
        *,
        now: Callable[[], datetime] = clock.now,
        writers: Callable[[str, str], bool] | None = None,
        copies: CopyHandoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now
        # (tenant, owner) -> whether a still-valid session may have written the object (dfd.identity.s3sessions)
        self._writers = writers
        self._copies = copies
        self._rng = rng or random.Random()  # the counter shard a rejection is counted on

    def ingest(self, bucket: str, key: str) -> tuple[str, dict[str, object]]:
        """One event of an object under s3/: (outcome, details) — `ignored` (not a caller's key), `gone`,
        `superseded` (overwritten meanwhile: its own event follows), `moved` (at its upload key, pending its
        ingest), `copying` (handed to the copy workflow), `rejected` (refused: deleted), `settled` (its upload
        ended before: the leftover deleted)."""
        parsed = drop_key(key)
        if parsed is None:
            return "ignored", {"reason": "not under a caller's prefix"}
        tenant, owner, rest = parsed
        try:
            info = self._objects.head(bucket, key)
        except ObjectNotFound:
            return "gone", {}
        version = version_token(info.version_id, info.etag)
        upload_id = drop_upload_id(bucket, key, version, info.size, info.last_modified or "")
        detail: dict[str, object] = {"upload_id": upload_id, "tenant": tenant, "size": info.size}
        upload = self._upload(info, upload_id, tenant, owner, rest)
        if upload.status == UploadStatus.PENDING:
            detail["upload_status"] = upload.status.value
            target = object_key(self._s.upload_prefix, upload_id)
            if self._copies is not None and info.size > self._copies.threshold:
                return self._hand_off(self._copies, info, target, tenant, detail)
            try:
                self._copy(info, target, tenant)
            except ObjectChanged:
                return "superseded", detail
            except ObjectNotFound:
                return "gone", detail
            except ObjectArchived:
                # S3 will never copy it as it is: rejected (its quota bytes released), then deleted below
                self._repo.reject_pending_upload(upload, ARCHIVED, self._now(), counter_shard=self._shard())
                upload = self._repo.get_upload(upload_id) or upload
            else:
                detail["deleted"] = self._objects.delete(bucket, key, info.etag)
                return "moved", detail
        detail["upload_status"] = upload.status.value
        if upload.status == UploadStatus.PENDING:  # its record changed meanwhile: the redelivery decides again
            raise ServiceUnavailable(f"the upload of {key} is pending and its object could not be copied")
        # rejected; or ended before (processed: its copy's decision committed; cancelled by its owner; expired or
        # failed: what it held released, this object never to become its bytes): nothing needs these bytes
        detail["deleted"] = self._objects.delete(bucket, key, info.etag)
        return ("rejected" if upload.status == UploadStatus.REJECTED else "settled"), detail

    def _hand_off(
        self, handoff: CopyHandoff, info: ObjectInfo, target: str, tenant: str, detail: dict[str, object]
    ) -> tuple[str, dict[str, object]]:
        """Begin the version's copy item and start its execution (named by its event key: a replayed or re-driven
        event starts none other); restart it when it died. A copy that is at the target already is `moved`."""
        from dfd.ingest.dropcopy import execution_name

        if self._objects.exists(info.bucket, target, None):  # copied: its s3/ object's delete was lost
            detail["deleted"] = self._objects.delete(info.bucket, info.key, info.etag)
            return "moved", detail
        key = event_key(info.bucket, info.key, version_token(info.version_id, info.etag))
        progress = handoff.copies.begin(key, info, target, stored_content_type(info.content_type), tenant)
        if progress.ended is not None and progress.ended != "done":
            return progress.ended, detail  # superseded or gone while it was copied
        name = execution_name(key, progress.run)
        started = handoff.starter.start_hashing(name, key)
        if not started and handoff.starter.died(name) and handoff.copies.restart(progress, self._now()):
            # its execution died (every retry of a step failed): the next run goes on from the parts S3 holds
            name = execution_name(key, progress.run + 1)
            started = handoff.starter.start_hashing(name, key)
            detail["restarted"] = True
        detail.update(execution=name, started=started, copied=progress.copied)
        return "copying", detail

    def _copy(self, info: ObjectInfo, target: str, tenant: str) -> None:
        """Copy the identified object version to `target` (IfNoneMatch "*") unless a copy is there already.
        Raises ObjectChanged when the source moved on (its own event follows), ObjectNotFound when it is gone,
        ObjectArchived when S3 refuses to copy it for its storage class."""
        bucket = info.bucket
        if self._objects.exists(bucket, target, None):
            return
        try:
            self._objects.copy(
                bucket,
                info.key,
                info.etag,
                target,
                content_type=stored_content_type(info.content_type),
                metadata=tenant_metadata(tenant),
                size=info.size,
            )
        except ObjectChanged:
            # the source moved on, or a concurrent delivery's copy is at the target (IfNoneMatch)
            if not self._objects.exists(bucket, target, None):
                raise

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
                stored_content_type(info.content_type),
                None,
                object_key(self._s.upload_prefix, upload_id),
                info.bucket,
                clock.plus(now, seconds=self._pending_seconds(info)),
                owner=owner,
                tenant=tenant,
                via=UploadVia.S3,
                # its id names the object version: one re-sent alike after this record's TTL is another record
                incarnation=secrets.token_hex(8),
            )
            refused = self._refused(info, rest)
            if refused is not None:
                return self._repo.record_rejected_upload(upload, refused, now, counter_shard=self._shard())
            if self._writers is not None and not self._writers(tenant, owner):
                return self._repo.record_rejected_upload(upload, WRITER_REVOKED, now, counter_shard=self._shard())
            try:
                # the pending-uploads limit bounds URLs issued and never used, a limit the tenant's members share:
                # these bytes are here already, and are moved at once — neither limited by it nor counted in it
                self._repo.register_upload(upload, now, pending_limit=False)
            except QuotaRefused:
                return self._repo.record_rejected_upload(upload, QUOTA_EXCEEDED, now, counter_shard=self._shard())
            except CommitRefused:
                continue  # registered meanwhile by another delivery: read it
            found = self._repo.get_upload(upload_id)
            if found is not None:
                return found
        raise ServiceUnavailable(f"the upload of {info.key} could not be registered")

    def _shard(self) -> int:
        return self._rng.randrange(self._s.counter_shards)

    def _pending_seconds(self, info: ObjectInfo) -> int:
        """How long the upload stays pending without its copy before the reconcile may expire it."""
        if self._copies is not None and info.size > self._copies.threshold:
            return COPY_PENDING_SECONDS
        return PENDING_SECONDS

    def _refused(self, info: ObjectInfo, rest: str) -> str | None:
        """Why this object can never become an upload (the rejected upload's reason), or None."""
        if not rest or rest.endswith("/"):
            return NOT_A_FILE
        if info.archived or (info.storage_class or "").upper() in ARCHIVE_CLASSES:
            return ARCHIVED
        if info.size < 1:
            return EMPTY
        if info.size > self._s.max_upload_bytes:
            return TOO_LARGE
        return None
