"""DELETE /uploads/{id}: remove an upload's reference to its content, exactly once.

* A processed upload (`stored`, `duplicate`) is ONE reference, counted on its tenant's reference item and on the
  content's live count (FileMetadata `live_refs`). Its delete is TWO calls: the upload's record read (GetItem),
  then ONE transaction (DeleteStore.commit_delete) that reads nothing else: the upload `deleted` (conditioned on
  the status read), -1 on the tenant's reference and -1 on the live count (each conditioned on being above 0,
  each marked for the reaper), `deleted_uploads` +1. A content whose count reaches 0 is TOMBSTONED — derived from
  the count, nothing else is written — and the reaper frees its bytes `DeleteGraceSeconds` after the last delete;
  a reference at 0 means its tenant no longer holds the content, and the reaper deletes the item.
* The status condition is what makes a delete exactly once: a retry (after a lost response, or racing another
  delete of the same upload) reads again and answers `already`; a TransactionConflict is tried again after a pause
  (dfd.core.retry: throttling and transient errors are botocore's to retry; what it gives up on is a 503). A count
  that is not above 0 is a broken invariant: 503, logged — never retried into a wrong count.
* An upload holding no reference (`pending`, `expired`, `failed`) is cancelled: status `deleted`, nothing
  counted; a pending one's `quota_bytes` are released from its tenant's usage in the same transaction; a
  pending multipart upload is aborted in S3 first (MultipartService.abort). An object that still arrives for it
  is rejected by the ingest (deleted, counted only in `rejected_uploads`).
* Repeating a delete answers the same and changes nothing (the upload is `deleted` already).
* Who: the upload's owner or an admin; another tenant's (or an unknown) id → 404; another user of the same
  tenant → 403 `not_owner`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from dfd.core import clock
from dfd.core.conflicts import DeleteRaced, ReferenceMissing
from dfd.core.errors import Conflict, ServiceUnavailable, TransactionRetryable
from dfd.core.observability import logger
from dfd.core.records import UploadRecord, UploadStatus
from dfd.core.retry import CONFLICT_ATTEMPTS, Backoff
from dfd.deletes.ports import UploadDeletion
from dfd.queries.service import check_upload_id
from dfd.uploads.ownership import owned_upload

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.deletes.ports import DeleteStore
    from dfd.identity.caller import Caller
    from dfd.uploads.multipart import MultipartService

MAX_ATTEMPTS = CONFLICT_ATTEMPTS


@dataclass(frozen=True)
class DeleteResult:
    upload_id: str
    outcome: str  # deleted (a reference removed), cancelled (none held), already (deleted before)
    attempts: int = 1


class DeleteService:
    def __init__(
        self,
        settings: Settings,
        repo: DeleteStore,
        multipart: MultipartService,
        *,
        now: Callable[[], datetime] = clock.now,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._s = settings
        self._repo = repo
        self._multipart = multipart
        self._now = now
        self._rng = rng or random.Random()
        self._backoff = Backoff(sleep, self._rng)

    def delete(self, caller: Caller, upload_id: str) -> DeleteResult:
        check_upload_id(upload_id)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            record = self._owned(caller, upload_id)
            status = record.status
            if status == UploadStatus.DELETED:
                return DeleteResult(upload_id, "already", attempts=attempt)
            if status.processed:
                try:
                    self._remove_reference(record)
                except ReferenceMissing:
                    # a processed upload's references are counted until this very delete (the audit checks it):
                    # a count not above 0 is a broken invariant
                    logger.error("processed upload without its references", extra={"upload_id": upload_id})
                    raise ServiceUnavailable(f"upload {upload_id} has no reference to remove") from None
                except (DeleteRaced, TransactionRetryable):
                    if attempt < MAX_ATTEMPTS:
                        self._backoff(attempt)
                    continue
                return DeleteResult(upload_id, "deleted", attempt)
            if status.unreferenced:
                if self._cancel(caller, record):
                    return DeleteResult(upload_id, "cancelled", attempts=attempt)
                continue  # the status moved on (ingested, expired) between the read and the write: read again
            raise Conflict(f"an upload in status {status.value} cannot be deleted", code="not_deletable")
        raise ServiceUnavailable(f"the delete of upload {upload_id} did not commit after {MAX_ATTEMPTS} attempts")

    def _owned(self, caller: Caller, upload_id: str) -> UploadRecord:
        return owned_upload(self._repo, caller, upload_id, missing=f"no upload has id {upload_id}")

    def _remove_reference(self, record: UploadRecord) -> None:
        assert record.hash is not None, "a processed upload names its content"
        deletion = UploadDeletion(record.upload_id, record.status, record.hash, record.tenant)
        shard = self._rng.randrange(self._s.counter_shards)
        self._repo.commit_delete(deletion, counter_shard=shard, now=self._now())

    def _cancel(self, caller: Caller, record: UploadRecord) -> bool:
        """An upload holding no reference becomes `deleted`; a pending multipart one is aborted in S3 first."""
        if record.status == UploadStatus.PENDING and record.multipart and not record.completed_at:
            try:
                self._multipart.abort(caller, record.upload_id)
            except Conflict:  # completed or no longer pending meanwhile: read again
                return False
            return True
        # a pending upload's bytes counted against its tenant's quota are released in the same write
        return self._repo.cancel_upload(
            record.upload_id,
            record.status,
            self._now(),
            tenant=record.tenant,
            quota_bytes=record.quota_bytes,
            counted=not record.pending_uncounted,
        )
