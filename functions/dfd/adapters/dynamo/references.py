"""The items of a content's references that more than one commit writes: +1 upload on an existing file record (the
ingest's duplicate, the precheck's) and +1 upload on the uploader's tenant reference (every commit with a tenant)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo.base import Request, Store, to_attr, to_item
from dfd.ingest import codec as ingest_codec

if TYPE_CHECKING:
    from dfd.core import codec as core_codec
    from dfd.ingest.ports import TenantShare

# A file record that takes a new reference or gives one up: it has live references (not tombstoned). `:zero` is 0.
REFERENCED = "live_refs > :zero"


class References(Store):
    def _tenant_ref_item(self, tenant: TenantShare, digest: str, first: core_codec.Item, stamp: str) -> Request:
        """+1 upload on the tenant's reference to the content, conditioned on the item being exactly as the caller
        read (or assumed) it: absent (`attribute_not_exists`), at 0 (exists, count <= 0: awaiting the reaper, still
        counted in the tenant's `stored_bytes`) or held (count above 0) — so a race (a reference created, taken over
        or reaped meanwhile) is a TenantRefChanged and a new decision, never a size counted twice or not at all. A
        new reference (absent or at 0) takes `first` (the tenant's first filename, its `size`, dates...) anew; a held
        one keeps its own. Either leaves the reaper's index (a count above 0 is not the reaper's)."""
        names: dict[str, str] = {"#h": "hash", "#n": "upload_count", "#last": "last_upload_at"}
        values: dict[str, Any] = {":one": to_attr(1), ":now": to_attr(stamp)}
        parts = ["#last = :now"]
        for i, (name, value) in enumerate(first.items()):
            if value is None:
                continue
            names[f"#d{i}"] = name
            values[f":d{i}"] = to_attr(value)
            parts.append(f"#d{i} = :d{i}" if not tenant.held else f"#d{i} = if_not_exists(#d{i}, :d{i})")
        if tenant.held:
            condition = "attribute_exists(#h) AND #n > :zero"
        elif tenant.counted:
            condition = "attribute_exists(#h) AND #n <= :zero"
        else:
            condition = "attribute_not_exists(#h)"
        if ":zero" in condition:  # DynamoDB refuses a value no expression uses (ValidationException)
            values[":zero"] = to_attr(0)
        return {
            "Update": {
                "TableName": self._s.tenant_files_table,
                "Key": to_item(ingest_codec.tenant_ref_key(tenant.tenant, digest)),
                "UpdateExpression": "SET " + ", ".join(parts) + " ADD #n :one REMOVE reap_shard, reap_after",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _count_duplicate_file_item(
        self, digest: str, key: str | None, stamp: str, *, lost_too: bool = False
    ) -> Request:
        """+1 upload (and +1 live reference) on an existing file record — never the record
        whose object IS this key; only LIVE content: a live count above 0 (at 0 the content is tombstoned and is
        resurrected instead). `lost_too` (the ingest's duplicate): also a content the reconcile marked lost — the
        ingest then adopts this upload's copy; the precheck never counts one (it answers 409 only for content
        whose copy exists)."""
        condition = "attribute_exists(#h) AND " + REFERENCED
        values: dict[str, Any] = {
            ":one": to_attr(1),
            ":now": to_attr(stamp),
            ":zero": to_attr(0),
        }
        names = {"#h": "hash"}
        if not lost_too:
            condition += " AND (attribute_not_exists(#state) OR #state <> :lost)"
            values[":lost"] = to_attr(ingest_codec.LOST)
            names["#state"] = "state"
        if key is not None:
            condition += " AND s3_key <> :key"
            values[":key"] = to_attr(key)
        return {
            "Update": {
                "TableName": self._s.files_table,
                "Key": to_item(ingest_codec.file_key(digest)),
                "UpdateExpression": "ADD upload_count :one, live_refs :one SET last_upload_at = :now",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
