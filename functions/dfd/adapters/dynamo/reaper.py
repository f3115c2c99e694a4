"""The end of contents and references (the reconcile's reaper, dfd.reconcile.service): the reaper's index pages, the
record and claim of a reaped generation, references at 0 deleted with their size released, and a content
whose every copy is gone marked lost."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo.base import Plan, Request, Store, conditional_write, to_attr, to_item
from dfd.core import clock
from dfd.core import codec as core_codec
from dfd.core.conflicts import CommitRefused
from dfd.ingest import codec as ingest_codec

if TYPE_CHECKING:
    from dfd.core.records import FileRecord, TenantRef
    from dfd.reconcile.ports import Cursor


class Reaper(Store):
    def due_contents(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[FileRecord], Cursor | None]:
        kwargs = self._due_query(self._s.files_table, "tombstone_shard", shard, now)

        def position(item: core_codec.Item) -> Cursor:
            return {name: str(item[name]) for name in ("tombstone_shard", "reap_after", "hash")}

        items, last = self._page("Query", self._db.query, kwargs, limit, start, position)
        return [ingest_codec.file_record(item) for item in items], last

    def due_references(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[TenantRef], Cursor | None]:
        kwargs = self._due_query(self._s.tenant_files_table, "reap_shard", shard, now)

        def position(item: core_codec.Item) -> Cursor:
            return {name: str(item[name]) for name in ("reap_shard", "reap_after", "tenant", "hash")}

        items, last = self._page("Query", self._db.query, kwargs, limit, start, position)
        return [ingest_codec.tenant_ref(item) for item in items], last

    def _due_query(self, table: str, shard_name: str, shard: int, now: datetime) -> dict[str, Any]:
        """A Query of a table's sparse ReapIndex (`shard_name` = t#<shard>, `reap_after` < now)."""
        return {
            "TableName": table,
            "IndexName": "ReapIndex",
            "KeyConditionExpression": "#shard = :shard AND reap_after <= :now",
            "ExpressionAttributeNames": {"#shard": shard_name},
            "ExpressionAttributeValues": {":shard": to_attr(f"t#{shard}"), ":now": to_attr(clock.iso(now))},
        }

    # ---------------------------------------------------------------- contents
    def forget_older_generation(self, file: FileRecord) -> bool:
        plan = Plan()
        plan.add(
            "file",
            {
                "Update": {
                    "TableName": self._s.files_table,
                    "Key": to_item(ingest_codec.file_key(file.hash)),
                    "UpdateExpression": "REMOVE reap_key, reap_etag",
                    "ConditionExpression": "reap_etag = :etag",
                    "ExpressionAttributeValues": {":etag": to_attr(file.reap_etag or "")},
                }
            },
        )
        plan.add("claim", self._drop_claim_item(file.bucket or self._s.bucket, file.reap_key or "", file.hash))
        return self._applied(plan)

    def unindex_content(self, file: FileRecord) -> bool:
        return self._update(
            self._s.files_table,
            ingest_codec.file_key(file.hash),
            "REMOVE tombstone_shard, reap_after",
            "live_refs > :zero AND attribute_not_exists(reap_key)",
        )

    def reap_content(self, file: FileRecord, *, counter_shard: int) -> bool:
        plan = Plan()
        plan.add(
            "file",
            {
                "Delete": {
                    "TableName": self._s.files_table,
                    "Key": to_item(ingest_codec.file_key(file.hash)),
                    "ConditionExpression": "live_refs = :zero AND #gen = :gen AND s3_key = :key"
                    " AND attribute_not_exists(reap_key)",
                    "ExpressionAttributeNames": {"#gen": "generation"},
                    "ExpressionAttributeValues": {
                        ":zero": to_attr(0),
                        ":gen": to_attr(file.generation),
                        ":key": to_attr(file.s3_key or ""),
                    },
                }
            },
        )
        plan.add("claim", self._drop_claim_item(file.bucket or self._s.bucket, file.s3_key or "", file.hash))
        deltas = {
            "total_files": -1,
            "total_bytes_stored": -file.size,
            "reaped_uploads": file.upload_count,
            "reaped_duplicates": file.duplicates,
            "reaped_saved": file.saved_bytes,
            "reaped_contents": 1,
            "reaped_bytes": file.size,
        }
        plan.add("counters", self._add_counters_item(counter_shard, deltas))
        return self._applied(plan)

    def mark_lost(self, file: FileRecord, now: datetime) -> bool:
        return self._update(
            self._s.files_table,
            ingest_codec.file_key(file.hash),
            "SET #st = :lost, lost_at = :now",
            "attribute_exists(#h) AND attribute_not_exists(#st) AND s3_key = :key AND live_refs > :zero",
            names={"#st": "state", "#h": "hash"},
            values={":lost": ingest_codec.LOST, ":now": clock.iso(now), ":key": file.s3_key or ""},
        )

    # ---------------------------------------------------------------- references
    def reap_reference(self, ref: TenantRef) -> bool:
        delete: Request = {
            "Delete": {
                "TableName": self._s.tenant_files_table,
                "Key": to_item(ingest_codec.tenant_ref_key(ref.tenant, ref.hash)),
                "ConditionExpression": "upload_count <= :zero",
                "ExpressionAttributeValues": {":zero": to_attr(0)},
            }
        }
        if not ref.size:  # nothing counted in the tenant's stored bytes
            return conditional_write(lambda: self._db.delete_item(**delete["Delete"]), "DeleteItem")
        plan = Plan()
        plan.add("tenant", delete)
        plan.add("usage", self._add_usage_item(ref.tenant, {"stored_bytes": -ref.size, "used_bytes": -ref.size}))
        return self._applied(plan)

    def unindex_reference(self, ref: TenantRef) -> bool:
        return self._update(
            self._s.tenant_files_table,
            ingest_codec.tenant_ref_key(ref.tenant, ref.hash),
            "REMOVE reap_shard, reap_after",
            "upload_count > :zero",
        )

    # ---------------------------------------------------------------- the writes' shapes
    def _applied(self, plan: Plan) -> bool:
        try:
            self._run(plan)
        except CommitRefused:
            return False
        return True

    def _update(
        self,
        table: str,
        key: core_codec.Item,
        update: str,
        condition: str,
        *,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> bool:
        """One conditional UpdateItem (`:zero` is 0); False when its condition fails."""
        request: dict[str, Any] = {
            "TableName": table,
            "Key": to_item(key),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":zero": to_attr(0)}
            | {name: to_attr(value) for name, value in (values or {}).items()},
        }
        if ":zero" not in condition:
            del request["ExpressionAttributeValues"][":zero"]
        if names:
            request["ExpressionAttributeNames"] = names
        return conditional_write(lambda: self._db.update_item(**request), "UpdateItem")
