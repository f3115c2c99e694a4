"""The contents aggregate's port: what the ingest reads and commits through the repository
(dfd.adapters.dynamo.contents, .adoption and .reads), and the payloads — one consistent read, the object version it
hashed, the uploader's tenant's share."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dfd.core.reads import FileReads, UploadReads

if TYPE_CHECKING:
    from dfd.ingest.sha256state import Sha256State
    from dfd.uploads.ports import NewUpload

from dfd.core.records import EventRecord, FileRecord, KeyClaim, TenantRef, UploadRecord, counts_stored, holds


@dataclass(frozen=True)
class IngestState:
    """What the ingest decision reads first: this version's event record, the file record for its content,
    its upload record, and the hinted tenant's reference to the content (each None when absent; the reference
    is read only with a tenant hint and an upload id). For an object at an upload key the event is the one its
    upload record carries (the version that processed it); the record of another version there (rejected,
    conflict, canonical: rare) is not read first — the commit's refusal and record_event's answer find it."""

    event: EventRecord | None
    file: FileRecord | None
    upload: UploadRecord | None
    tenant_ref: TenantRef | None = None


@dataclass(frozen=True)
class ObjectVersion:
    """One object version as the ingest identified and hashed it."""

    event_key: str
    bucket: str
    key: str
    etag: str
    size: int
    hash: str
    upload_id: str | None


@dataclass(frozen=True)
class TenantShare:
    """Whose upload an ingest records: the uploader's tenant, and its reference to the content as the ingest read
    (or assumed) it — `held`: the item exists with a count above 0 (dfd.core.records.holds); `counted`: the item exists
    at all, at any count (dfd.core.records.counts_stored: its size is in the tenant's `stored_bytes`). A reference at 0
    is counted and not held; a held one is always counted. The commit is conditioned on exactly that: absent, at
    0, or held."""

    tenant: str
    held: bool
    counted: bool
    # the bytes the upload holds against its tenant's quota while pending (its record's `quota_bytes`): the commit
    # releases them (0: nothing pending to release: released by the reconcile already)
    pending_bytes: int = 0
    # those pending bytes' upload is among the tenant's pending uploads (not a drop-zone one): released with them
    pending_counted: bool = True
    # the upload's quota share was released before this commit (it failed, expired or was rejected): the bytes the
    # commit adds to the tenant's usage are held to its quota as a registration's are (QuotaRefused when they do
    # not fit)
    released: bool = False

    def __post_init__(self) -> None:
        if self.held and not self.counted:
            raise ValueError("a held reference exists: it is counted")

    @classmethod
    def of(
        cls,
        tenant: str,
        ref: TenantRef | None,
        pending_bytes: int = 0,
        *,
        pending_counted: bool = True,
        released: bool = False,
    ) -> TenantShare:
        """The share as the tenant's reference item read says (None: absent)."""
        return cls(tenant, holds(ref), counts_stored(ref), pending_bytes, pending_counted, released)


@dataclass(frozen=True)
class HashProgress:
    """An object version hashed across invocations (dfd.ingest.segments): which version (its event key, and what
    pins its reads: ETag, VersionId, size), what its commit takes from its HEAD (content type, tenant hint), the
    SHA-256 state after `state.length` bytes, the segments that made it, and the digest once every byte is
    hashed."""

    event_key: str
    bucket: str
    key: str
    etag: str
    version_id: str | None
    size: int
    state: Sha256State
    segments: int = 0
    digest: str | None = None
    updated_at: str | None = None
    content_type: str | None = None
    tenant_hint: str | None = None
    run: int = 0  # the workflow execution hashing it (dfd.ingest.segments.execution_name): one more per restart
    # S3's FULL_OBJECT CRC64NVME of the version as its first segment read it (None: it has none), and while there
    # is one, the CRC64NVME of the bytes hashed (of every byte once the digest is known)
    stored_crc64nvme: int | None = None
    crc64nvme: int | None = None

    @property
    def hashed(self) -> int:
        """Bytes hashed so far: the size once the digest is known."""
        return self.size if self.digest is not None else self.state.length

    @property
    def crc64nvme_mismatch(self) -> bool:
        """Every byte hashed, and their CRC64NVME is not the one S3 stored: never committed."""
        return self.digest is not None and self.stored_crc64nvme is not None and self.crc64nvme != self.stored_crc64nvme


class HashingStore(Protocol):
    """What dfd.ingest.segments reads and writes: one state item per object version, written only by it."""

    def get_hashing(self, event_key: str) -> HashProgress | None:
        """The version's state as last written (a consistent read), or None."""
        ...

    def start_hashing(self, progress: HashProgress, now: datetime) -> HashProgress:
        """Put the first state where the version has none; the state there (this one, or an earlier start's)."""
        ...

    def advance_hashing(self, progress: HashProgress, from_length: int, now: datetime) -> bool:
        """Replace the state, conditioned on the stored one being at `from_length` bytes with no digest; False when
        it is not (another writer moved it on, or it is gone)."""
        ...

    def next_run(self, progress: HashProgress, now: datetime) -> bool:
        """Count one more workflow execution on the state (`run` + 1), conditioned on its `run` being the one read
        and no digest; False when it is not (another restart counted it first)."""
        ...


@dataclass(frozen=True)
class HashingShown:
    """What GET /metadata shows of an object key hashed across invocations: the version last hashed there (its
    event key) and its bytes hashed of the total."""

    event_key: str
    hashed: int
    size: int
    updated_at: str | None = None  # when its last state landed (ISO 8601)


class ProgressReads(Protocol):
    """The read GET /metadata makes of a pending large upload (dfd.adapters.dynamo.hashing)."""

    def hashing_of_key(self, bucket: str, key: str) -> HashingShown | None:
        """The progress last written for the object key (eventually consistent), or None."""
        ...


class HashingStarter(Protocol):
    """Starts the segment workflow of one version (dfd.adapters.stepfunctions)."""

    def start_hashing(self, name: str, event_key: str) -> bool:
        """Start the workflow's execution `name` with input {"event_key": ...}; False when an execution of that name
        exists already (running or finished: ExecutionAlreadyExists)."""
        ...

    def died(self, name: str) -> bool:
        """Whether the execution `name` ended without finishing (failed, timed out or aborted)."""
        ...


class DropStore(UploadReads, Protocol):
    """What the drop zone (dfd.ingest.dropzone) reads and writes (dfd.adapters.dynamo.uploads)."""

    def register_upload(self, upload: NewUpload, now: datetime, *, pending_limit: bool = True) -> None:
        """Register the upload pending, counted against its tenant's quota (dfd.uploads.ports.UploadStore);
        without `pending_limit` it is neither limited by nor counted among the tenant's pending uploads (its
        record is `pending_uncounted`): only its bytes are."""
        ...

    def reject_pending_upload(self, upload: UploadRecord, reason: str, now: datetime, *, counter_shard: int) -> bool:
        """The pending upload becomes `rejected` for `reason`, its quota bytes (as read) released and
        `rejected_uploads` +1 on the counter shard in the same transaction; False when it is no longer pending or no
        longer holds them (nothing counted)."""
        ...

    def record_rejected_upload(
        self, upload: NewUpload, reason: str, now: datetime, *, counter_shard: int
    ) -> UploadRecord:
        """Put the upload `rejected` for `reason` where no upload has its id, with `rejected_uploads` +1 on the
        counter shard in the same transaction; the record there (ours or an earlier delivery's, then nothing
        counted)."""
        ...


class IngestStore(FileReads, DropStore, Protocol):
    """What dfd.ingest.service reads and writes."""

    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        """The ingest's first read, ONE consistent read: the event record, the file record, the upload record
        (with an upload id) and `tenant_hint`'s reference to the content (with an upload id and a hint)."""
        ...

    def get_event(self, event_key: str) -> EventRecord | None: ...

    def get_claim(self, bucket: str, key: str) -> KeyClaim | None:
        """The claim of an object key that holds a stored copy (its `hash`), or None."""
        ...

    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        """Record the version's outcome on its own (nothing else changes); False when already recorded."""
        ...

    def record_rejected_event(self, version: ObjectVersion, now: datetime, *, counter_shard: int) -> bool:
        """Record the version `rejected`, with `rejected_uploads` +1 on the counter shard in the same transaction;
        False when already recorded (nothing counted)."""
        ...

    def commit_stored(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        """In one transaction: the event (stored), the file record, the key's claim, the upload finished,
        counted as a file stored, and (with a tenant) +1 upload on the tenant's reference, created when absent.
        Raises EventRecorded, KeyClaimed, FileAppeared, UploadTaken, TenantRefChanged, QuotaRefused (a share
        `released` whose bytes do not fit the quota), CommitRefused."""
        ...

    def commit_duplicate(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        """In one transaction: the event (duplicate), +1 upload on the file record, no claim on the key, the
        upload finished (`duplicate`, or `stored` when its tenant did not hold the content), counted as a
        duplicate avoided, and (with a tenant) +1 upload on the tenant's reference, created when absent.
        Raises EventRecorded, KeyClaimed, FileVanished, FileIsThisObject, FileChanged, UploadTaken,
        TenantRefChanged, QuotaRefused, CommitRefused."""
        ...

    def commit_resurrect(
        self,
        version: ObjectVersion,
        tombstoned: FileRecord,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        """Tombstoned content uploaded again, in one transaction: THIS object becomes the canonical copy of a new
        generation (the record's s3_key/etag move here, its key is claimed, live again with one reference); the
        tombstoned generation's object is handed to the reaper (`reap_key`/`reap_etag`). Conditioned on the record
        still tombstoned at the generation read. Raises EventRecorded, KeyClaimed, FileChanged (resurrected or
        reaped meanwhile: FileVanished), ReapPending, UploadTaken, TenantRefChanged, QuotaRefused."""
        ...

    def adopt_copy(
        self, version: ObjectVersion, lost: FileRecord, now: datetime, *, upload_deleted: bool = False
    ) -> None:
        """The file record's stored object (`lost`: the record as read) is gone: make this duplicate's object
        the stored copy, in one transaction conditioned on the record still naming the lost object — the
        record's key and ETag, the key's claim moved, and the upload (if any) reading `stored` unless it is
        deleted (`upload_deleted`, as read: its bytes still serve the content's other uploads, the upload stays
        deleted). Raises FileChanged (the record moved on: item is the record now), UploadTaken (the upload was
        deleted meanwhile: item is the upload now) or CommitRefused."""
        ...


@dataclass(frozen=True)
class CopyProgress:
    """A drop-zone object version copied to its upload key across invocations (dfd.ingest.dropcopy): which version
    (its event key; what pins the copy: ETag, size), where to (`target`, with the content type and the tenant
    hint the copy carries), the part size, S3's multipart UploadId once created, and how it ended (`ended`:
    done, superseded or gone)."""

    event_key: str
    bucket: str
    key: str
    etag: str
    size: int
    target: str
    content_type: str
    tenant: str
    part_bytes: int
    upload_id: str | None = None
    copied: int = 0  # bytes in the parts the last step found or copied (display only)
    steps: int = 0  # invocations that copied parts
    uploads: int = 0  # multipart uploads created: more than one when S3's lifecycle rule aborted one
    ended: str | None = None
    run: int = 0  # the workflow execution copying it (dfd.ingest.dropcopy.execution_name): one more per restart
    updated_at: str | None = None


class CopyStore(Protocol):
    """What dfd.ingest.dropcopy reads and writes: one copy item per drop-zone object version, written only by it."""

    def get_copy(self, event_key: str) -> CopyProgress | None:
        """The version's copy as last written (a consistent read), or None."""
        ...

    def start_copy(self, progress: CopyProgress, now: datetime) -> CopyProgress:
        """Put the copy where the version has none; the copy there (this one, or an earlier start's)."""
        ...

    def update_copy(self, progress: CopyProgress, upload_id: str | None, now: datetime) -> bool:
        """Write the copy's upload id, progress and end, conditioned on the stored one naming `upload_id` (None: no
        upload yet) and not having ended; False when it does not (another writer moved it on, or it is gone)."""
        ...

    def next_copy_run(self, progress: CopyProgress, now: datetime) -> bool:
        """Count one more workflow execution (`run` + 1), conditioned on its `run` being the one read and no end;
        False when it is not (another restart counted it first)."""
        ...


class PartCopies(Protocol):
    """The S3 calls of a copy across invocations (dfd.adapters.s3.copies)."""

    def create_copy(self, bucket: str, target_key: str, *, content_type: str, metadata: dict[str, str]) -> str: ...

    def copied_parts(self, bucket: str, target_key: str, upload_id: str) -> dict[int, tuple[str, int]]: ...

    def copy_part(
        self,
        bucket: str,
        source_key: str,
        etag: str,
        target_key: str,
        upload_id: str,
        number: int,
        first: int,
        last: int,
    ) -> str: ...

    def complete_copy(self, bucket: str, target_key: str, upload_id: str, parts: dict[int, str]) -> None: ...

    def abort_copy(self, bucket: str, target_key: str, upload_id: str) -> None: ...

    def exists(self, bucket: str, key: str, etag: str | None) -> bool: ...

    def delete(self, bucket: str, key: str, etag: str | None) -> bool: ...
