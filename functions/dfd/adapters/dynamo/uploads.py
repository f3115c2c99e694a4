"""The uploads aggregate: registration (counted against its tenant's quota), multipart records, and the end of
an upload that holds no reference (expired, cancelled: its quota bytes released)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.dynamo.base import (
    Plan,
    Request,
    Store,
    condition_failed,
    conditional_write,
    refused_item,
    to_attr,
    to_item,
    translate,
)
from dfd.core import clock, usage
from dfd.core import codec as core_codec
from dfd.core.conflicts import CommitRefused, MultipartAttached, QuotaRefused
from dfd.core.records import TenantUsage, UploadRecord, UploadStatus
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from dfd.reconcile.ports import Cursor
    from dfd.uploads.ports import NewMultipart, NewUpload

_PENDING = UploadStatus.PENDING.value
_DELETED = UploadStatus.DELETED.value


class _Recorded(CommitRefused):
    """An upload with this id is recorded already (item: its record)."""

    item: UploadRecord | None


class Uploads(Store):
    def register_upload(
        self, upload: NewUpload, now: datetime, *, multipart: NewMultipart | None = None, pending_limit: bool = True
    ) -> None:
        """The upload record and its count on one of the tenant's usage shards, in ONE transaction. With a limit
        set the count goes to the gate (shard 0), conditioned on the limits less what the tenant's other shards
        hold (read first, in the same consistent Query as the gate; nobody writes them while a limit is set): the
        quota check (docs/design.md, "Quotas"). `multipart`: how the upload is cut. Without `pending_limit` the
        upload is neither limited by nor counted among the tenant's pending uploads (a drop-zone object: its bytes
        are there already; its record says so, `pending_uncounted`), only its bytes are."""
        s = self._s
        shard = usage.write_shard(upload.tenant, s, self._rng)
        others = TenantUsage()  # what the tenant's other shards hold
        if usage.limited(s):
            shards = self._usage_shards(upload.tenant)
            others = usage.total(found for other, found in shards.items() if other != shard)
            room = s.tenant_quota_bytes - others.used_bytes - upload.size
            if (s.tenant_quota_bytes and room < 0) or (
                pending_limit and s.tenant_pending_limit and others.pending_count >= s.tenant_pending_limit
            ):
                raise QuotaRefused(usage.total([shards.get(shard, TenantUsage()), others]))
        item = uploads_codec.pending_upload_item(
            upload,
            now,
            reconcile_after=clock.plus(now, seconds=s.reconcile_grace_seconds),
            pending_shard=f"p#{self._rng.randrange(s.pending_shards)}",
            ttl=clock.epoch(clock.plus(now, days=s.upload_ttl_days)),
            multipart=multipart,
        )
        if not pending_limit:
            item["pending_uncounted"] = True
        plan = Plan(identity="upload")  # a lost response, retried: recognised by the record it put
        plan.add("upload", self._put_new(s.uploads_table, item, "upload_id"))
        plan.add("usage", self._count_pending_item(shard, upload.size, others, pending_limit), QuotaRefused)
        try:
            self._run(plan)
        except QuotaRefused as refused:  # the gate as it was, with what the other shards hold: the tenant's usage
            raise QuotaRefused(usage.total([refused.item or TenantUsage(), others])) from None

    def record_rejected_upload(
        self, upload: NewUpload, reason: str, now: datetime, *, counter_shard: int
    ) -> UploadRecord:
        """One TransactWriteItems: the upload `rejected` for `reason` where no upload has the id, and
        `rejected_uploads` +1 on the counter shard (the condition keeps a replay from counting again). Returns the
        record there: the one written, or the one a previous delivery wrote (any status)."""
        ttl = clock.epoch(clock.plus(now, days=self._s.upload_ttl_days))
        item = uploads_codec.rejected_upload_item(upload, reason, now, ttl=ttl)
        plan = Plan(identity="upload")
        plan.add("upload", self._put_new(self._s.uploads_table, item, "upload_id"), _Recorded)
        plan.add("counters", self._add_counters_item(counter_shard, {"rejected_uploads": 1}))
        try:
            self._run(plan)
        except _Recorded as refused:
            if isinstance(refused.item, UploadRecord):
                return refused.item
            raise
        return uploads_codec.upload_record(item)

    def register_multipart_upload(self, upload: NewUpload, multipart: NewMultipart, now: datetime) -> None:
        self.register_upload(upload, now, multipart=multipart)

    def _count_pending_item(
        self, shard: usage.UsageShard, size: int, others: TenantUsage, pending_limit: bool = True
    ) -> Request:
        """+1 pending upload of `size` bytes on a usage shard of the tenant, conditioned on the limits less what its
        other shards hold (DynamoDB conditions have no arithmetic: `used_bytes` = pending + stored is kept for
        this comparison)."""
        s = self._s
        values: dict[str, Any] = {}
        conditions: list[str] = []
        names = {"#count": core_codec.USAGE_ATTRS["pending_count"], "#used": core_codec.USAGE_ATTRS["used_bytes"]}
        if s.tenant_pending_limit and pending_limit:
            conditions.append("(attribute_not_exists(#count) OR #count < :pending_limit)")
            values[":pending_limit"] = to_attr(s.tenant_pending_limit - others.pending_count)
        if s.tenant_quota_bytes:
            conditions.append("(attribute_not_exists(#used) OR #used <= :room)")
            values[":room"] = to_attr(s.tenant_quota_bytes - others.used_bytes - size)
        deltas = {"pending_count": 1 if pending_limit else 0, "pending_bytes": size, "used_bytes": size}
        if not conditions:
            return self._add_usage_item(
                shard.tenant, deltas, shard=shard, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        return self._add_usage_item(
            shard.tenant,
            deltas,
            shard=shard,
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeNames={key: name for key, name in names.items() if key in " ".join(conditions)},
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def _release_pending_item(self, tenant: str, quota_bytes: int, counted: bool = True) -> Request:
        """-1 pending upload (`counted`: it was among them) of `quota_bytes` on the tenant's usage item (never
        conditioned)."""
        deltas = {"pending_count": -1 if counted else 0, "pending_bytes": -quota_bytes, "used_bytes": -quota_bytes}
        return self._add_usage_item(tenant, {name: delta for name, delta in deltas.items() if delta})

    # ---------------------------------------------------------------- the reconcile's pending pass
    # (dfd.reconcile.service)
    def due_uploads(
        self, shard: int, now: datetime, limit: int, start: Cursor | None
    ) -> tuple[list[UploadRecord], Cursor | None]:
        """One page of the sparse PendingIndex's shard `p#<shard>`: pending uploads whose grace ended by `now`."""
        kwargs: dict[str, Any] = {
            "TableName": self._s.uploads_table,
            "IndexName": "PendingIndex",
            "KeyConditionExpression": "pending_shard = :shard AND reconcile_after <= :now",
            "ExpressionAttributeValues": {":shard": to_attr(f"p#{shard}"), ":now": to_attr(clock.iso(now))},
        }

        def position(item: core_codec.Item) -> Cursor:
            keys = ("pending_shard", "reconcile_after", "upload_id")
            return {name: str(item[name]) for name in keys}

        items, last = self._page("Query", self._db.query, kwargs, limit, start, position)
        return [uploads_codec.upload_record(item) for item in items], last

    def count_redrive(self, upload_id: str, now: datetime) -> int | None:
        """+1 re-drive on a pending upload; its count, or None when it is no longer pending."""
        try:
            answer = self._db.update_item(
                TableName=self._s.uploads_table,
                Key=to_item(uploads_codec.upload_key(upload_id)),
                UpdateExpression="ADD redrives :one SET last_redrive_at = :now",
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":one": to_attr(1),
                    ":now": to_attr(clock.iso(now)),
                    ":pending": to_attr(_PENDING),
                },
                ReturnValues="UPDATED_NEW",
            )
        except (ClientError, BotoCoreError) as error:
            if condition_failed(error):
                return None
            raise translate(error, "UpdateItem") from error
        return int(answer["Attributes"]["redrives"]["N"])

    def give_up_upload(
        self,
        upload: UploadRecord,
        status: UploadStatus,
        now: datetime,
        *,
        counter_shard: int,
        failure: str | None = None,
    ) -> bool:
        """A pending upload the reconcile gives up on becomes `status` (expired: no object came; failed: its ingest
        never completed) with when (`expired_at`/`failed_at`) and why (`failure`), releasing its quota bytes as
        read, and counted (`expired_uploads`/`failed_uploads` +1 on one counter shard) in the same transaction;
        False when it is no longer pending (an ingest won) or no longer holds those bytes."""
        update = f"SET #status = :status, {status.value}_at = :now" + (", failure = :why" if failure else "")
        request_values = {":why": to_attr(failure)} if failure else {}
        return self._end_upload(
            upload.upload_id,
            update,
            UploadStatus.PENDING,
            status,
            now,
            upload.tenant,
            upload.quota_bytes,
            values=request_values,
            counted=not upload.pending_uncounted,
            counters=(counter_shard, {f"{status.value}_uploads": 1}),
        )

    def reject_pending_upload(self, upload: UploadRecord, reason: str, now: datetime, *, counter_shard: int) -> bool:
        """A pending drop-zone upload whose object cannot be copied becomes `rejected` for `reason` (`failed_at`,
        `failure`, as record_rejected_upload writes one), releasing its quota bytes as read, and counted
        (`rejected_uploads` +1 on the counter shard) in the same transaction; False when it is no longer pending or
        no longer holds those bytes."""
        return self._end_upload(
            upload.upload_id,
            "SET #status = :status, failed_at = :now, failure = :why",
            UploadStatus.PENDING,
            UploadStatus.REJECTED,
            now,
            upload.tenant,
            upload.quota_bytes,
            values={":why": to_attr(reason)},
            counted=not upload.pending_uncounted,
            counters=(counter_shard, {"rejected_uploads": 1}),
        )

    # ---------------------------------------------------------------- multipart (dfd.uploads.multipart)
    def attach_s3_upload(self, upload_id: str, s3_upload_id: str, *, part_checksums: bool) -> None:
        try:
            self._db.update_item(
                TableName=self._s.uploads_table,
                Key=to_item(uploads_codec.upload_key(upload_id)),
                UpdateExpression="SET s3_upload_id = :id, part_checksums = :checksums",
                ConditionExpression="attribute_exists(upload_id) AND attribute_not_exists(s3_upload_id)"
                " AND #status = :pending",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":id": to_attr(s3_upload_id),
                    ":checksums": to_attr(part_checksums),
                    ":pending": to_attr(_PENDING),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as error:
            if condition_failed(error):
                item = refused_item(error)
                raise MultipartAttached(uploads_codec.upload_record(item) if item else None) from error
            raise translate(error, "UpdateItem") from error

    def mark_multipart_completed(self, upload_id: str, now: datetime) -> None:
        try:
            self._db.update_item(
                TableName=self._s.uploads_table,
                Key=to_item(uploads_codec.upload_key(upload_id)),
                UpdateExpression="SET completed_at = if_not_exists(completed_at, :now)",
                ConditionExpression="attribute_exists(upload_id)",
                ExpressionAttributeValues={":now": to_attr(clock.iso(now))},
            )
        except (ClientError, BotoCoreError) as error:
            if not condition_failed(error):  # the record is gone (TTL): nothing to note
                raise translate(error, "UpdateItem") from error

    # ---------------------------------------------------------------- an upload ends without a reference
    def end_pending_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        """status = `status`, out of the pending index (the TTL stays: the record ages out as usual)."""
        # a deleted (cancelled) upload also says when, as DELETE /uploads/{id} shows it (dfd.deletes.service)
        update = "SET #status = :status, ended_at = :now" + (", deleted_at = :now" if status == _DELETED else "")
        return self._end_upload(upload_id, update, UploadStatus.PENDING, status, now, tenant, quota_bytes)

    def cancel_upload(
        self,
        upload_id: str,
        status: UploadStatus,
        now: datetime,
        *,
        tenant: str | None = None,
        quota_bytes: int = 0,
        counted: bool = True,
    ) -> bool:
        """status `deleted` + `deleted_at`, out of the pending index, only while the status is still `status`."""
        update = "SET #status = :status, deleted_at = :now"
        return self._end_upload(
            upload_id, update, status, UploadStatus.DELETED, now, tenant, quota_bytes, counted=counted
        )

    def _end_upload(
        self,
        upload_id: str,
        update: str,
        read: UploadStatus,
        status: UploadStatus,
        now: datetime,
        tenant: str | None,
        quota_bytes: int,
        *,
        values: dict[str, Any] | None = None,
        counted: bool = True,
        counters: tuple[int, Mapping[str, int]] | None = None,
    ) -> bool:
        """An upload that holds no reference ends (`update`, conditioned on its status still `read`, out of the
        pending index). One still counted against its tenant's quota (`tenant`, `quota_bytes` > 0: as read from its
        record) releases those bytes in the same transaction (and, `counted`, one of its pending uploads: not when
        its record is `pending_uncounted`), conditioned on the record still holding them (as the reconcile's expire
        does), and `counters` (a counter shard, its deltas) in it too; False when a condition fails (the caller
        reads again)."""
        request: dict[str, Any] = {
            "TableName": self._s.uploads_table,
            "Key": to_item(uploads_codec.upload_key(upload_id)),
            "UpdateExpression": update + " REMOVE pending_shard",
            "ConditionExpression": "#status = :read",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":status": to_attr(status.value),
                ":now": to_attr(clock.iso(now)),
                ":read": to_attr(read.value),
                **(values or {}),
            },
        }
        releases = tenant is not None and quota_bytes > 0
        if releases:
            request["UpdateExpression"] += ", quota_bytes"
            request["ConditionExpression"] += " AND quota_bytes = :quota"
            request["ExpressionAttributeValues"][":quota"] = to_attr(quota_bytes)
        if releases or counters is not None:
            plan = Plan()
            plan.add("upload", {"Update": request})
            if tenant is not None and releases:
                plan.add("usage", self._release_pending_item(tenant, quota_bytes, counted))
            if counters is not None:
                plan.add("counters", self._add_counters_item(*counters))
            try:
                self._run(plan)
            except CommitRefused:
                return False
            return True
        return conditional_write(lambda: self._db.update_item(**request), "UpdateItem")
