"""The typed conflicts of the repository's writes (each feature's port): a write refused by one of its
conditions raises the one that says which, carrying the record that stood in the way (dfd.core.records) as the store
returned it, or None."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfd.core.errors import DfdError

if TYPE_CHECKING:
    from dfd.core.records import EventRecord, FileRecord, KeyClaim, PrecheckCount, TenantRef, TenantUsage, UploadRecord


class CommitRefused(DfdError):
    """A write was refused by one of its conditions. Raised as such only when no known condition explains it
    (the caller backs off and retries); otherwise as one of the subclasses, which say which condition failed."""

    status = 409
    code = "transaction_cancelled"

    item: object | None

    def __init__(self, item: object | None = None, message: str | None = None) -> None:
        super().__init__(message or self.__doc__ or type(self).__name__)
        self.item = item


class EventRecorded(CommitRefused):
    """This object version's event is already recorded (item: the event record)."""

    item: EventRecord | None


class KeyClaimed(CommitRefused):
    """The object key holds a stored copy (item: the key's claim, with the hash stored there)."""

    item: KeyClaim | None


class FileChanged(CommitRefused):
    """The file record for the content is not what the write assumed (item: the record now, or None)."""

    item: FileRecord | None


class FileAppeared(FileChanged):
    """Storing new content: a file record for it exists already (item: that record)."""


class FileVanished(FileChanged):
    """Counting a duplicate: the file record for the content is gone (item: None)."""


class FileIsThisObject(FileChanged):
    """Counting a duplicate: the file record's stored copy IS this object (item: that record)."""


class ReapPending(CommitRefused):
    """Resurrecting tombstoned content: an older generation's object still awaits the reaper (item: the record);
    the ingest backs off and its message is retried (the reaper frees the slot after the grace period)."""

    item: FileRecord | None


class UploadTaken(CommitRefused):
    """The upload was already processed by another object version (item: the upload record)."""

    item: UploadRecord | None


class PendingReleased(CommitRefused):
    """The upload's quota bytes were released meanwhile (the reconcile marked it expired or failed): commit
    again without releasing them (item: the upload record)."""

    item: UploadRecord | None


class TenantRefChanged(CommitRefused):
    """The tenant's reference to the content is not as the write assumed (absent, at 0, or held): item is the
    reference as it is now (None: absent); the ingest decides again from it (TenantShare.of)."""

    item: TenantRef | None


class DeleteRaced(CommitRefused):
    """Deleting an upload: its status is no longer the one read (a concurrent delete or ingest; item: None; the
    caller reads again)."""


class ReferenceMissing(CommitRefused):
    """Deleting a processed upload: the content's live count or its tenant's reference count is not above 0 (or
    the item is absent) — a broken invariant, never a race."""


class PrecheckLimited(CommitRefused):
    """A precheck duplicate's bound refused it (item: the tenant's precheck count as it is: its window and count
    say whether the window is another one or full)."""

    item: PrecheckCount | None


class QuotaRefused(CommitRefused):
    """Registering an upload would exceed its tenant's quota (item: the tenant's usage item, or None)."""

    item: TenantUsage | None


class MultipartAttached(CommitRefused):
    """The upload already has its S3 multipart upload, or is no longer pending (item: the upload record)."""

    item: UploadRecord | None


class LeaseLost(CommitRefused):
    """The reconcile run no longer holds its lease (it expired and another run took it): this run stops."""
