"""The deletes aggregate (dfd.adapters.dynamo.deletes): one transaction per delete."""

from __future__ import annotations

from datetime import datetime

from dfd.core import clock
from dfd.core.conflicts import (
    DeleteRaced,
    ReferenceMissing,
)
from dfd.core.records import (
    UploadStatus,
)
from dfd.deletes.ports import UploadDeletion
from tests.unit.fakes.base import FakeTables


class FakeDeletes(FakeTables):
    # ---------------------------------------------------------------- deletes
    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """The adapter's one transaction, reading nothing first: the status condition (DeleteRaced) is checked before
        the counts' (ReferenceMissing), each count conditioned on being above 0; both marked for the reaper."""
        self._begin(counter_shard)
        upload = self.uploads.get(deletion.upload_id)
        file = self.files.get(deletion.hash)
        ref = None if deletion.tenant is None else self.tenant_refs.get((deletion.tenant, deletion.hash))
        if upload is None or upload.get("status") != deletion.status:
            raise DeleteRaced(None)
        if deletion.tenant is not None and (ref is None or int(ref.get("upload_count", 0)) <= 0):
            raise ReferenceMissing(None)
        if file is None or int(file.get("live_refs", 0)) <= 0:
            raise ReferenceMissing(None)
        stamp = clock.iso(now)
        upload.update(status=UploadStatus.DELETED.value, deleted_at=stamp)
        if ref is not None:
            ref["upload_count"] -= 1
            ref.update(reap_after=stamp)
            ref.setdefault("reap_shard", "t#0")
        file["live_refs"] -= 1
        file["reap_after"] = clock.iso(clock.plus(now, seconds=self.settings.delete_grace_seconds))
        file.setdefault("tombstone_shard", "t#0")
        self._count(counter_shard, deleted_uploads=1)
