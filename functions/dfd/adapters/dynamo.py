"""DynamoDB adapter: the only module that knows item layouts, keys, conditions and transaction shapes, and the
one that turns ClientError into domain errors.

The domain asks for intents (:class:`dfd.ports.Repository`); each write below builds its items here and, for a
transaction, a :class:`_Plan` that names the role of every item. DynamoDB reports cancellation reasons by
position; :meth:`_Plan.refusal` turns them into the typed conflict of the role whose condition failed (the
first in ``_PRECEDENCE``). A new item in a transaction is one more ``plan.add(role, request, conflict)``.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from dfd import clock
from dfd.config import Settings
from dfd.errors import DfdError, ServiceUnavailable, TransactionRetryable
from dfd.ids import key_claim
from dfd.ports import COUNTER_FIELDS as COUNTER_FIELDS
from dfd.ports import (
    LOST,
    CommitRefused,
    DeleteRaced,
    EventRecorded,
    FileAppeared,
    FileChanged,
    FileIsThisObject,
    FileVanished,
    KeyClaimed,
    MultipartAttached,
    NewMultipart,
    NewUpload,
    ObjectVersion,
    PendingReleased,
    PrecheckDuplicate,
    QuotaRefused,
    ReapPending,
    ReferenceMissing,
    TenantRefChanged,
    TenantShare,
    TenantUsage,
    UploadDeletion,
    UploadTaken,
    is_tombstoned,
)
from dfd.ports import IngestState as IngestState
from dfd.ports import Item as Item

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

# A file record that takes a new reference or gives one up: it has live references (not tombstoned). `:zero` is 0.
_REFERENCED = "live_refs > :zero"

_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
}
_RETRYABLE_REASONS = {
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "InternalError",
}


def to_attr(value: Any) -> dict[str, Any]:
    attr: dict[str, Any] = dict(_serializer.serialize(value))
    return attr


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def from_item(raw: Mapping[str, Any]) -> Item:
    out: Item = {}
    for key, attr in raw.items():
        value = _deserializer.deserialize(attr)
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[key] = value
    return out


class CancelledTransaction(DfdError):
    """A TransactWriteItems was cancelled by failed conditions; `reasons[i]` speaks of item i. Never leaves this
    module: :meth:`Repository._run` turns it into the plan's typed conflict."""

    status = 409
    code = "transaction_cancelled"

    def __init__(self, reasons: Sequence[tuple[str, Item | None]]) -> None:
        super().__init__("transaction cancelled: " + ", ".join(code for code, _ in reasons))
        self.reasons = list(reasons)

    def failed(self, index: int) -> bool:
        return index < len(self.reasons) and self.reasons[index][0] == "ConditionalCheckFailed"

    def item(self, index: int) -> Item | None:
        return self.reasons[index][1] if index < len(self.reasons) else None


def translate(error: ClientError | BotoCoreError, action: str) -> DfdError:
    """ClientError → domain error (the one place this mapping lives)."""
    if isinstance(error, BotoCoreError):
        return ServiceUnavailable(f"DynamoDB {action} failed: {error}")
    code = error.response.get("Error", {}).get("Code", "")
    if code == "TransactionCanceledException":
        reasons: list[tuple[str, Item | None]] = []
        for reason in error.response.get("CancellationReasons", []) or []:
            raw = reason.get("Item")
            reasons.append((reason.get("Code", "None") or "None", from_item(raw) if raw else None))
        if any(code in _RETRYABLE_REASONS for code, _ in reasons):
            return TransactionRetryable(f"DynamoDB {action} cancelled: {[c for c, _ in reasons]}")
        return CancelledTransaction(reasons)
    if code in _RETRYABLE_CODES:
        return ServiceUnavailable(f"DynamoDB {action} is throttled or unavailable ({code})")
    return DfdError(f"DynamoDB {action} failed ({code})", code="storage_error")


def _condition_failed(error: ClientError | BotoCoreError) -> bool:
    return isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") == (
        "ConditionalCheckFailedException"
    )


class Repository:
    """Reads and writes of the five tables (implements :class:`dfd.ports.Repository`). Receives its client; knows
    table and attribute names. `rng` spreads pending uploads over the pending index's shards."""

    def __init__(self, client: Any, settings: Settings, *, rng: random.Random | None = None) -> None:
        self._db = client
        self._s = settings
        self._rng = rng or random.Random()

    # ---------------------------------------------------------------- reads
    def _get(self, table: str, key: Item, *, consistent: bool = False) -> Item | None:
        try:
            response = self._db.get_item(TableName=table, Key=to_item(key), ConsistentRead=consistent)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetItem") from error
        raw = response.get("Item")
        return from_item(raw) if raw else None

    def get_file(self, digest: str, *, consistent: bool = False) -> Item | None:
        return self._get(self._s.files_table, {"hash": digest}, consistent=consistent)

    def get_upload(self, upload_id: str) -> Item | None:
        return self._get(self._s.uploads_table, {"upload_id": upload_id}, consistent=True)

    def get_event(self, event_key: str) -> Item | None:
        return self._get(self._s.events_table, {"event_key": event_key}, consistent=True)

    def get_claim(self, bucket: str, key: str) -> Item | None:
        return self.get_event(key_claim(bucket, key))

    def _batch_get(self, request: dict[str, Any]) -> dict[str, list[Item]]:
        """BatchGetItem with UnprocessedKeys retried (bounded, with backoff)."""
        found: dict[str, list[Item]] = {table: [] for table in request}
        pending = request
        for attempt in range(8):
            try:
                response = self._db.batch_get_item(RequestItems=pending)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "BatchGetItem") from error
            for table, items in response.get("Responses", {}).items():
                found[table].extend(from_item(item) for item in items)
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                return found
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise ServiceUnavailable("DynamoDB BatchGetItem left keys unprocessed after retries")

    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        """Everything the ingest decision needs, in ONE consistent BatchGetItem (up to four tables)."""
        s = self._s
        request: dict[str, Any] = {
            s.events_table: {"Keys": [to_item({"event_key": event_key})], "ConsistentRead": True},
            s.files_table: {"Keys": [to_item({"hash": digest})], "ConsistentRead": True},
        }
        if upload_id is not None:
            request[s.uploads_table] = {"Keys": [to_item({"upload_id": upload_id})], "ConsistentRead": True}
            if tenant_hint is not None:
                ref = to_item({"tenant": tenant_hint, "hash": digest})
                request[s.tenant_files_table] = {"Keys": [ref], "ConsistentRead": True}
        found = self._batch_get(request)

        def first(table: str) -> Item | None:
            items = found.get(table, [])
            return items[0] if items else None

        return IngestState(
            first(s.events_table), first(s.files_table), first(s.uploads_table), first(s.tenant_files_table)
        )

    def tenant_file(self, tenant: str, digest: str) -> tuple[Item | None, Item | None]:
        """The file record and the tenant's reference to it, in ONE consistent BatchGetItem."""
        s = self._s
        found = self._batch_get(
            {
                s.files_table: {"Keys": [to_item({"hash": digest})], "ConsistentRead": True},
                s.tenant_files_table: {"Keys": [to_item({"tenant": tenant, "hash": digest})], "ConsistentRead": True},
            }
        )
        files, refs = found[s.files_table], found[s.tenant_files_table]
        return (files[0] if files else None), (refs[0] if refs else None)

    def counter_totals(self) -> dict[str, int]:
        """Sum of every counter shard: ONE BatchGetItem (shards ≤ 100), never a Scan."""
        keys = [to_item({"counter_id": shard}) for shard in self._s.shard_ids]
        found = self._batch_get({self._s.counters_table: {"Keys": keys, "ConsistentRead": False}})
        totals = dict.fromkeys(COUNTER_FIELDS, 0)
        for item in found[self._s.counters_table]:
            for name in COUNTER_FIELDS:
                totals[name] += int(item.get(name, 0))
        return totals

    def tenant_usage(self, tenant: str) -> TenantUsage:
        return TenantUsage.from_item(self._get(self._s.counters_table, usage_key(tenant), consistent=True))

    def scan_files(self, limit: int, start_key: dict[str, str] | None) -> tuple[list[Item], dict[str, str] | None]:
        """One page of at most `limit` file records, and where the next page starts (None on the last page).

        DynamoDB returns a LastEvaluatedKey whenever a Scan stops at its Limit, even on the table's last item,
        which would give the last full page a token to an empty page. So one item more is read: the next page
        starts after this page's last item only when that item exists. A page cut short by DynamoDB's 1 MB
        limit keeps DynamoDB's own key."""
        kwargs: dict[str, Any] = {"TableName": self._s.files_table}
        return self._page("Scan", self._db.scan, kwargs, limit, start_key, lambda item: {"hash": str(item["hash"])})

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[Item], dict[str, str] | None]:
        """A Query of the sparse OwnerIndex (owner, created_at), newest first; one item more than `limit` tells
        whether a next page exists (as scan_files does)."""
        kwargs: dict[str, Any] = {
            "TableName": self._s.uploads_table,
            "IndexName": "OwnerIndex",
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": to_attr(owner)},
            "ScanIndexForward": False,
        }

        def position(item: Item) -> dict[str, str]:
            return {"owner": owner, "created_at": str(item["created_at"]), "upload_id": str(item["upload_id"])}

        return self._page("Query", self._db.query, kwargs, limit, start_key, position)

    @staticmethod
    def _page(
        action: str,
        call: Callable[..., Any],
        kwargs: dict[str, Any],
        limit: int,
        start_key: dict[str, str] | None,
        position: Callable[[Item], dict[str, str]],
    ) -> tuple[list[Item], dict[str, str] | None]:
        """One page of a Scan or Query and the key of the next (`position` of an item), reading one item more
        than `limit` (scan_files says why); a page cut short by DynamoDB's 1 MB limit keeps DynamoDB's key."""
        kwargs = {**kwargs, "Limit": limit + 1}
        if start_key:
            kwargs["ExclusiveStartKey"] = to_item(start_key)
        try:
            response = call(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, action) from error
        items = [from_item(i) for i in response.get("Items", [])]
        if len(items) > limit:
            items = items[:limit]
            return items, position(items[-1])
        last = response.get("LastEvaluatedKey")
        return items, (position(from_item(last)) if last else None)

    # ---------------------------------------------------------------- writes (intents of dfd.ports.Repository)
    def register_upload(self, upload: NewUpload, now: datetime, *, extra: Item | None = None) -> None:
        """`extra`: more attributes of the same record (register_multipart_upload's)."""
        s = self._s
        record = {
            "upload_id": upload.upload_id,
            "status": "pending",
            "filename": upload.filename,
            "size": upload.size,
            "content_type": upload.content_type,
            "sha256": upload.sha256,
            "s3_key": upload.key,
            "bucket": upload.bucket,
            "created_at": clock.iso(now),
            "expires_at": clock.iso(upload.expires_at),
            "reconcile_after": clock.iso(clock.plus(now, seconds=s.reconcile_grace_seconds)),
            "pending_shard": f"p#{self._rng.randrange(s.pending_shards)}",
            "ttl": clock.epoch(clock.plus(now, days=s.upload_ttl_days)),
            "owner": upload.owner,
            "tenant": upload.tenant,
        }
        record.update(extra or {})
        self._register_counted(upload, record)

    def _register_counted(self, upload: NewUpload, record: Item) -> None:
        """The upload record and its count against the tenant's quota, in ONE transaction: the conditional ADD
        on the tenant's usage item is the quota check (docs/design.md, "Quotas")."""
        s = self._s
        if s.tenant_quota_bytes and upload.size > s.tenant_quota_bytes:
            raise QuotaRefused(self._get(s.counters_table, usage_key(upload.tenant), consistent=True))
        put = {
            "Put": {
                "TableName": s.uploads_table,
                "Item": to_item({**record, "quota_bytes": upload.size}),
                "ConditionExpression": "attribute_not_exists(upload_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        plan = _Plan(identity="upload")  # a lost response, retried: recognised by the record it put
        plan.add("upload", put)
        plan.add("usage", self._count_pending_item(upload.tenant, upload.size), QuotaRefused)
        self._run(plan)

    def _count_pending_item(self, tenant: str, size: int) -> dict[str, Any]:
        """+1 pending upload of `size` bytes on the tenant's usage item, conditioned on the quota (DynamoDB
        conditions have no arithmetic: `used_bytes` = pending + stored is kept for this comparison)."""
        s = self._s
        values: dict[str, Any] = {":one": to_attr(1), ":size": to_attr(size), ":tenant": to_attr(tenant)}
        names = {"#tn": "tenant"}
        conditions: list[str] = []
        if s.tenant_pending_limit:
            conditions.append("(attribute_not_exists(pending_count) OR pending_count < :pending_limit)")
            values[":pending_limit"] = to_attr(s.tenant_pending_limit)
        if s.tenant_quota_bytes:
            conditions.append("(attribute_not_exists(used_bytes) OR used_bytes <= :room)")
            values[":room"] = to_attr(s.tenant_quota_bytes - size)
        update: dict[str, Any] = {
            "TableName": s.counters_table,
            "Key": to_item(usage_key(tenant)),
            "UpdateExpression": "SET #tn = :tenant ADD pending_count :one, pending_bytes :size, used_bytes :size",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if conditions:
            update["ConditionExpression"] = " AND ".join(conditions)
        return {"Update": update}

    def _add_usage_moves(self, plan: _Plan, tenant: TenantShare | None, version: ObjectVersion) -> None:
        """An ingest's commit on the uploader's usage item: the pending upload's bytes leave `pending` and, when
        the commit creates the tenant's reference item, its size joins `stored` (stored_bytes = the sizes of the
        tenant's reference items that exist: a content counts once per tenant; a reference at 0 taken over is
        counted already, the reaper subtracts it when it deletes one). Never conditioned: an object already
        uploaded is never refused for a quota (the reference's own condition says whether it is created)."""
        if tenant is None:
            return
        stored = 0 if tenant.counted else version.size
        deltas = {"stored_bytes": stored, "used_bytes": stored - tenant.pending_bytes}
        if tenant.pending_bytes:
            deltas |= {"pending_count": -1, "pending_bytes": -tenant.pending_bytes}
        deltas = {name: delta for name, delta in deltas.items() if delta}
        if not deltas:
            return
        names = {f"#u{i}": name for i, name in enumerate(deltas)} | {"#tn": "tenant"}
        values = {f":u{i}": to_attr(delta) for i, delta in enumerate(deltas.values())}
        values[":tenant"] = to_attr(tenant.tenant)
        adds = ", ".join(f"#u{i} :u{i}" for i in range(len(deltas)))
        request = {
            "Update": {
                "TableName": self._s.counters_table,
                "Key": to_item(usage_key(tenant.tenant)),
                "UpdateExpression": f"SET #tn = :tenant ADD {adds}",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        plan.add("usage", request)

    # ---------------------------------------------------------------- multipart (dfd.multipart)
    def register_multipart_upload(self, upload: NewUpload, multipart: NewMultipart, now: datetime) -> None:
        """A pending upload record with `multipart`, `owner`, `tenant`, `part_size`, `part_count`; its
        `s3_upload_id` (never shown to clients) and `part_checksums` come with the first parts call."""
        extra = {
            "multipart": True,
            "owner": multipart.owner,
            "tenant": multipart.tenant,
            "part_size": multipart.part_size,
            "part_count": multipart.part_count,
        }
        self.register_upload(upload, now, extra=extra)

    def attach_s3_upload(self, upload_id: str, s3_upload_id: str, *, part_checksums: bool) -> None:
        try:
            self._db.update_item(
                TableName=self._s.uploads_table,
                Key=to_item({"upload_id": upload_id}),
                UpdateExpression="SET s3_upload_id = :id, part_checksums = :checksums",
                ConditionExpression="attribute_exists(upload_id) AND attribute_not_exists(s3_upload_id)"
                " AND #status = :pending",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":id": to_attr(s3_upload_id),
                    ":checksums": to_attr(part_checksums),
                    ":pending": to_attr("pending"),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if _condition_failed(error):
                raw: Any = error.response.get("Item") if isinstance(error, ClientError) else None
                raise MultipartAttached(from_item(raw) if raw else None) from error
            raise translate(error, "UpdateItem") from error

    def mark_multipart_completed(self, upload_id: str, now: datetime) -> None:
        try:
            self._db.update_item(
                TableName=self._s.uploads_table,
                Key=to_item({"upload_id": upload_id}),
                UpdateExpression="SET completed_at = if_not_exists(completed_at, :now)",
                ConditionExpression="attribute_exists(upload_id)",
                ExpressionAttributeValues={":now": to_attr(clock.iso(now))},
            )
        except (ClientError, BotoCoreError) as error:
            if not _condition_failed(error):  # the record is gone (TTL): nothing to note
                raise translate(error, "UpdateItem") from error

    def end_pending_upload(
        self, upload_id: str, status: str, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        """status = `status`, out of the pending index (the TTL stays: the record ages out as usual)."""
        # a deleted (cancelled) upload also says when, as DELETE /uploads/{id} shows it (dfd.deletes)
        update = "SET #status = :status, ended_at = :now" + (", deleted_at = :now" if status == "deleted" else "")
        return self._end_upload(upload_id, update, "pending", status, now, tenant, quota_bytes)

    # ---------------------------------------------------------------- deletes (dfd.deletes)
    def cancel_upload(
        self, upload_id: str, status: str, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        """status `deleted` + `deleted_at`, out of the pending index, only while the status is still `status`."""
        return self._end_upload(
            upload_id, "SET #status = :status, deleted_at = :now", status, "deleted", now, tenant, quota_bytes
        )

    def _end_upload(
        self, upload_id: str, update: str, read: str, status: str, now: datetime, tenant: str | None, quota_bytes: int
    ) -> bool:
        """An upload that holds no reference ends (`update`, conditioned on its status still `read`, out of the
        pending index). One still counted against its tenant's quota (`tenant`, `quota_bytes` > 0: as read from its
        record) releases those bytes in the same transaction, conditioned on the record still holding them (as
        the reconcile's expire does); False when a condition fails (the caller reads again)."""
        request: dict[str, Any] = {
            "TableName": self._s.uploads_table,
            "Key": to_item({"upload_id": upload_id}),
            "UpdateExpression": update + " REMOVE pending_shard",
            "ConditionExpression": "#status = :read",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":status": to_attr(status),
                ":now": to_attr(clock.iso(now)),
                ":read": to_attr(read),
            },
        }
        if tenant is not None and quota_bytes > 0:
            request["UpdateExpression"] += ", quota_bytes"
            request["ConditionExpression"] += " AND quota_bytes = :quota"
            request["ExpressionAttributeValues"][":quota"] = to_attr(quota_bytes)
            plan = _Plan()
            plan.add("upload", {"Update": request})
            plan.add("usage", self._release_pending_item(tenant, quota_bytes))
            try:
                self._run(plan)
            except CommitRefused:
                return False
            return True
        try:
            self._db.update_item(**request)
        except (ClientError, BotoCoreError) as error:
            if _condition_failed(error):
                return False
            raise translate(error, "UpdateItem") from error
        return True

    def _release_pending_item(self, tenant: str, quota_bytes: int) -> dict[str, Any]:
        """-1 pending upload of `quota_bytes` on the tenant's usage item (never conditioned)."""
        return {
            "Update": {
                "TableName": self._s.counters_table,
                "Key": to_item(usage_key(tenant)),
                "UpdateExpression": "ADD pending_count :minus, pending_bytes :release, used_bytes :release",
                "ExpressionAttributeValues": {":minus": to_attr(-1), ":release": to_attr(-quota_bytes)},
            }
        }

    def commit_delete(self, deletion: UploadDeletion, *, counter_shard: int, now: datetime) -> None:
        """The upload, its tenant's reference, the content's live count and a counter shard, in ONE transaction that
        reads nothing first: both counts are decremented conditioned on being above 0 and marked for the reaper
        (the content's sparse ReapIndex: `tombstone_shard`, `reap_after` = now + the grace period, so the grace
        runs from the last delete; the reference's: `reap_shard`, `reap_after` = now). The role names order the
        refusal: the upload's status first (a concurrent delete of the same upload: read again, `already`)."""
        stamp = clock.iso(now)
        s = self._s
        plan = _Plan()
        plan.add(
            "upload",
            {
                "Update": {
                    "TableName": s.uploads_table,
                    "Key": to_item({"upload_id": deletion.upload_id}),
                    "UpdateExpression": "SET #st = :deleted, deleted_at = :now",
                    "ConditionExpression": "#st = :read",
                    "ExpressionAttributeNames": {"#st": "status"},
                    "ExpressionAttributeValues": {
                        ":deleted": to_attr("deleted"),
                        ":now": to_attr(stamp),
                        ":read": to_attr(deletion.status),
                    },
                }
            },
            DeleteRaced,
        )
        if deletion.tenant is not None:
            # at 0 the tenant no longer holds the content (dfd.ports.holds); the reaper deletes the item
            plan.add(
                "reference",
                {
                    "Update": {
                        "TableName": s.tenant_files_table,
                        "Key": to_item({"tenant": deletion.tenant, "hash": deletion.hash}),
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
        # at 0 the content is tombstoned (dfd.ports.is_tombstoned); the reaper frees it after the grace period
        plan.add(
            "content",
            {
                "Update": {
                    "TableName": s.files_table,
                    "Key": to_item({"hash": deletion.hash}),
                    "UpdateExpression": "ADD live_refs :minus"
                    " SET reap_after = :reap, tombstone_shard = if_not_exists(tombstone_shard, :shard)",
                    "ConditionExpression": _REFERENCED,
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

    # ---------------------------------------------------------------- writes, continued
    def record_event(self, version: ObjectVersion, outcome: str, now: datetime) -> bool:
        item = to_item(self._event_record(version, outcome, now))
        try:
            self._db.put_item(
                TableName=self._s.events_table,
                Item=item,
                ConditionExpression="attribute_not_exists(event_key)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if _already_put(error, item):
                return True  # our own put, applied before its response was lost
            if isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") == (
                "ConditionalCheckFailedException"
            ):
                return False
            raise translate(error, "PutItem") from error
        return True

    def commit_stored(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        stamp = clock.iso(now)
        record = {
            "hash": version.hash,
            "size": version.size,
            "content_type": content_type,
            "filename": filename,
            "s3_key": version.key,
            "bucket": version.bucket,
            "etag": version.etag,
            "created_at": stamp,
            "last_upload_at": stamp,
            "upload_count": 1,
            "first_upload_id": version.upload_id,
        }
        # one live reference (deletes); its generations stored, and the bytes its duplicates saved (the reaper moves
        # them into the counters' history: saved_bytes = (upload_count - stores) x size, kept as it grows)
        record.update(live_refs=1, generation=1, stores=1, saved_bytes=0)
        plan = _Plan(identity="event")
        plan.add("event", self._put_event_item(self._committed_event(version, "stored", now)), EventRecorded)
        plan.add("file", self._put_new_file_item(record), FileAppeared)
        plan.add("claim", self._put_claim_item(key_claim(version.bucket, version.key), version.hash, stamp), KeyClaimed)
        self._add_finish_upload(plan, version, "stored", "stored", filename, content_type, stamp, tenant)
        self._add_tenant_ref(plan, tenant, version, filename, content_type, stamp)
        self._add_usage_moves(plan, tenant, version)
        deltas = {"total_uploads": 1, "total_files": 1, "total_bytes_stored": version.size}
        plan.add("counters", self._add_counters_item(counter_shard, deltas))
        self._run(plan)

    def commit_duplicate(
        self,
        version: ObjectVersion,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        stamp = clock.iso(now)

        def file_changed(item: Item | None) -> CommitRefused:
            if item is None:
                return FileVanished(None)
            return FileIsThisObject(item) if item.get("s3_key") == version.key else FileChanged(item)

        plan = _Plan(identity="event")
        plan.add("event", self._put_event_item(self._committed_event(version, "duplicate", now)), EventRecorded)
        counted = self._count_duplicate_file_item(version.hash, version.key, stamp, version.size, lost_too=True)
        plan.add("file", counted, file_changed)
        # never delete bytes some record stores at this key
        plan.add("claim", self._no_claim_item(key_claim(version.bucket, version.key)), KeyClaimed)
        # physically a duplicate; for an uploader whose tenant did not hold the content, its upload is stored
        status = "stored" if tenant is not None and not tenant.held else "duplicate"
        self._add_finish_upload(plan, version, status, "duplicate", filename, content_type, stamp, tenant)
        self._add_tenant_ref(plan, tenant, version, filename, content_type, stamp)
        self._add_usage_moves(plan, tenant, version)
        deltas = {"total_uploads": 1, "duplicates_avoided": 1, "total_s3_size_saved": version.size}
        plan.add("counters", self._add_counters_item(counter_shard, deltas))
        self._run(plan)

    def commit_resurrect(
        self,
        version: ObjectVersion,
        tombstoned: Item,
        *,
        filename: str,
        content_type: str,
        counter_shard: int,
        now: datetime,
        tenant: TenantShare | None = None,
    ) -> None:
        stamp = clock.iso(now)
        generation = int(tombstoned.get("generation", 0))

        def file_changed(item: Item | None) -> CommitRefused:
            if item is None:
                return FileVanished(None)
            if is_tombstoned(item) and int(item.get("generation", 0)) == generation:
                return ReapPending(item)
            return FileChanged(item)

        file = {
            "Update": {
                "TableName": self._s.files_table,
                "Key": to_item({"hash": version.hash}),
                # the tombstoned generation's object goes to the reaper (tombstone_shard/reap_after stay: the
                # reaper finds it after the grace period); this object is the new generation's canonical copy (a
                # `lost` mark goes: this copy exists)
                "UpdateExpression": "SET #gen = :next, s3_key = :key, #bucket = :bucket, etag = :etag,"
                " reap_key = :old_key, reap_etag = :old_etag, live_refs = :one, last_upload_at = :now,"
                " stores = if_not_exists(stores, :one) + :one ADD upload_count :one REMOVE #state, lost_at",
                "ConditionExpression": "live_refs = :zero AND #gen = :gen AND s3_key = :old_key"
                " AND attribute_not_exists(reap_key)",
                "ExpressionAttributeNames": {"#state": "state", "#gen": "generation", "#bucket": "bucket"},
                "ExpressionAttributeValues": {
                    ":zero": to_attr(0),
                    ":gen": to_attr(generation),
                    ":next": to_attr(generation + 1),
                    ":key": to_attr(version.key),
                    ":bucket": to_attr(version.bucket),
                    ":etag": to_attr(version.etag),
                    ":one": to_attr(1),
                    ":now": to_attr(stamp),
                    ":old_key": to_attr(tombstoned["s3_key"]),
                    ":old_etag": to_attr(tombstoned.get("etag", "")),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        plan = _Plan()
        plan.add("event", self._put_event_item(self._event_record(version, "stored", now)), EventRecorded)
        plan.add("file", file, file_changed)
        plan.add("claim", self._put_claim_item(key_claim(version.bucket, version.key), version.hash, stamp), KeyClaimed)
        self._add_finish_upload(plan, version, "stored", "stored", filename, content_type, stamp, tenant)
        self._add_tenant_ref(plan, tenant, version, filename, content_type, stamp)
        self._add_usage_moves(plan, tenant, version)
        plan.add("counters", self._add_counters_item(counter_shard, {"total_uploads": 1}))
        self._run(plan)

    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        stamp = clock.iso(now)
        record = {
            "upload_id": upload.upload_id,
            "status": "duplicate",
            "outcome": "duplicate",
            "owner": upload.owner,
            "tenant": upload.tenant,
            "hash": upload.hash,
            "filename": upload.filename,
            "size": upload.size,
            "content_type": upload.content_type,
            "created_at": stamp,
            "processed_at": stamp,
        }
        plan = _Plan(identity="upload")
        plan.add(
            "upload",
            {
                "Put": {
                    "TableName": self._s.uploads_table,
                    "Item": to_item(record),
                    "ConditionExpression": "attribute_not_exists(upload_id)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        )
        plan.add("file", self._count_duplicate_file_item(upload.hash, None, stamp, upload.size), FileVanished)
        # the reference exists (the tenant holds the content): +1 upload and last_upload_at, nothing else
        held = TenantShare(upload.tenant, held=True, counted=True)
        plan.add("tenant", self._tenant_ref_item(held, upload.hash, {}, stamp), TenantRefChanged)
        deltas = {"total_uploads": 1, "duplicates_avoided": 1, "total_s3_size_saved": upload.size}
        plan.add("counters", self._add_counters_item(counter_shard, deltas))
        self._run(plan)

    def adopt_copy(self, version: ObjectVersion, lost: Item, now: datetime, *, upload_deleted: bool = False) -> None:
        stamp = clock.iso(now)
        names = {"#h": "hash", "#k": "s3_key", "#e": "etag", "#b": "bucket", "#at": "adopted_at", "#st": "state"}
        values: dict[str, Any] = {
            ":key": to_attr(version.key),
            ":etag": to_attr(version.etag),
            ":bucket": to_attr(version.bucket),
            ":now": to_attr(stamp),
            ":lost": to_attr(str(lost.get("s3_key", ""))),
        }
        condition = "attribute_exists(#h) AND #k = :lost"
        if lost.get("etag"):
            values[":lost_etag"] = to_attr(str(lost["etag"]))
            condition += " AND #e = :lost_etag"
        plan = _Plan()
        plan.add(
            "file",
            {
                "Update": {
                    "TableName": self._s.files_table,
                    "Key": to_item({"hash": version.hash}),
                    "UpdateExpression": "SET #k = :key, #e = :etag, #b = :bucket, #at = :now REMOVE #st, lost_at",
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            FileChanged,
        )
        lost_claim = key_claim(str(lost.get("bucket") or version.bucket), str(lost.get("s3_key", "")))
        plan.add(
            "lost_claim",
            {
                "Delete": {
                    "TableName": self._s.events_table,
                    "Key": to_item({"event_key": lost_claim}),
                    # never another content's claim
                    "ConditionExpression": "attribute_not_exists(event_key) OR #h = :h",
                    "ExpressionAttributeNames": {"#h": "hash"},
                    "ExpressionAttributeValues": {":h": to_attr(version.hash)},
                }
            },
        )
        plan.add("claim", self._put_claim_item(key_claim(version.bucket, version.key), version.hash, stamp), KeyClaimed)
        if version.upload_id is not None and not upload_deleted:  # a deleted upload stays deleted (terminal)
            plan.add(
                "upload",
                {
                    "Update": {
                        "TableName": self._s.uploads_table,
                        "Key": to_item({"upload_id": version.upload_id}),
                        "UpdateExpression": "SET #s = :stored",
                        "ConditionExpression": "#ek = :ek AND #s <> :deleted",
                        "ExpressionAttributeNames": {"#s": "status", "#ek": "event_key"},
                        "ExpressionAttributeValues": {
                            ":stored": to_attr("stored"),
                            ":ek": to_attr(version.event_key),
                            ":deleted": to_attr("deleted"),
                        },
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                UploadTaken,
            )
        self._run(plan)

    def transact(self, items: list[dict[str, Any]]) -> None:
        """One TransactWriteItems (the seam the capacity bench and the counter simulation watch), with the
        ClientRequestToken of its exact request (:func:`request_token`)."""
        try:
            self._db.transact_write_items(TransactItems=items, ClientRequestToken=request_token(items))
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "TransactWriteItems") from error

    def _run(self, plan: _Plan) -> None:
        try:
            self.transact(plan.items)
        except CancelledTransaction as cancelled:
            if plan.applied_before(cancelled):
                return  # our own transaction, applied before its response was lost
            raise plan.refusal(cancelled) from cancelled

    # ---------------------------------------------------------------- items and transaction items
    def _event_record(self, version: ObjectVersion, outcome: str, now: datetime) -> Item:
        return {
            "event_key": version.event_key,
            "outcome": str(outcome),
            "hash": version.hash,
            "bucket": version.bucket,
            "key": version.key,
            "etag": version.etag,
            "size": version.size,
            "upload_id": version.upload_id,
            "processed_at": clock.iso(now),
            "ttl": clock.epoch(clock.plus(now, days=self._s.event_ttl_days)),
        }

    def _committed_event(self, version: ObjectVersion, outcome: str, now: datetime) -> Item:
        """The event record an ingest commit puts, marked with a nonce of this one request: a retry of the same
        request (botocore resends it) finds its own record, a concurrent delivery of the same event — whose
        record would otherwise be identical, down to the second — finds another's (a replay)."""
        return self._event_record(version, outcome, now) | {"commit": secrets.token_hex(8)}

    def _add_finish_upload(
        self,
        plan: _Plan,
        version: ObjectVersion,
        status: str,
        outcome: str,
        filename: str,
        content_type: str,
        stamp: str,
        tenant: TenantShare | None = None,
    ) -> None:
        if version.upload_id is None:
            return
        fields = {
            "status": status,
            "outcome": outcome,
            "hash": version.hash,
            "size": version.size,
            "processed_at": stamp,
            "s3_key": version.key,
            "bucket": version.bucket,
        }
        defaults = {"filename": filename, "content_type": content_type, "created_at": stamp}
        releasing = tenant is not None and tenant.pending_bytes > 0
        request = self._finish_upload_item(version.upload_id, fields, defaults, version.event_key, releasing=releasing)

        def refused(item: Item | None) -> CommitRefused:
            if releasing and item is not None and item.get("event_key") in (None, version.event_key):
                return PendingReleased(item)  # not taken: the reconcile released its quota bytes meanwhile
            return UploadTaken(item)

        plan.add("upload", request, refused)

    def _add_tenant_ref(
        self,
        plan: _Plan,
        tenant: TenantShare | None,
        version: ObjectVersion,
        filename: str,
        content_type: str,
        stamp: str,
    ) -> None:
        if tenant is None:
            return
        first = {
            "filename": filename,
            "content_type": content_type,
            "size": version.size,
            "created_at": stamp,
            "first_upload_id": version.upload_id,
        }
        plan.add("tenant", self._tenant_ref_item(tenant, version.hash, first, stamp), TenantRefChanged)

    def _tenant_ref_item(self, tenant: TenantShare, digest: str, first: Item, stamp: str) -> dict[str, Any]:
        """+1 upload on the tenant's reference to the content, conditioned on the item being exactly as the caller
        read (or assumed) it: absent (`attribute_not_exists`), at 0 (exists, count <= 0: awaiting the reaper, still
        counted in the tenant's `stored_bytes`) or held (count above 0) — so a race (a reference created, taken over
        or reaped meanwhile) is a TenantRefChanged and a new decision, never a size counted twice or not at all. A
        new reference (absent or at 0) takes `first` (the tenant's first filename, its `size`, dates...) anew; a held
        one keeps its own. Either leaves the reaper's index (a count above 0 is not the reaper's)."""
        names: dict[str, str] = {"#h": "hash", "#n": "upload_count", "#last": "last_upload_at"}
        values: dict[str, Any] = {":one": to_attr(1), ":now": to_attr(stamp), ":zero": to_attr(0)}
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
        return {
            "Update": {
                "TableName": self._s.tenant_files_table,
                "Key": to_item({"tenant": tenant.tenant, "hash": digest}),
                "UpdateExpression": "SET " + ", ".join(parts) + " ADD #n :one REMOVE reap_shard, reap_after",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _put_event_item(self, record: Item) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._s.events_table,
                "Item": to_item(record),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _put_new_file_item(self, record: Item) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._s.files_table,
                "Item": to_item(record),
                "ConditionExpression": "attribute_not_exists(#h)",
                "ExpressionAttributeNames": {"#h": "hash"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _put_claim_item(self, claim: str, digest: str, now: str) -> dict[str, Any]:
        """Claim the object key for the content stored there (no TTL: as long as the record lives)."""
        return {
            "Put": {
                "TableName": self._s.events_table,
                "Item": to_item({"event_key": claim, "hash": digest, "claimed_at": now}),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _no_claim_item(self, claim: str) -> dict[str, Any]:
        """Condition: no stored object lives at this key."""
        return {
            "ConditionCheck": {
                "TableName": self._s.events_table,
                "Key": to_item({"event_key": claim}),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _count_duplicate_file_item(
        self, digest: str, key: str | None, now: str, size: int, *, lost_too: bool = False
    ) -> dict[str, Any]:
        """+1 upload (and +1 live reference, + `size` saved bytes) on an existing file record — never the record
        whose object IS this key; only LIVE content: a live count above 0 (at 0 the content is tombstoned and is
        resurrected instead).
        `lost_too` (the ingest's duplicate): also a content the reconcile marked lost — the ingest then adopts this
        upload's copy; the precheck never counts one (it answers 409 only for content whose copy exists)."""
        condition = "attribute_exists(#h) AND " + _REFERENCED
        values: dict[str, Any] = {":one": to_attr(1), ":now": to_attr(now), ":zero": to_attr(0), ":size": to_attr(size)}
        names = {"#h": "hash"}
        if not lost_too:
            condition += " AND (attribute_not_exists(#state) OR #state <> :lost)"
            values[":lost"] = to_attr(LOST)
            names["#state"] = "state"
        if key is not None:
            condition += " AND s3_key <> :key"
            values[":key"] = to_attr(key)
        return {
            "Update": {
                "TableName": self._s.files_table,
                "Key": to_item({"hash": digest}),
                "UpdateExpression": "ADD upload_count :one, live_refs :one, saved_bytes :size"
                " SET last_upload_at = :now",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _finish_upload_item(
        self, upload_id: str, fields: Item, defaults: Item, event_key: str, *, releasing: bool = False
    ) -> dict[str, Any]:
        """Mark an upload processed by this event: SET fields, set defaults only where absent, leave the pending
        index and the quota's pending count (`quota_bytes`: `releasing` = the commit releases them, so they must
        still be there). Refused when another object version already processed it (a second PUT with the same
        URL)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        parts: list[str] = []
        for i, (name, value) in enumerate(fields.items()):
            names[f"#f{i}"] = name
            values[f":f{i}"] = to_attr(value)
            parts.append(f"#f{i} = :f{i}")
        for i, (name, value) in enumerate(defaults.items()):
            if value is None:
                continue
            names[f"#d{i}"] = name
            values[f":d{i}"] = to_attr(value)
            parts.append(f"#d{i} = if_not_exists(#d{i}, :d{i})")
        parts.append("#ek = :ek")
        values[":ek"] = to_attr(event_key)
        return {
            "Update": {
                "TableName": self._s.uploads_table,
                "Key": to_item({"upload_id": upload_id}),
                "UpdateExpression": "SET " + ", ".join(parts) + " REMOVE pending_shard, #ttl, quota_bytes",
                "ConditionExpression": "(attribute_not_exists(#ek) OR #ek = :ek)"
                " AND (attribute_not_exists(#del) OR #del <> :del)"  # a deleted (cancelled) upload stays so
                + (" AND attribute_exists(quota_bytes)" if releasing else ""),
                "ExpressionAttributeNames": {**names, "#ttl": "ttl", "#ek": "event_key", "#del": "status"},
                "ExpressionAttributeValues": {**values, ":del": to_attr("deleted")},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _add_counters_item(self, shard: int, deltas: Mapping[str, int]) -> dict[str, Any]:
        """ADD the deltas to one counter shard (`shard` < counter_shards; the caller spreads the load)."""
        names = {f"#c{i}": name for i, name in enumerate(deltas)}
        values = {f":c{i}": to_attr(delta) for i, delta in enumerate(deltas.values())}
        return {
            "Update": {
                "TableName": self._s.counters_table,
                "Key": to_item({"counter_id": self._s.shard_ids[shard]}),
                "UpdateExpression": "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(deltas))),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }


def usage_key(tenant: str) -> Item:
    """The tenant's usage item in the counters table: `usage#<tenant>` never collides with a shard (`shard#NNN`)
    or an audit scratch item (`audit#<uuid>`); stats read shard keys only, the audits sum COUNTER_FIELDS, which a
    usage item does not have."""
    return {"counter_id": f"usage#{tenant}"}


def request_token(items: list[dict[str, Any]]) -> str:
    """The ClientRequestToken of one TransactWriteItems: a digest of the operation's identity AND of every
    parameter of this very request.

    DynamoDB answers a request that repeats a token of the last 10 minutes with the first one's result, without
    applying it again — when every parameter is identical; a token reused with different parameters raises
    IdempotentParameterMismatchException. A lost response is retried by botocore, which resends the same
    serialized request: same items, same token, recognised. A retry the domain builds itself (a new attempt
    after a conflict or after botocore gave up) has a new timestamp and counter shard, perhaps a different
    decision, hence a new token: it must not be taken for the first request, and needs not be — whatever the
    first one applied is visible to the conditions (the event record, the upload record), which make the
    second a replay. Since the items carry the identity (event key, upload id) and the token carries the
    items, two operations never share a token and no parameter mismatch can occur. Where tokens are not
    honoured (moto: the local stack and the tests), :meth:`_Plan.applied_before` recognises our own
    transaction from the item its identity condition returns."""
    canonical = json.dumps(items, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(b"dfd-transact\n" + canonical.encode()).hexdigest()[:36]


def _already_put(error: ClientError | BotoCoreError, item: dict[str, Any]) -> bool:
    """A conditional PutItem refused because the very item it puts is there: our own put, applied before its
    response was lost and retried (the item returned by ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    if not isinstance(error, ClientError):
        return False
    if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
        return False
    old: Any = error.response.get("Item")
    return isinstance(old, dict) and bool(old) and from_item(old) == from_item(item)


Refusal = Callable[[Item | None], CommitRefused]

# The conflict a cancelled transaction raises is that of the first role, in this order, whose condition
# failed (several can fail at once: an event already recorded explains everything else); roles not listed
# follow in the plan's order.
_PRECEDENCE = ("event", "claim", "file", "upload", "tenant")


@dataclass
class _Plan:
    """The items of one TransactWriteItems, which role each plays, and the conflict each one's failed
    condition means."""

    items: list[dict[str, Any]] = field(default_factory=list)
    roles: dict[str, int] = field(default_factory=dict)
    conflicts: dict[str, Refusal] = field(default_factory=dict)
    # the role whose Put carries the operation's identity (an event key, an upload id): found there, exactly as
    # this plan puts it, it says the whole transaction was applied before (transactions are atomic)
    identity: str | None = None

    def add(self, role: str, request: dict[str, Any], conflict: Refusal | None = None) -> None:
        assert role not in self.roles, f"role {role} twice in one transaction"
        self.roles[role] = len(self.items)
        self.items.append(request)
        if conflict is not None:
            self.conflicts[role] = conflict

    def applied_before(self, cancelled: CancelledTransaction) -> bool:
        if self.identity is None or self.identity not in self.roles:
            return False
        index = self.roles[self.identity]
        put = self.items[index].get("Put")
        if not isinstance(put, dict) or not cancelled.failed(index):
            return False
        return cancelled.item(index) == from_item(put["Item"])

    def refusal(self, cancelled: CancelledTransaction) -> CommitRefused:
        order = [r for r in _PRECEDENCE if r in self.roles] + [r for r in self.roles if r not in _PRECEDENCE]
        for role in order:
            index = self.roles[role]
            if role in self.conflicts and cancelled.failed(index):
                return self.conflicts[role](cancelled.item(index))
        return CommitRefused(None, str(cancelled))
