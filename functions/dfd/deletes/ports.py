"""The deletes aggregate's port: what the delete service reads and writes through the repository
(dfd.adapters.dynamo.deletes), and the payload of its transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dfd.core.reads import UploadReads
from dfd.uploads.ports import UploadCancels

if TYPE_CHECKING:
    from dfd.core.records import UploadStatus


@dataclass(frozen=True)
class UploadDeletion:
    """Deleting a processed upload, as read from its record alone: its status (the delete is conditioned on it),
    its content and its tenant (None: the upload has no tenant). Nothing else is read: the counts are decremented
    in the transaction, conditioned on being above 0."""

    upload_id: str
    status: UploadStatus
    hash: str
    tenant: str | None


class DeleteStore(UploadReads, UploadCancels, Protocol):
    """What dfd.deletes.service reads and writes."""

    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """In one transaction, without reading the content or the reference: the upload `deleted` (status still as
        read), -1 on its tenant's reference (conditioned on a count above 0; marked for the reaper, which deletes
        it at 0), -1 live reference on the content (conditioned on a count above 0; marked for the reaper:
        `reap_after` = now + the grace period, so the grace runs from the last delete; at 0 the content is
        tombstoned), +1 `deleted_uploads`. Raises DeleteRaced (the status moved on) or ReferenceMissing."""
        ...
