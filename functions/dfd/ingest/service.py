"""The ingest decision: one object version → stored (new content) or duplicate, exactly once.

Flow per object (docs/design.md):
  1. Identify the object version (VersionId or ETag) → event key, with ONE S3 call: a GetObject, or — when the
     upload id in the key says the PUT signed a SHA-256 (ids.hints_checksum) — a HeadObject asking for S3's
     stored full-object SHA-256, so a checksummed object costs no GetObject at all.
  2. Otherwise hash the body as it streams (ranged GETs in parallel, IfMatch the ETag, for large objects).
  3. ONE consistent read of the state (IngestStore.ingest_state): the event record (at an upload key, the one
     its upload record carries), the file record for the hash, the upload record and — with the tenant hint the
     object's metadata carries (dfd.core.ids.tenant_metadata) — that tenant's reference to the content. S3's stored
     SHA-256 is trusted only when it equals the sha256 the upload record declared (the one its presigned URL
     signed, so S3 verified the body against it): any other stored checksum — an unsigned header, a trailer, a
     direct put — may name bytes the object does not hold, and the body is hashed instead (then the state is
     read again for that hash).
  4. ONE transaction keyed on the event and the content: IngestStore.commit_stored (new content) or
     commit_duplicate, counters included (the item layouts live in dfd.ingest.codec).
  5. After the commit, a duplicate's bytes are deleted (IfMatch its ETag; repeatable) — once the stored copy
     is confirmed (HeadObject IfMatch its ETag). When it is lost, this object becomes the stored copy instead
     (IngestStore.adopt_copy) and is kept: the last copy of a content is never deleted.
The repository's typed conflicts (dfd.core.conflicts) drive the retries: event already recorded → replay; key claimed by
a stored copy → conflict (or canonical); file appeared → duplicate; file vanished → new; file is this very
object → canonical (never deleted); upload already processed → rejected; an upload whose quota share was
released (failed, expired) and whose bytes no longer fit its tenant's quota → rejected (`quota_exceeded`: its bytes
deleted unless a stored copy, the upload left as it ended); a TransactionConflict or a refusal no condition
explains → backoff (dfd.core.retry: throttling and transient errors are botocore's to retry, and what it gives up
on fails the record, which its queue delivers again).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.conflicts import (
    CommitRefused,
    EventRecorded,
    FileChanged,
    KeyClaimed,
    PendingReleased,
    QuotaRefused,
    TenantRefChanged,
    UploadTaken,
)
from dfd.core.errors import ObjectChanged, ObjectNotFound, ServiceUnavailable, TransactionRetryable
from dfd.core.ids import event_key, filename_from_key, hints_checksum, upload_id_from_key, version_token
from dfd.core.objects import ObjectInfo, ObjectStore, OpenedObject
from dfd.core.records import FileRecord, KeyClaim, UploadRecord, UploadStatus
from dfd.core.retry import ADOPT_ATTEMPTS, INGEST_ATTEMPTS, Backoff
from dfd.ingest.dropzone import QUOTA_EXCEEDED, DropZone, is_drop_key
from dfd.ingest.ports import ObjectVersion, TenantShare

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.core.notifications import ObjectRef
    from dfd.ingest.dropcopy import CopyHandoff
    from dfd.ingest.ports import HashingStarter, IngestStore
    from dfd.ingest.segments import Segments

MAX_ATTEMPTS = INGEST_ATTEMPTS
# a version hashed in segments whose bytes' CRC64NVME is not the one S3 stored (dfd.ingest.segments): rejected
CRC64NVME_MISMATCH = "crc64nvme_mismatch"


class Outcome(StrEnum):
    STORED = "stored"  # new content: this object is now the canonical copy
    DUPLICATE = "duplicate"  # content already stored elsewhere: counted, bytes deleted
    REPLAY = "replay"  # this object version was already ingested: nothing changed
    CANONICAL = "canonical"  # the event names the stored copy itself: nothing changed, nothing deleted
    IGNORED = "ignored"  # not ours: other bucket, outside the prefix
    GONE = "gone"  # the object no longer exists (deleted duplicate, never uploaded)
    SUPERSEDED = "superseded"  # the object changed while read: the newer version's event follows
    # a second PUT at an upload key already processed, or a version whose bytes read are not the ones S3 checksummed
    # (`crc64nvme_mismatch`): deleted, counted only in `rejected_uploads`
    REJECTED = "rejected"
    CONFLICT = "conflict"  # a stored object was overwritten in place by a direct put: nothing deleted, alarmed
    # an object under s3/ (dfd.ingest.dropzone); `rejected`, `ignored`, `gone`, `superseded` as above
    HASHING = "hashing"  # above the segment threshold: handed to the segment workflow, which commits it (segments.py)
    COPYING = "copying"  # above the copy threshold: handed to the copy workflow, which moves it (dropcopy.py)
    MOVED = "moved"  # copied to its upload key (whose own event is ingested as any upload's), then deleted
    SETTLED = "settled"  # its upload ended before (processed, deleted, expired, failed): the leftover object deleted


@dataclass
class IngestResult:
    outcome: Outcome
    bucket: str
    key: str
    hash: str | None = None
    size: int | None = None
    upload_id: str | None = None
    event_key: str | None = None
    bytes_saved: int = 0
    deleted: bool = False
    hashed_bytes: int = 0
    attempts: int = 0
    detail: dict[str, Any] = field(default_factory=dict)

    def log_keys(self) -> dict[str, Any]:
        keys = {
            "outcome": str(self.outcome),
            "bucket": self.bucket,
            "key": self.key,
            "hash": self.hash,
            "size": self.size,
            "upload_id": self.upload_id,
            "event_key": self.event_key,
            "bytes_saved": self.bytes_saved,
            "deleted": self.deleted,
            "hashed_bytes": self.hashed_bytes,
            "attempts": self.attempts,
        }
        return {k: v for k, v in keys.items() if v is not None} | self.detail


@dataclass(frozen=True)
class Handoff:
    """Objects above `threshold` bytes with no trusted stored SHA-256 are hashed across invocations: their state is
    begun (`segments`) and the segment workflow started (`starter`), once per version."""

    threshold: int
    segments: Segments
    starter: HashingStarter


class Ingestor:
    def __init__(
        self,
        settings: Settings,
        repo: IngestStore,
        objects: ObjectStore,
        *,
        now: Callable[[], datetime] = clock.now,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        after_commit: Callable[[IngestResult], None] | None = None,
        writers: Callable[[str, str], bool] | None = None,
        handoff: Handoff | None = None,
        copies: CopyHandoff | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now
        self._rng = rng or random.Random()
        self._backoff = Backoff(sleep, self._rng)
        # test seam: runs between the commit and the delete (crash injection)
        self._after_commit = after_commit
        self._drops = DropZone(settings, repo, objects, now=now, writers=writers, copies=copies, rng=self._rng)
        self._handoff = handoff

    # ------------------------------------------------------------------ entry point
    def ingest(self, ref: ObjectRef) -> IngestResult:
        result = IngestResult(Outcome.IGNORED, ref.bucket, ref.key)
        if ref.bucket != self._s.bucket:
            result.detail["reason"] = "other bucket"
            return result
        if is_drop_key(ref.key):
            outcome, detail = self._drops.ingest(ref.bucket, ref.key)
            result.outcome = Outcome(outcome)
            result.upload_id = detail.pop("upload_id", None)  # type: ignore[assignment]
            result.deleted = bool(detail.pop("deleted", False))
            result.detail.update(detail)
            return result
        if not ref.key.startswith(self._s.upload_prefix) or ref.key.endswith("/"):
            result.detail["reason"] = "outside the upload prefix"
            return result
        result.upload_id = upload_id_from_key(self._s.upload_prefix, ref.key)
        try:
            opened = self._objects.open(ref.bucket, ref.key, expect_checksum=hints_checksum(result.upload_id))
        except ObjectNotFound:
            result.outcome = Outcome.GONE
            return result
        with opened:
            info = opened.info
            self._identified(info, result)
            # a stored checksum is only a candidate until the upload record confirms it (_decide_and_commit)
            stored = info.checksum_sha256 if hints_checksum(result.upload_id) else None
            if stored:
                result.hash = stored
            elif self._handoff is not None and info.size > self._handoff.threshold:
                return self._hand_off(self._handoff, info, result)
            elif not self._hash_body(opened, result):
                return result
        self._decide_and_commit(info, result, checksum=stored)
        return result

    def commit_hashed(self, info: ObjectInfo, digest: str, *, crc64nvme_mismatch: bool = False) -> IngestResult:
        """The decision and commit of a version hashed across invocations (dfd.ingest.segments: every byte of the
        version `info` identifies hashed to `digest`): the same decision and commit as an inline hash's, from the
        same first read on. `crc64nvme_mismatch`: the CRC64NVME of the bytes read is not the one S3 stored — the
        version is rejected as a second PUT at a processed upload key is (`crc64nvme_mismatch`), never committed."""
        result = IngestResult(Outcome.IGNORED, info.bucket, info.key)
        if info.bucket != self._s.bucket or not info.key.startswith(self._s.upload_prefix) or info.key.endswith("/"):
            result.detail["reason"] = "outside the upload prefix"
            return result
        result.upload_id = upload_id_from_key(self._s.upload_prefix, info.key)
        self._identified(info, result)
        result.hash, result.hashed_bytes = digest, info.size
        if crc64nvme_mismatch:
            assert result.event_key is not None
            result.detail["reason"] = CRC64NVME_MISMATCH
            version = ObjectVersion(
                result.event_key, info.bucket, info.key, info.etag, info.size, digest, result.upload_id
            )
            self._rejected(version, result)
            return result
        self._decide_and_commit(info, result)
        return result

    def _hand_off(self, handoff: Handoff, info: ObjectInfo, result: IngestResult) -> IngestResult:
        """Begin the version's hashing state and start its workflow (named by the event key: a replayed event starts
        none other). A version whose digest is known already (its workflow hashed every byte) is committed here, by
        the same decision: a replay when the workflow committed it."""
        from dfd.ingest.segments import execution_name, version_info

        assert result.event_key is not None
        progress = handoff.segments.begin(result.event_key, info)
        if progress.digest is not None:
            return self.commit_hashed(
                version_info(progress), progress.digest, crc64nvme_mismatch=progress.crc64nvme_mismatch
            )
        name = execution_name(result.event_key, progress.run)
        started = handoff.starter.start_hashing(name, result.event_key)
        if not started and handoff.starter.died(name) and handoff.segments.restart(progress, self._now()):
            # its execution died (every retry of a segment failed): the next run goes on from the stored state
            name = execution_name(result.event_key, progress.run + 1)
            started = handoff.starter.start_hashing(name, result.event_key)
            result.detail["restarted"] = True
        result.outcome = Outcome.HASHING
        result.detail["execution"] = name
        result.detail["started"] = started  # False: its execution runs (or ran) already
        result.detail["hashed"] = progress.hashed
        return result

    @staticmethod
    def _identified(info: ObjectInfo, result: IngestResult) -> None:
        """What the identified version gives every result: its event key and size."""
        result.event_key = event_key(info.bucket, info.key, version_token(info.version_id, info.etag))
        result.size = info.size

    def _hash_body(self, opened: OpenedObject, result: IngestResult) -> bool:
        """Hash every byte of the identified version into `result`; False when it changed or went meanwhile
        (the outcome says which)."""
        info = opened.info
        digest = hashlib.sha256()
        try:
            count = self._objects.stream(opened, digest.update)
            if count != info.size:
                raise ObjectChanged(f"read {count} bytes of {info.key}, expected {info.size}")
        except ObjectChanged:
            result.outcome = Outcome.SUPERSEDED
            return False
        except ObjectNotFound:  # deleted between the HEAD and the GET (a concurrent duplicate's delete)
            result.outcome = Outcome.GONE
            return False
        result.hash, result.hashed_bytes = digest.hexdigest(), count
        return True

    # ------------------------------------------------------------------ decision
    def _decide_and_commit(self, info: ObjectInfo, result: IngestResult, *, checksum: str | None = None) -> None:
        assert result.hash is not None and result.event_key is not None
        state = self._repo.ingest_state(result.event_key, result.hash, result.upload_id, info.tenant_hint)
        if checksum is not None and (state.upload is None or state.upload.sha256 != checksum):
            # S3's checksum is not the one the upload signed: what the object holds is what its bytes hash to
            result.detail["checksum_untrusted"] = True
            if not self._hash_body(OpenedObject(info, None), result):
                return
            state = self._repo.ingest_state(result.event_key, result.hash, result.upload_id, info.tenant_hint)
        version = ObjectVersion(
            result.event_key, info.bucket, info.key, info.etag, info.size, result.hash, result.upload_id
        )
        upload = state.upload
        known = state.file
        if state.event is not None:
            self._replayed(version, state.event.outcome, result, known, upload)
            return
        filename = (upload and upload.filename) or filename_from_key(info.key)
        content_type = (upload and upload.content_type) or info.content_type or "application/octet-stream"
        # The uploader's tenant (uploads made through POST /upload; objects put straight into the bucket have
        # none; the upload record says, never the hint). Whether it holds the content already: when the object's
        # tenant hint names that tenant, the one read returned its reference; otherwise new content → it cannot,
        # a duplicate → assumed held. The commit is conditioned on what it assumed and a TenantRefChanged
        # conflict says what is there instead (no extra read).
        tenant = upload.tenant if upload is not None else None
        if upload is not None and upload.status == UploadStatus.DELETED:  # cancelled before its object arrived
            result.detail["reason"] = "upload deleted"
            self._rejected(version, result)
            return
        # the tenant's reference as known from the first read (a right hint) or a TenantRefChanged conflict;
        # unknown (False): assumed from the content
        ref_known, ref = False, None
        if tenant is not None and tenant == info.tenant_hint:
            ref_known, ref = True, state.tenant_ref
        pending = upload.quota_bytes if upload is not None else 0  # held against the quota: the commit releases it
        counted = upload is None or not upload.pending_uncounted  # and with them, one of its pending uploads
        # a registered upload holding nothing against the quota: its share was released (failed, expired, rejected)
        released = tenant is not None and pending == 0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            result.attempts = attempt
            if known is not None and known.s3_key == info.key:
                # the event names the stored copy itself (its event record has expired): change nothing,
                # but record the event again so that sweeps stop re-driving it
                result.outcome = Outcome.CANONICAL
                if not self._repo.record_event(version, Outcome.STORED, self._now()):
                    self._recorded(version, result)  # recorded before (the first read does not say for every key)
                return
            duplicate = known is not None
            # tombstoned content (its live count is 0: every reference deleted) takes no new reference: this
            # upload resurrects it
            resurrect = known is not None and known.tombstoned
            duplicate = duplicate and not resurrect
            share = None
            if tenant is not None:  # assumed: new content → no reference yet; a duplicate → the tenant holds it
                share = (
                    TenantShare.of(tenant, ref, pending, pending_counted=counted, released=released)
                    if ref_known
                    else TenantShare(tenant, duplicate, duplicate, pending, counted, released)
                )
            if resurrect:
                assert known is not None
                commit = partial(self._repo.commit_resurrect, version, known)
            else:
                commit = partial(self._repo.commit_duplicate if duplicate else self._repo.commit_stored, version)
            try:
                commit(
                    filename=filename,
                    content_type=content_type,
                    counter_shard=self._rng.randrange(self._s.counter_shards),
                    now=self._now(),
                    tenant=share,
                )
            except EventRecorded as recorded:
                event = recorded.item or self._repo.get_event(version.event_key)
                self._replayed(version, event.outcome if event else "unknown", result, known, upload)
                return
            except KeyClaimed as claimed:
                self._conflict(version, result, claimed.item)
                return
            except FileChanged as changed:
                # new: the file appeared (lost a race) → redo as duplicate; duplicate: the file vanished
                # (→ new) or is this very object (→ canonical). The next attempt follows what is there now.
                known = changed.item or self._repo.get_file(version.hash, consistent=True)
                ref_known = False  # what the first read said of the tenant's reference is as stale: assume again
                continue
            except UploadTaken:
                self._rejected(version, result)
                return
            except PendingReleased:
                # the reconcile released the quota bytes meanwhile: do not release them twice; hold the quota instead
                pending, released = 0, True
                continue
            except QuotaRefused:
                # its quota share released, its bytes no longer fit: refused as an over-quota object is
                result.detail["reason"] = QUOTA_EXCEEDED
                self._rejected(version, result)
                return
            except TenantRefChanged as changed:
                # the tenant's reference appeared, went to 0, was reaped or taken over: follow it (absent, at 0 —
                # still counted in its usage — or held)
                ref_known, ref = True, changed.item
                continue
            except (CommitRefused, TransactionRetryable):
                # a TransactionConflict, or a refusal no known condition explains: pause, then try again
                if attempt < MAX_ATTEMPTS:
                    self._backoff(attempt)
                continue
            result.outcome = Outcome.DUPLICATE if duplicate else Outcome.STORED
            if resurrect:
                assert known is not None
                result.detail["resurrected_generation"] = known.generation + 1
            if share is not None:
                result.detail["tenant"] = share.tenant
                # what the uploader sees: new for its tenant unless the tenant held the content already
                shown = UploadStatus.DUPLICATE if duplicate and share.held else UploadStatus.STORED
                result.detail["upload_status"] = shown.value
            if duplicate:
                result.bytes_saved = info.size
                if self._after_commit:
                    self._after_commit(result)
                self._delete_duplicate(version, known, result)
            return
        raise ServiceUnavailable(f"ingest of {info.key} did not commit after {MAX_ATTEMPTS} attempts")

    def _replayed(
        self,
        version: ObjectVersion,
        outcome: str | None,
        result: IngestResult,
        file: FileRecord | None,
        upload: UploadRecord | None = None,
    ) -> None:
        """This object version was ingested before (with `outcome`, as recorded): change nothing, but finish a
        duplicate's delete (or a rejected second PUT's)."""
        result.outcome = Outcome.REPLAY
        result.detail["recorded_outcome"] = outcome
        if outcome == Outcome.DUPLICATE:
            deleted = upload is not None and upload.status == UploadStatus.DELETED
            if file is None and deleted and upload is not None and upload.event_key == version.event_key:
                # the content was reaped since: every reference went, this upload's too (a file record leaves only
                # at a live count of 0). No record needs these bytes; an upload of the content stores its own.
                result.deleted = self._objects.delete(version.bucket, version.key, version.etag)
                result.detail["reason"] = "content reaped, upload deleted"
                return
            self._delete_duplicate(version, file, result, upload_deleted=deleted)
        elif outcome == Outcome.REJECTED:
            result.deleted = self._objects.delete(version.bucket, version.key, version.etag)

    def _delete_duplicate(
        self, version: ObjectVersion, file: FileRecord | None, result: IngestResult, *, upload_deleted: bool = False
    ) -> None:
        """Delete a committed duplicate's bytes — only once the stored copy is confirmed (ONE HeadObject IfMatch
        its ETag). A stored copy that is gone (deleted out of band, overwritten) makes this object the stored
        copy instead: the file record and the key's claim move to it in one transaction conditioned on the
        record still naming the lost copy, and it is kept."""
        for attempt in range(1, ADOPT_ATTEMPTS + 1):
            if file is not None and file.tombstoned and file.s3_key != version.key:
                # every reference was deleted since this duplicate was committed (its own too): no live record needs
                # these bytes (an upload of the content resurrects it with its own)
                result.deleted = self._objects.delete(version.bucket, version.key, version.etag)
                return
            if file is None or not file.s3_key:
                result.detail["kept"] = "no stored copy recorded"  # never delete what may be the last copy
                return
            if file.s3_key == version.key:
                result.detail["kept"] = "stored copy"  # adopted earlier: this object IS the stored copy
                return
            bucket = file.bucket or version.bucket
            # a record the reconcile marked lost names no object: this copy is adopted without asking S3
            if not file.lost and self._objects.exists(bucket, file.s3_key, file.etag):
                result.deleted = self._objects.delete(version.bucket, version.key, version.etag)
                return
            try:
                self._repo.adopt_copy(version, file, self._now(), upload_deleted=upload_deleted)
            except UploadTaken as taken:
                # its upload was deleted meanwhile: adopt the copy all the same (the content's other uploads need
                # it), leaving the upload deleted
                upload_deleted = taken.item is not None and taken.item.status == UploadStatus.DELETED
                if not upload_deleted:
                    break
                continue
            except (CommitRefused, TransactionRetryable) as refused:
                # the record moved on (another copy adopted first, or our own response lost and the retry refused by
                # what it wrote), or a concurrent transaction (pause first): look again
                if isinstance(refused, TransactionRetryable) and attempt < ADOPT_ATTEMPTS:
                    self._backoff(attempt)
                file = self._repo.get_file(version.hash, consistent=True)
                continue
            result.detail["adopted_from"] = file.s3_key
            if not upload_deleted:
                result.detail["upload_status"] = UploadStatus.STORED.value
            return
        result.detail["kept"] = "stored copy unconfirmed"

    def _conflict(self, version: ObjectVersion, result: IngestResult, claim: KeyClaim | None) -> None:
        """The key holds another content's stored copy, overwritten in place (a direct put bypassing the API):
        that record's bytes are gone. Never delete here, count nothing; record it so operators are told once."""
        claim = claim or self._repo.get_claim(version.bucket, version.key)
        if claim is not None and claim.hash == version.hash:
            # the same content again at the stored key: recorded as canonical, never as a counted upload
            result.outcome = Outcome.CANONICAL
            if not self._repo.record_event(version, Outcome.CANONICAL, self._now()):
                self._recorded(version, result)
            return
        result.outcome = Outcome.CONFLICT
        result.detail["stored_hash"] = claim.hash if claim is not None else None
        if not self._repo.record_event(version, Outcome.CONFLICT, self._now()):
            self._recorded(version, result)  # recorded before: operators are told once

    def _recorded(self, version: ObjectVersion, result: IngestResult) -> None:
        """record_event found this version recorded already (a replay the first read did not show: the record of
        a version other than its upload's): follow what it recorded."""
        event = self._repo.get_event(version.event_key)
        file = self._repo.get_file(version.hash, consistent=True) if event is not None else None
        result.detail.pop("stored_hash", None)
        self._replayed(version, event.outcome if event is not None else None, result, file)

    def _rejected(self, version: ObjectVersion, result: IngestResult) -> None:
        """A second object version at an upload key whose upload was already processed (the presigned URL was
        used again after a duplicate's bytes were deleted): not an upload of its own — delete it, count it rejected.
        A stored object is never deleted: its key is claimed."""
        if self._repo.get_claim(version.bucket, version.key) is not None:
            self._conflict(version, result, None)
            return
        result.outcome = Outcome.REJECTED
        shard = self._rng.randrange(self._s.counter_shards)
        if self._repo.record_rejected_event(version, self._now(), counter_shard=shard):
            result.deleted = self._objects.delete(version.bucket, version.key, version.etag)
        else:  # recorded before (a replay, or a concurrent delivery first): follow what it recorded
            self._recorded(version, result)
