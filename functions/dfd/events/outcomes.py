"""The outcomes dfd publishes (docs/events/): derived from the committed change of one stored record.

A change is the record before and after one committed write, as a DynamoDB stream delivers it (the publisher,
dfd.handlers.publisher): whatever path wrote it — the API, the ingest, the reconcile workflow, the reaper — the
outcome follows from the state alone, and a write that changed no state (a replay) publishes nothing.

Each outcome is reached at most once per incarnation of a record: an upload is processed once, deleted once,
expired or failed once; a content's generation is stored once and removed once. A record's key can name another
record later — a content reaped and stored again (its generations restart), a drop-zone upload whose id derives from
its object version re-sent after the first record's TTL — so a record carries its incarnation, written once in the
write that creates it (FileRecord.incarnation, UploadRecord.incarnation). Its `event_id` is derived from exactly
that (the record's key, its incarnation and the transition), so every retry or replay of one change carries the
same id, another incarnation's transition another id, and consumers can deduplicate on it. A record without an
incarnation keeps the ids key and transition alone give (those its transitions were published with).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dfd.core.records import FileRecord, UploadRecord, UploadStatus

SOURCE = "dfd"
# uuid5 namespace of every event_id (a fixed, random uuid: ids are stable across deployments and versions)
EVENT_NAMESPACE = uuid.UUID("9f4c1e56-2a51-4f0b-8a43-5b0a1f3c7d21")


class DetailType(StrEnum):
    UPLOAD_STORED = "Upload Stored"  # its bytes became a new content's copy
    UPLOAD_DEDUPLICATED = "Upload Deduplicated"  # its content was already stored (the ingest, or the 409 precheck)
    UPLOAD_DELETED = "Upload Deleted"
    UPLOAD_EXPIRED = "Upload Expired"
    UPLOAD_FAILED = "Upload Failed"
    UPLOAD_REJECTED = "Upload Rejected"  # an object under s3/ refused (too large, over quota): deleted, counted
    FILE_STORED = "File Stored"  # a content's copy kept: its first, or the first after it was tombstoned
    FILE_REMOVED = "File Removed"  # its bytes reaped: the record is gone

    @property
    def is_upload(self) -> bool:
        return self.value.startswith("Upload ")


UPLOAD_ENDINGS = {
    UploadStatus.DELETED: DetailType.UPLOAD_DELETED,
    UploadStatus.EXPIRED: DetailType.UPLOAD_EXPIRED,
    UploadStatus.FAILED: DetailType.UPLOAD_FAILED,
    UploadStatus.REJECTED: DetailType.UPLOAD_REJECTED,
}


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    detail_type: DetailType
    event_id: str
    occurred_at: str
    sha256: str | None
    size: int | None
    # Upload events only: File events are for operators and name no uploader
    tenant: str | None = None
    owner: str | None = None
    upload_id: str | None = None
    filename: str | None = None
    via: str | None = None  # how the upload's object came in (dfd.core.records.UploadVia); None: not recorded

    def detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {"event_id": self.event_id, "occurred_at": self.occurred_at}
        if self.detail_type.is_upload:
            detail |= {
                "tenant": self.tenant,
                "owner": self.owner,
                "upload_id": self.upload_id,
                "filename": self.filename,
                "via": self.via,
            }
        return detail | {"sha256": self.sha256, "size": self.size}


def event_id(*parts: str) -> str:
    """The same parts, the same id: a uuid5 of the record's key, its incarnation and its transition."""
    return str(uuid.uuid5(EVENT_NAMESPACE, "/".join(parts)))


def _incarnation(marker: str | None) -> tuple[str, ...]:
    """The part naming a record's incarnation: none for a record without one (its published ids stay)."""
    return () if marker is None else (f"i:{marker}",)


def upload_events(old: UploadRecord | None, new: UploadRecord | None, *, committed_at: str) -> list[OutcomeEvent]:
    """What one committed change of an upload record published: at most one event.

    Processed (stored or duplicate, once: an adoption later changes its status, not the outcome), deleted,
    expired, failed or rejected (a drop-zone object, recorded so at once); registering (pending) and the record's
    expiry (TTL) are no outcome."""
    if new is None or (old is not None and old.status == new.status):
        return []
    if new.status.processed:
        if old is not None and old.status.processed:
            return []  # a duplicate adopted as the stored copy: still the outcome it was counted as
        outcome = new.outcome or new.status
        kind = DetailType.UPLOAD_STORED if outcome == UploadStatus.STORED else DetailType.UPLOAD_DEDUPLICATED
        return [_upload_event(kind, new, "processed", new.processed_at or committed_at)]
    kind_of_ending = UPLOAD_ENDINGS.get(new.status)
    if kind_of_ending is None:
        return []
    at = {
        UploadStatus.DELETED: new.deleted_at,
        UploadStatus.FAILED: new.failed_at,
        UploadStatus.EXPIRED: new.expired_at,
        UploadStatus.REJECTED: new.failed_at,
    }.get(new.status)
    return [_upload_event(kind_of_ending, new, new.status.value, at or committed_at)]


def _upload_event(kind: DetailType, upload: UploadRecord, transition: str, at: str) -> OutcomeEvent:
    return OutcomeEvent(
        detail_type=kind,
        event_id=event_id("upload", upload.upload_id, *_incarnation(upload.incarnation), transition),
        occurred_at=at,
        sha256=upload.hash or upload.sha256,
        size=upload.size,
        tenant=upload.tenant,
        owner=upload.owner,
        upload_id=upload.upload_id,
        filename=upload.filename,
        via=upload.via.value if upload.via is not None else None,
    )


def file_events(old: FileRecord | None, new: FileRecord | None, *, committed_at: str) -> list[OutcomeEvent]:
    """What one committed change of a content's record published: its generation stored (created, or a
    tombstoned content stored anew by an upload's own bytes) or its record reaped. Counts, adoption of another
    copy, a `lost` mark change no outcome."""
    if new is not None and (old is None or new.generation > old.generation):
        at = (new.created_at if old is None else new.last_upload_at) or committed_at
        return [_file_event(DetailType.FILE_STORED, new, "stored", at)]
    if new is None and old is not None:
        return [_file_event(DetailType.FILE_REMOVED, old, "removed", committed_at)]
    return []


def _file_event(kind: DetailType, file: FileRecord, transition: str, at: str) -> OutcomeEvent:
    return OutcomeEvent(
        detail_type=kind,
        event_id=event_id("file", file.hash, *_incarnation(file.incarnation), str(file.generation), transition),
        occurred_at=at,
        sha256=file.hash,
        size=file.size,
    )
