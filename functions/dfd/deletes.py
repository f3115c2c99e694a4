"""DELETE /uploads/{id}: remove an upload's reference to its content, exactly once (issue 13).

* A processed upload (`stored`, `duplicate`) is ONE reference, counted on its tenant's reference item and on the
  content's live count (FileMetadata `live_refs`). Its delete is ONE transaction (Repository.commit_delete): the
  upload `deleted` (conditioned on the status read), -1 on the tenant's reference (deleted at its last), -1 on
  the live count — the last one TOMBSTONES the content (a new generation; the reaper frees the bytes after the
  grace period) — and `deleted_uploads` +1. A condition that no longer holds (a concurrent delete or upload)
  cancels it and the delete reads again (bounded, with backoff).
* An upload holding no reference (`pending`, `expired`, `failed`) is cancelled: status `deleted`, nothing
  counted; a pending multipart upload is aborted in S3 first (MultipartService.abort). An object that still
  arrives for it is deleted by the ingest and counted nowhere.
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

from dfd import clock
from dfd.config import Settings
from dfd.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from dfd.identity import Caller
from dfd.ids import is_upload_id
from dfd.multipart import MultipartService
from dfd.observability import logger
from dfd.ports import DeleteRaced, Item, Repository, UploadDeletion

MAX_ATTEMPTS = 8
PROCESSED = ("stored", "duplicate")
UNREFERENCED = ("pending", "expired", "failed")
DELETED = "deleted"


@dataclass(frozen=True)
class DeleteResult:
    upload_id: str
    outcome: str  # deleted (a reference removed), cancelled (none held), already (deleted before)
    tombstoned: bool = False  # the last reference: the content awaits the reaper
    attempts: int = 1


class DeleteService:
    def __init__(
        self,
        settings: Settings,
        repo: Repository,
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
        self._sleep = sleep
        self._rng = rng or random.Random()

    def delete(self, caller: Caller, upload_id: str) -> DeleteResult:
        if not is_upload_id(upload_id):
            raise BadRequest("id must be a 32-character hex upload id", code="invalid_id")
        for attempt in range(1, MAX_ATTEMPTS + 1):
            record = self._owned(caller, upload_id)
            status = str(record.get("status"))
            if status == DELETED:
                return DeleteResult(upload_id, "already", attempts=attempt)
            if status in PROCESSED:
                try:
                    tombstoned = self._remove_reference(record)
                except (DeleteRaced, ServiceUnavailable):
                    self._backoff(attempt)
                    continue
                return DeleteResult(upload_id, "deleted", tombstoned, attempt)
            if status in UNREFERENCED:
                if self._cancel(caller, record):
                    return DeleteResult(upload_id, "cancelled", attempts=attempt)
                continue  # the status moved on (ingested, expired) between the read and the write: read again
            raise Conflict(f"an upload in status {status} cannot be deleted", code="not_deletable")
        raise ServiceUnavailable(f"the delete of upload {upload_id} did not commit after {MAX_ATTEMPTS} attempts")

    def _owned(self, caller: Caller, upload_id: str) -> Item:
        record = self._repo.get_upload(upload_id)
        if record is None:
            raise NotFound(f"no upload has id {upload_id}")
        if not caller.is_admin:
            if record.get("tenant") is None or record.get("tenant") != caller.tenant:
                raise NotFound(f"no upload has id {upload_id}")
            if record.get("owner") != caller.owner:
                raise Forbidden("the upload belongs to another user", code="not_owner")
        return record

    def _remove_reference(self, record: Item) -> bool:
        digest = str(record["hash"])
        tenant = record.get("tenant") if isinstance(record.get("tenant"), str) else None
        if tenant is not None:
            file, ref = self._repo.tenant_file(tenant, digest)
        else:
            file, ref = self._repo.get_file(digest, consistent=True), None
        if file is None or (tenant is not None and ref is None):
            # a processed upload's reference is counted until this very delete: never absent (the audit checks it)
            logger.error("processed upload without its references", extra={"upload_id": record["upload_id"]})
            raise ServiceUnavailable(f"upload {record['upload_id']} has no reference to remove")
        deletion = UploadDeletion(
            upload_id=str(record["upload_id"]),
            status=str(record["status"]),
            hash=digest,
            size=int(file.get("size", 0)),
            tenant=tenant,
            tenant_refs=None if ref is None else int(ref.get("upload_count", 0)),
            live_refs=int(file.get("live_refs", 0)),
            generation=int(file.get("generation", 0)),
            uploads=int(file.get("upload_count", 0)),
            stores=int(file.get("stores", 1)),
        )
        shard = self._rng.randrange(self._s.counter_shards)
        return self._repo.commit_delete(deletion, counter_shard=shard, now=self._now())

    def _cancel(self, caller: Caller, record: Item) -> bool:
        """An upload holding no reference becomes `deleted`; a pending multipart one is aborted in S3 first."""
        upload_id = str(record["upload_id"])
        if record.get("status") == "pending" and record.get("multipart") and not record.get("completed_at"):
            try:
                self._multipart.abort(caller, upload_id)
            except Conflict:  # completed or no longer pending meanwhile: read again
                return False
            return True
        return self._repo.cancel_upload(upload_id, str(record["status"]), self._now())

    def _backoff(self, attempt: int) -> None:
        self._sleep(min(1.0, 0.02 * 2**attempt) * (0.5 + self._rng.random()))
