"""The deletes aggregate: a processed upload's reference removed, in ONE transaction that reads nothing first."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from dfd.adapters.dynamo.base import Plan, Store, to_attr, to_item
from dfd.adapters.dynamo.references import REFERENCED
from dfd.core import clock
from dfd.core.conflicts import DeleteRaced, ReferenceMissing
from dfd.core.records import UploadStatus
from dfd.ingest import codec as ingest_codec
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from dfd.deletes.ports import UploadDeletion


class Deletes(Store):
    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """The upload, its tenant's reference, the content's live count and a counter shard, in ONE transaction that
        reads nothing first: both counts are decremented conditioned on being above 0 and marked for the reaper
        (the content's sparse ReapIndex: `tombstone_shard`, `reap_after` = now + the grace period, so the grace
        runs from the last delete; the reference's: `reap_shard`, `reap_after` = now). The role names order the
        refusal: the upload's status first (a concurrent delete of the same upload: read again, `already`)."""
        stamp = clock.iso(now)
        s = self._s
        plan = Plan()
        plan.add(
            "upload",
            {
                "Update": {
                    "TableName": s.uploads_table,
                    "Key": to_item(uploads_codec.upload_key(deletion.upload_id)),
                    "UpdateExpression": "SET #st = :deleted, deleted_at = :now",
                    "ConditionExpression": "#st = :read",
                    "ExpressionAttributeNames": {"#st": "status"},
                    "ExpressionAttributeValues": {
                        ":deleted": to_attr(UploadStatus.DELETED.value),
                        ":now": to_attr(stamp),
                        ":read": to_attr(deletion.status.value),
                    },
                }
            },
            DeleteRaced,
        )
        if deletion.tenant is not None:
            # at 0 the tenant no longer holds the content (TenantRef.holds); the reaper deletes the item
            plan.add(
                "reference",
                {
                    "Update": {
                        "TableName": s.tenant_files_table,
                        "Key": to_item(ingest_codec.tenant_ref_key(deletion.tenant, deletion.hash)),
                        "UpdateExpression": "ADD upload_count :minus"
                        " SET reap_after = :now, reap_shard = if_not_exists(reap_shard, :shard)",
                        "ConditionExpression": "upload_count > :zero",
                        "ExpressionAttributeValues": {
                            ":minus": to_attr(-1),
                            ":zero": to_attr(0),
                            ":now": to_attr(stamp),
                            ":shard": to_attr(f"t#{self._rng.randrange(s.pending_shards)}"),
                        },
                    }
                },
                ReferenceMissing,
            )
        # at 0 the content is tombstoned (FileRecord.tombstoned); the reaper frees it after the grace period
        plan.add(
            "content",
            {
                "Update": {
                    "TableName": s.files_table,
                    "Key": to_item(ingest_codec.file_key(deletion.hash)),
                    "UpdateExpression": "ADD live_refs :minus"
                    " SET reap_after = :reap, tombstone_shard = if_not_exists(tombstone_shard, :shard)",
                    "ConditionExpression": REFERENCED,
                    "ExpressionAttributeValues": {
                        ":minus": to_attr(-1),
                        ":zero": to_attr(0),
                        ":reap": to_attr(clock.iso(clock.plus(now, seconds=s.delete_grace_seconds))),
                        ":shard": to_attr(f"t#{self._rng.randrange(s.pending_shards)}"),
                    },
                }
            },
            ReferenceMissing,
        )
        plan.add("counters", self._add_counters_item(counter_shard, {"deleted_uploads": 1}))
        self._run(plan)
