"""A lost copy's adoption (dfd.ingest.service): a content the reconcile marked lost takes an uploaded object as its
copy — the file record points at it, the lost key's claim goes and the new key is claimed — in ONE transaction."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo.base import Plan, Store, to_attr, to_item
from dfd.core import clock
from dfd.core import codec as core_codec
from dfd.core.conflicts import CommitRefused, FileChanged, KeyClaimed, UploadTaken
from dfd.core.records import FileRecord, UploadStatus
from dfd.ingest import codec as ingest_codec
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from dfd.ingest.ports import ObjectVersion

_DELETED = UploadStatus.DELETED.value


class Adoption(Store):
    def adopt_copy(
        self, version: ObjectVersion, lost: FileRecord, now: datetime, *, upload_deleted: bool = False
    ) -> None:
        stamp = clock.iso(now)
        names = {"#h": "hash", "#k": "s3_key", "#e": "etag", "#b": "bucket", "#at": "adopted_at", "#st": "state"}
        values: dict[str, Any] = {
            ":key": to_attr(version.key),
            ":etag": to_attr(version.etag),
            ":bucket": to_attr(version.bucket),
            ":now": to_attr(stamp),
            ":lost": to_attr(lost.s3_key or ""),
        }
        condition = "attribute_exists(#h) AND #k = :lost"
        if lost.etag:
            values[":lost_etag"] = to_attr(lost.etag)
            condition += " AND #e = :lost_etag"
        plan = Plan()
        plan.add(
            "file",
            {
                "Update": {
                    "TableName": self._s.files_table,
                    "Key": to_item(ingest_codec.file_key(version.hash)),
                    "UpdateExpression": "SET #k = :key, #e = :etag, #b = :bucket, #at = :now REMOVE #st, lost_at",
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            FileChanged,
        )
        plan.add("lost_claim", self._drop_claim_item(lost.bucket or version.bucket, lost.s3_key or "", version.hash))
        if version.upload_id is None:
            plan.add("claim", self._put_claim_item(version.bucket, version.key, version.hash, stamp), KeyClaimed)
        else:  # the upload item carries the claim
            self._add_adopting_upload(plan, version, stamp, upload_deleted=upload_deleted)
        self._run(plan)

    def _add_adopting_upload(self, plan: Plan, version: ObjectVersion, stamp: str, *, upload_deleted: bool) -> None:
        """The adopted copy's upload item: its key claimed (never over another content's claim) and, unless the
        upload was deleted (terminal), stored — while the version that processed it is still this one."""
        assert version.upload_id is not None
        update = "SET #c = :h, claimed_at = :now"
        condition = "attribute_exists(upload_id) AND attribute_not_exists(#c)"
        names = {"#c": ingest_codec.CLAIM_HASH}
        values: dict[str, Any] = {":h": to_attr(version.hash), ":now": to_attr(stamp)}
        if not upload_deleted:  # a deleted upload stays deleted
            update += ", #s = :stored"
            condition += " AND #ek = :ek AND #s <> :deleted"
            names |= {"#s": "status", "#ek": "event_key"}
            values |= {
                ":stored": to_attr(UploadStatus.STORED.value),
                ":ek": to_attr(version.event_key),
                ":deleted": to_attr(_DELETED),
            }
        request = {
            "Update": {
                "TableName": self._s.uploads_table,
                "Key": to_item(uploads_codec.upload_key(version.upload_id)),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

        def claimed(item: core_codec.Item | None) -> CommitRefused | None:
            claim = ingest_codec.upload_claim(item)
            return KeyClaimed(claim) if claim is not None else None

        def taken(item: core_codec.Item | None) -> CommitRefused:
            return UploadTaken(uploads_codec.upload_record(item) if item is not None else None)

        plan.add("claim", request, claimed, parse=lambda item: item)
        plan.alias("upload", "claim", taken, parse=lambda item: item)
