"""The uploads aggregate (dfd.adapters.dynamo.uploads): registration, multipart records, cancel, the reconcile's
pending uploads."""

from __future__ import annotations

from datetime import datetime

from dfd.core import clock
from dfd.core import codec as core_codec
from dfd.core.conflicts import (
    CommitRefused,
    MultipartAttached,
    QuotaRefused,
)
from dfd.core.records import (
    UploadRecord,
    UploadStatus,
)
from dfd.uploads import codec as uploads_codec
from dfd.uploads.ports import NewMultipart, NewUpload
from tests.unit.fakes.base import FakeTables, Item, _parsed


class FakeUploads(FakeTables):
    # ---------------------------------------------------------------- uploads
    def register_upload(
        self, upload: NewUpload, now: datetime, *, multipart: NewMultipart | None = None, pending_limit: bool = True
    ) -> None:
        if upload.upload_id in self.uploads:  # the adapter's put of a new item, refused: registered before
            raise CommitRefused(None, f"upload {upload.upload_id} is registered already")
        usage = core_codec.tenant_usage(self.usage.get(upload.tenant))
        bytes_limit, limit_pending = self.settings.tenant_quota_bytes, self.settings.tenant_pending_limit
        if (pending_limit and limit_pending and usage.pending_count >= limit_pending) or (
            bytes_limit and usage.used_bytes + upload.size > bytes_limit
        ):
            raise QuotaRefused(_parsed(core_codec.tenant_usage, self.usage.get(upload.tenant)))
        self._move(upload.tenant, pending_count=int(pending_limit), pending_bytes=upload.size, used_bytes=upload.size)
        self.uploads[upload.upload_id] = uploads_codec.pending_upload_item(
            upload,
            now,
            reconcile_after=clock.plus(now, seconds=self.settings.reconcile_grace_seconds),
            pending_shard="p#0",
            ttl=clock.epoch(clock.plus(now, days=self.settings.upload_ttl_days)),
            multipart=multipart,
        )
        if not pending_limit:
            self.uploads[upload.upload_id]["pending_uncounted"] = True

    def reject_pending_upload(self, upload: UploadRecord, reason: str, now: datetime, *, counter_shard: int) -> bool:
        record = self.uploads.get(upload.upload_id)
        if record is None or record.get("status") != UploadStatus.PENDING:
            return False
        if not self._released(record, upload.tenant, upload.quota_bytes, not upload.pending_uncounted):
            return False
        record.update(status=UploadStatus.REJECTED.value, failed_at=clock.iso(now), failure=reason)
        record.pop("pending_shard", None)
        self._add_counters(counter_shard, rejected_uploads=1)
        return True

    def record_rejected_upload(
        self, upload: NewUpload, reason: str, now: datetime, *, counter_shard: int
    ) -> UploadRecord:
        if upload.upload_id not in self.uploads:
            ttl = clock.epoch(clock.plus(now, days=self.settings.upload_ttl_days))
            self.uploads[upload.upload_id] = uploads_codec.rejected_upload_item(upload, reason, now, ttl=ttl)
            self._add_counters(counter_shard, rejected_uploads=1)
        return uploads_codec.upload_record(self.uploads[upload.upload_id])

    def register_multipart_upload(self, upload: NewUpload, multipart: NewMultipart, now: datetime) -> None:
        self.register_upload(upload, now, multipart=multipart)

    def _move(self, tenant: str, **deltas: int) -> None:
        """ADD `deltas` (by TenantUsage field) to the tenant's usage item, its attributes named as the adapter's."""
        usage = self.usage.setdefault(tenant, {})
        for name, delta in deltas.items():
            if attr := core_codec.USAGE_ATTRS.get(name):  # pending_bytes is used - stored
                usage[attr] = usage.get(attr, 0) + delta

    def attach_s3_upload(self, upload_id: str, s3_upload_id: str, *, part_checksums: bool) -> None:
        record = self.uploads.get(upload_id)
        if record is None or record.get("s3_upload_id") or record.get("status") != UploadStatus.PENDING:
            raise MultipartAttached(_parsed(uploads_codec.upload_record, record))
        record.update(s3_upload_id=s3_upload_id, part_checksums=part_checksums)

    def mark_multipart_completed(self, upload_id: str, now: datetime) -> None:
        if upload_id in self.uploads:
            self.uploads[upload_id].setdefault("completed_at", clock.iso(now))

    def end_pending_upload(
        self, upload_id: str, status: UploadStatus, now: datetime, *, tenant: str | None = None, quota_bytes: int = 0
    ) -> bool:
        record = self.uploads.get(upload_id)
        if record is None or record.get("status") != UploadStatus.PENDING:
            return False
        if not self._released(record, tenant, quota_bytes):
            return False
        record.update(status=UploadStatus(status).value, ended_at=clock.iso(now))
        if status == UploadStatus.DELETED:
            record["deleted_at"] = clock.iso(now)
        record.pop("pending_shard", None)
        return True

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
        record = self.uploads.get(upload_id)
        if record is None or record.get("status") != status:
            return False
        if not self._released(record, tenant, quota_bytes, counted):
            return False
        record.update(status=UploadStatus.DELETED.value, deleted_at=clock.iso(now))
        record.pop("pending_shard", None)
        return True

    def _released(self, record: Item, tenant: str | None, quota_bytes: int, counted: bool = True) -> bool:
        """The adapter's _end_upload: with a tenant and quota bytes, the record must still hold exactly those
        (False: the condition fails, nothing changes); they leave it and the tenant's pending usage together (and
        one pending upload, `counted`)."""
        if tenant is None or quota_bytes <= 0:
            return True
        if record.get("quota_bytes") != quota_bytes:
            return False
        del record["quota_bytes"]
        self._move(tenant, pending_count=-int(counted), pending_bytes=-quota_bytes, used_bytes=-quota_bytes)
        return True
